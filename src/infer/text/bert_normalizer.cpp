#include "infer/text/bert_normalizer.h"

#include <algorithm>

#include "infer/text/unicode_props.h"
#include "infer/text/utf8.h"

namespace ferry::infer::text {
namespace {

// ASCII needs no table: what clean_text and the pre-tokenizer do with each byte.
enum class Ascii : std::uint8_t { Letter, Upper, Space, Dropped, Punct };

constexpr Ascii ascii_class(unsigned char b) {
  if (b == ' ' || b == '\t' || b == '\n' || b == '\r') return Ascii::Space;
  if (b < 0x20 || b == 0x7F) return Ascii::Dropped;  // NUL and the other controls
  if ((b >= 33 && b <= 47) || (b >= 58 && b <= 64) || (b >= 91 && b <= 96) || (b >= 123 && b <= 126)) {
    return Ascii::Punct;
  }
  if (b >= 'A' && b <= 'Z') return Ascii::Upper;
  return Ascii::Letter;
}

struct AsciiTable {
  Ascii cls[128];
  constexpr AsciiTable() : cls() {
    for (int b = 0; b < 128; ++b) cls[b] = ascii_class(static_cast<unsigned char>(b));
  }
};
constexpr AsciiTable kAscii;

// NFD's canonical ordering is a stable sort of each run of marks by combining
// class. Runs are short in real text; a long one (only crafted input has one)
// goes to std::stable_sort rather than quadratic insertion.
constexpr std::size_t kInsertionSortMax = 16;

}  // namespace

void WordSplitter::split(std::string_view s, bool lowercase, bool strip_accents, bool offsets) {
  lowercase_ = lowercase;
  strip_accents_ = strip_accents;
  offsets_ = offsets;
  origins_.clear();
  text_.clear();
  spans_.clear();
  marks_.clear();
  word_begin_ = 0;
  word_chars_ = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    from_.begin = static_cast<std::uint32_t>(i);
    if (b < 0x80) {
      ++i;
      from_.end = static_cast<std::uint32_t>(i);
      ascii(b);
    } else {
      const char32_t cp = decode_utf8(s, i);
      from_.end = static_cast<std::uint32_t>(i);
      non_ascii(cp);
    }
  }
  flush_marks();
  end_word();
}

void WordSplitter::ascii(unsigned char b) {
  switch (kAscii.cls[b]) {
    case Ascii::Dropped: return;  // gone before NFD: the marks around it stay one run
    case Ascii::Space:
      flush_marks();
      end_word();
      return;
    case Ascii::Punct:
      flush_marks();
      end_word();
      append(static_cast<char>(b));
      word_chars_ = 1;
      end_word();
      return;
    case Ascii::Upper:
      flush_marks();
      append(static_cast<char>(lowercase_ ? b + ('a' - 'A') : b));
      ++word_chars_;
      return;
    case Ascii::Letter:
      flush_marks();
      append(static_cast<char>(b));
      ++word_chars_;
      return;
  }
}

void WordSplitter::non_ascii(char32_t cp) {
  // The steps in the reference's order: clean_text, handle_chinese_chars, NFD.
  if (is_dropped(cp)) return;
  if (is_space(cp)) {
    flush_marks();
    end_word();
    return;
  }
  const bool cjk = is_cjk(cp);
  if (cjk) {  // the spaces put around it end the words on either side
    flush_marks();
    end_word();
  }
  if (!strip_accents_) {
    emit(cp);  // the reference runs NFD only to strip accents
  } else {
    char32_t d[kMaxDecomposition];
    const std::size_t n = decompose(cp, d);
    for (std::size_t k = 0; k < n; ++k) order(d[k]);
  }
  if (cjk) {
    flush_marks();
    end_word();
  }
}

// NFD's canonical ordering, fused with dropping nonspacing marks: dropping a
// mark before the sort leaves the other marks where the stable sort would put
// them, but a starter still ends the run even when it is dropped.
void WordSplitter::order(char32_t cp) {
  const std::uint8_t ccc = combining_class(cp);
  if (ccc == 0) {
    flush_marks();
    if (!is_nonspacing_mark(cp)) emit(cp);
    return;
  }
  if (is_nonspacing_mark(cp)) return;
  marks_.push_back({cp, ccc, from_});
}

void WordSplitter::flush_marks() {
  if (marks_.empty()) return;
  const auto by_class = [](const Mark& a, const Mark& b) { return a.ccc < b.ccc; };
  if (marks_.size() <= kInsertionSortMax) {
    for (std::size_t i = 1; i < marks_.size(); ++i) {
      const Mark m = marks_[i];
      std::size_t j = i;
      for (; j > 0 && by_class(m, marks_[j - 1]); --j) marks_[j] = marks_[j - 1];
      marks_[j] = m;
    }
  } else {
    std::stable_sort(marks_.begin(), marks_.end(), by_class);
  }
  const Origin reading = from_;
  for (const Mark& m : marks_) {
    from_ = m.from;  // a mark sorted into place still came from its own bytes
    emit(m.cp);
  }
  from_ = reading;
  marks_.clear();
}

// Lower-cases one normalized code point (one to three come out).
void WordSplitter::emit(char32_t cp) {
  if (lowercase_) {
    if (cp < 0x80) {
      if (cp >= 'A' && cp <= 'Z') cp += 'a' - 'A';
    } else if (const CodePoints lower = lowercase(cp); lower.size != 0) {
      for (std::size_t k = 0; k < lower.size; ++k) put(lower.data[k]);
      return;
    }
  }
  put(cp);
}

// The pre-tokenizer's view of a final code point: punctuation is a word by
// itself; nothing here is whitespace (gen_unicode_tables.py checks that no
// decomposition or lower-case form is).
void WordSplitter::put(char32_t cp) {
  const bool punct = cp < 0x80 ? kAscii.cls[cp] == Ascii::Punct : is_punctuation(cp);
  if (punct) end_word();
  append_utf8(cp, text_);
  if (offsets_) origins_.resize(text_.size(), from_);
  ++word_chars_;
  if (punct) end_word();
}

void WordSplitter::append(char c) {
  text_.push_back(c);
  if (offsets_) origins_.push_back(from_);
}

void WordSplitter::end_word() {
  if (text_.size() > word_begin_) spans_.push_back({word_begin_, text_.size(), word_chars_});
  word_begin_ = text_.size();
  word_chars_ = 0;
}

}  // namespace ferry::infer::text
