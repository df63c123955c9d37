// WordPieceTokenizer (include/ferry/infer/tokenizer.h): the special tokens,
// then per stretch of text between them WordSplitter's words, WordPiece's
// pieces, [CLS] ... [SEP] around them and truncation.
#include "ferry/infer/tokenizer.h"

#include <string>
#include <utility>

#include "ferry/core/status.h"
#include "infer/text/bert_normalizer.h"
#include "infer/text/vocab.h"
#include "infer/text/wordpiece.h"

namespace ferry::infer {

namespace {

// The model's added tokens (tokenizer.json "added_tokens", normalized: false):
// the reference finds these in the raw text before normalizing it, so that a
// literal "[MASK]" in a request is token 103, not "[", "mask", "]".
constexpr std::string_view kSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

struct Special {
  std::string_view text;
  std::int32_t id;
};

// Per-thread buffers, so that encode() allocates nothing once they have grown
// and many threads can encode with one tokenizer.
struct Scratch {
  text::WordSplitter words;
  std::vector<std::int32_t> pieces;
  std::vector<std::size_t> ends;
};

// The reference's WordPiece decoder cleans each token after putting its space
// before it (tokenizers' decoders::wordpiece::cleanup): these replacements,
// in this order. Most can only match a vocabulary token that holds an
// apostrophe or a space; they are kept for ids a client sends.
constexpr std::pair<std::string_view, std::string_view> kCleanup[] = {
    {" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},   {" ' ", "'"},  {" n't", "n't"},
    {" 'm", "'m"},   {" do not", " don't"},           {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// Counts every id of the text and appends those that fit before [SEP].
class IdSink {
 public:
  IdSink(std::vector<std::int32_t>& out, std::size_t room) : out_(out), room_(room) {}
  void push(std::int32_t id) {
    if (count_ < room_) out_.push_back(id);
    ++count_;
  }
  std::size_t count() const noexcept { return count_; }

 private:
  std::vector<std::int32_t>& out_;
  std::size_t room_;
  std::size_t count_ = 0;
};

}  // namespace

struct WordPieceTokenizer::Impl {
  TokenizerOptions options;
  text::Vocab vocab;
  std::int32_t cls = -1, sep = -1, unk = -1;
  std::vector<Special> specials;  // those of kSpecialTokens the vocabulary has

  void encode_text(std::string_view utf8, Scratch& s, IdSink& ids) const {
    s.words.split(utf8, options.lowercase, options.strip_accents);
    for (std::size_t i = 0; i < s.words.size(); ++i) {
      s.pieces.clear();
      if (s.words.chars(i) > options.max_chars_per_word ||
          !text::split_word(s.words.word(i), vocab, s.pieces)) {
        ids.push(unk);
        continue;
      }
      for (std::int32_t id : s.pieces) ids.push(id);
    }
  }

  // tokenize()'s share of one stretch of text between special tokens, which
  // starts at byte base of the whole text.
  void tokenize_text(std::string_view utf8, std::size_t base, Scratch& s, std::vector<Token>& out) const {
    s.words.split(utf8, options.lowercase, options.strip_accents, /*offsets=*/true);
    for (std::size_t i = 0; i < s.words.size(); ++i) {
      const std::string_view word = s.words.word(i);
      s.pieces.clear();
      s.ends.clear();
      if (s.words.chars(i) > options.max_chars_per_word || !text::split_word(word, vocab, s.pieces, &s.ends)) {
        const auto [start, stop] = s.words.source(i, 0, word.size());
        out.push_back({unk, false, base + start, base + stop});
        continue;
      }
      for (std::size_t p = 0; p < s.pieces.size(); ++p) {
        const auto [start, stop] = s.words.source(i, p == 0 ? 0 : s.ends[p - 1], s.ends[p]);
        out.push_back({s.pieces[p], false, base + start, base + stop});
      }
    }
  }

  // The special token that starts at utf8[pos], if any.
  const Special* special_at(std::string_view utf8, std::size_t pos) const noexcept {
    for (const Special& sp : specials) {
      if (utf8.compare(pos, sp.text.size(), sp.text) == 0) return &sp;
    }
    return nullptr;
  }
};

WordPieceTokenizer WordPieceTokenizer::load(const std::string& vocab_path, TokenizerOptions options) {
  auto impl = std::make_unique<Impl>(Impl{options, text::load_vocab(vocab_path), -1, -1, -1, {}});
  const auto required = [&](std::string_view token) {
    const std::int32_t id = impl->vocab.whole.find(token);
    if (id < 0) {
      throw Error("vocabulary " + vocab_path + " has no " + std::string(token) +
                  " token: is it a BERT WordPiece vocab.txt?");
    }
    return id;
  };
  impl->unk = required("[UNK]");
  impl->cls = required("[CLS]");
  impl->sep = required("[SEP]");
  for (std::string_view token : kSpecialTokens) {
    if (const std::int32_t id = impl->vocab.whole.find(token); id >= 0) impl->specials.push_back({token, id});
  }
  return WordPieceTokenizer(std::move(impl));
}

WordPieceTokenizer::Encoding WordPieceTokenizer::encode(std::string_view utf8, std::size_t max_tokens,
                                                        std::vector<std::int32_t>& out) const {
  if (max_tokens < 2) {
    throw Error("max_tokens " + std::to_string(max_tokens) +
                " leaves no room for [CLS] and [SEP]: need >= 2");
  }
  thread_local Scratch scratch;
  out.push_back(impl_->cls);
  IdSink ids(out, max_tokens - 2);
  std::size_t text_begin = 0;
  for (std::size_t pos = utf8.find('['); pos != std::string_view::npos; pos = utf8.find('[', pos)) {
    const Special* sp = impl_->special_at(utf8, pos);
    if (sp == nullptr) {
      ++pos;
      continue;
    }
    impl_->encode_text(utf8.substr(text_begin, pos - text_begin), scratch, ids);
    ids.push(sp->id);
    pos += sp->text.size();
    text_begin = pos;
  }
  impl_->encode_text(utf8.substr(text_begin), scratch, ids);
  out.push_back(impl_->sep);
  const std::size_t full_length = ids.count() + 2;
  return Encoding{full_length, full_length > max_tokens};
}

void WordPieceTokenizer::tokenize(std::string_view utf8, bool add_special_tokens, std::vector<Token>& out) const {
  thread_local Scratch scratch;
  out.clear();
  if (add_special_tokens) out.push_back({impl_->cls, true, 0, 0});
  // The same walk over special tokens as encode().
  std::size_t text_begin = 0;
  for (std::size_t pos = utf8.find('['); pos != std::string_view::npos; pos = utf8.find('[', pos)) {
    const Special* sp = impl_->special_at(utf8, pos);
    if (sp == nullptr) {
      ++pos;
      continue;
    }
    impl_->tokenize_text(utf8.substr(text_begin, pos - text_begin), text_begin, scratch, out);
    out.push_back({sp->id, true, pos, pos + sp->text.size()});
    pos += sp->text.size();
    text_begin = pos;
  }
  impl_->tokenize_text(utf8.substr(text_begin), text_begin, scratch, out);
  if (add_special_tokens) out.push_back({impl_->sep, true, 0, 0});
}

std::string WordPieceTokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  std::string piece;
  bool first = true;
  for (const std::int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    const std::string_view token = token_text(id);
    piece.clear();
    if (!first && token.starts_with("##")) {
      piece = token.substr(2);
    } else {
      if (!first) piece = " ";
      piece += token;
    }
    first = false;
    for (const auto& [from, to] : kCleanup) replace_all(piece, from, to);
    out += piece;
  }
  return out;
}

std::string_view WordPieceTokenizer::token_text(std::int32_t id) const noexcept {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->vocab.tokens.size()) return {};
  return impl_->vocab.tokens[static_cast<std::size_t>(id)];
}

bool WordPieceTokenizer::is_special(std::int32_t id) const noexcept {
  for (const Special& sp : impl_->specials)
    if (sp.id == id) return true;
  return false;
}

std::size_t WordPieceTokenizer::vocab_size() const noexcept {
  return impl_->vocab.size;
}
std::int32_t WordPieceTokenizer::id_of(std::string_view token) const noexcept {
  return impl_->vocab.whole.find(token);
}
std::int32_t WordPieceTokenizer::cls_id() const noexcept {
  return impl_->cls;
}
std::int32_t WordPieceTokenizer::sep_id() const noexcept {
  return impl_->sep;
}
std::int32_t WordPieceTokenizer::unk_id() const noexcept {
  return impl_->unk;
}

WordPieceTokenizer::WordPieceTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WordPieceTokenizer::WordPieceTokenizer(WordPieceTokenizer&&) noexcept = default;
WordPieceTokenizer& WordPieceTokenizer::operator=(WordPieceTokenizer&&) noexcept = default;
WordPieceTokenizer::~WordPieceTokenizer() = default;

}  // namespace ferry::infer
