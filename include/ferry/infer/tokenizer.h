#pragma once
// BERT's WordPiece tokenizer, as the reference (Hugging Face tokenizers'
// BertNormalizer + BertPreTokenizer + WordPiece) does it: text cleanup
// (control characters dropped, whitespace to spaces), CJK characters split
// out, lower-casing, accent stripping (NFD, combining marks dropped),
// splitting on whitespace and punctuation, greedy longest-match-first
// WordPiece with "##" continuations, [UNK] for a word of more than
// max_chars_per_word characters or with no match, and [CLS] ... [SEP] around it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::infer {

struct TokenizerOptions {
  bool lowercase = true;
  bool strip_accents = true;  // as BERT uncased: follows lowercase unless set apart
  std::size_t max_chars_per_word = 100;
};

class WordPieceTokenizer {
 public:
  // Reads vocab.txt (one token a line; the id is the line number). Throws
  // ferry::Error if the file cannot be read or lacks [CLS], [SEP] or [UNK].
  static WordPieceTokenizer load(const std::string& vocab_path, TokenizerOptions options = {});

  struct Encoding {
    std::size_t full_length = 0;  // ids the whole text needs, [CLS] and [SEP] included
    bool truncated = false;       // full_length > max_tokens
  };
  // Appends [CLS], the text's ids and [SEP] to out, at most max_tokens (>= 2)
  // in all: a longer text is cut before [SEP]. Any bytes are accepted: an
  // invalid UTF-8 sequence reads as U+FFFD. Safe to call from many threads.
  Encoding encode(std::string_view utf8, std::size_t max_tokens, std::vector<std::int32_t>& out) const;

  // One token as TEI's /tokenize lists it.
  struct Token {
    std::int32_t id = 0;
    bool special = false;  // [CLS] or [SEP] put around the text, or a special token written in it
    // The bytes of the text it came from, [start, stop): whole code points, so
    // that "Café" -> "cafe" maps back to all of "Café". 0, 0 for [CLS] and
    // [SEP] put around the text.
    std::size_t start = 0, stop = 0;
  };
  // Replaces out with all of the text's tokens, uncut, with [CLS] and [SEP]
  // around them when add_special_tokens: the ids encode() gives, with where
  // each came from. Any bytes, as encode(). Safe to call from many threads.
  void tokenize(std::string_view utf8, bool add_special_tokens, std::vector<Token>& out) const;

  // ids back to text, as the reference's WordPiece decoder writes it: tokens
  // joined by spaces, a "##" continuation glued to the token before, no space
  // before a token ".", ",", "!" or "?" (its cleanup). skip_special_tokens
  // drops [PAD], [UNK], [CLS], [SEP] and [MASK]. Every id must be below
  // vocab_size() (the caller checks: the reference drops others silently).
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const;
  // The vocabulary's line for id ("##ing" as written); empty outside it.
  std::string_view token_text(std::int32_t id) const noexcept;
  bool is_special(std::int32_t id) const noexcept;  // one of [PAD] [UNK] [CLS] [SEP] [MASK]

  std::size_t vocab_size() const noexcept;
  std::int32_t id_of(std::string_view token) const noexcept;  // -1 if absent
  std::int32_t cls_id() const noexcept;
  std::int32_t sep_id() const noexcept;
  std::int32_t unk_id() const noexcept;

  WordPieceTokenizer(WordPieceTokenizer&&) noexcept;
  WordPieceTokenizer& operator=(WordPieceTokenizer&&) noexcept;
  ~WordPieceTokenizer();

 private:
  struct Impl;
  explicit WordPieceTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::infer
