// WordPieceTokenizer (include/ferry/infer/tokenizer.h): the special tokens,
// then per stretch of text between them WordSplitter's words, WordPiece's
// pieces, [CLS] ... [SEP] around them and truncation.
#include "ferry/infer/tokenizer.h"

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
};

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
