#pragma once
// The reference's BertNormalizer and BertPreTokenizer in one pass over the
// text: clean_text, handle_chinese_chars, strip_accents (NFD, then nonspacing
// marks dropped), lowercase, then splitting on whitespace and making each
// punctuation character a word. The words land in one reused buffer, so that
// splitting a text allocates nothing once the buffers have grown.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::infer::text {

class WordSplitter {
 public:
  // Replaces the words held with those of utf8 (any bytes: an invalid UTF-8
  // sequence reads as U+FFFD, which clean_text drops). With offsets, it also
  // records where in utf8 each byte of the words came from (source()).
  void split(std::string_view utf8, bool lowercase, bool strip_accents, bool offsets = false);

  std::size_t size() const noexcept { return spans_.size(); }
  std::string_view word(std::size_t i) const noexcept {
    return std::string_view(text_).substr(spans_[i].begin, spans_[i].end - spans_[i].begin);
  }
  std::size_t chars(std::size_t i) const noexcept { return spans_[i].chars; }  // code points in word(i)
  // The bytes of utf8 that word(i)'s bytes [begin, end) came from, as
  // [first, last) offsets: whole source code points, so that an accent
  // stripped or a letter lower-cased maps back to what the client sent. The
  // span of all of them: NFD's ordering may have moved a mark past another.
  // Only after split(..., offsets = true); begin < end <= word(i).size().
  std::pair<std::size_t, std::size_t> source(std::size_t i, std::size_t begin, std::size_t end) const noexcept {
    std::size_t first = origins_[spans_[i].begin + begin].begin, last = 0;
    for (std::size_t k = spans_[i].begin + begin; k < spans_[i].begin + end; ++k) {
      first = std::min<std::size_t>(first, origins_[k].begin);
      last = std::max<std::size_t>(last, origins_[k].end);
    }
    return {first, last};
  }

 private:
  struct Span {
    std::size_t begin, end, chars;
  };
  struct Origin {
    std::uint32_t begin, end;  // a source code point's bytes
  };
  struct Mark {
    char32_t cp;
    std::uint8_t ccc;
    Origin from;
  };

  void ascii(unsigned char b);
  void non_ascii(char32_t cp);
  void order(char32_t cp);
  void flush_marks();
  void emit(char32_t cp);
  void put(char32_t cp);
  void end_word();
  void append(char c);

  bool lowercase_ = true;
  bool strip_accents_ = true;
  std::string text_;            // the words' UTF-8, back to back
  std::vector<Span> spans_;     // each word's place in text_
  std::vector<Mark> marks_;     // a run of combining marks NFD has yet to order
  std::size_t word_begin_ = 0;  // where the word being built starts in text_
  std::size_t word_chars_ = 0;
  bool offsets_ = false;
  Origin from_{};                // the source code point being read
  std::vector<Origin> origins_;  // with offsets_: one per byte of text_
};

}  // namespace ferry::infer::text
