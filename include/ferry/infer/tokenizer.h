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
