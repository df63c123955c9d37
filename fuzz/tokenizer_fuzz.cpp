// The WordPiece tokenizer (src/infer/text/) on any bytes: a request's text is
// peer input, and need not be UTF-8 even when the JSON around it parsed.
//
// Input: one byte picking max_tokens (2 to 33), one byte picking the options
// (uncased as the model, cased, or lower-casing without stripping accents),
// then the text. Beside ASan/UBSan, it checks what encode() promises: [CLS]
// first and [SEP] last, at most max_tokens ids, each in the vocabulary,
// full_length and truncated consistent, and the truncated ids a prefix of the
// untruncated ones; tokenize() gives encode()'s ids, each non-special one
// from a non-empty, in-order span of the text; decode() takes any ids of the
// vocabulary (made from the text's bytes). The vocabulary is a small one written here (ASCII, a few
// multi-byte tokens and continuations), so that the target needs no model.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/infer/tokenizer.h"
#include "fuzz_check.h"

using ferry::infer::TokenizerOptions;
using ferry::infer::WordPieceTokenizer;

namespace {

std::string small_vocab() {
  std::string v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (char c = 33; c < 127; ++c) v += std::string(1, c) + "\n##" + std::string(1, c) + "\n";
  for (const char* t : {"the", "##ing", "un", "##aff", "##able", "hello", "world", "\xC3\xA9", "##\xC3\xA9",
                        "\xE6\x97\xA5", "\xD0\xB6", "##\xD0\xB6", "\xCF\x83", "##\xCF\x83", "caf\xC3\xA9"}) {
    v += std::string(t) + "\n";
  }
  return v;
}

struct Tokenizers {
  std::vector<WordPieceTokenizer> all;
  Tokenizers() {
    char path[] = "/tmp/ferry_tokenizer_fuzz_XXXXXX";
    const int fd = ::mkstemp(path);
    FUZZ_CHECK(fd >= 0);
    const std::string v = small_vocab();
    FUZZ_CHECK(::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size()));
    ::close(fd);
    all.push_back(WordPieceTokenizer::load(path, TokenizerOptions{}));
    all.push_back(WordPieceTokenizer::load(path, TokenizerOptions{false, false, 100}));
    all.push_back(WordPieceTokenizer::load(path, TokenizerOptions{true, false, 100}));
    ::unlink(path);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Tokenizers tokenizers;
  if (size < 2) return 0;
  const std::size_t max_tokens = 2 + data[0] % 32;
  const WordPieceTokenizer& tok = tokenizers.all[data[1] % tokenizers.all.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  std::vector<std::int32_t> full, cut;
  const auto whole = tok.encode(text, SIZE_MAX, full);
  const auto part = tok.encode(text, max_tokens, cut);

  FUZZ_CHECK(!whole.truncated && whole.full_length == full.size());
  FUZZ_CHECK(part.full_length == whole.full_length);
  FUZZ_CHECK(part.truncated == (whole.full_length > max_tokens));
  FUZZ_CHECK(cut.size() == (part.truncated ? max_tokens : full.size()));
  FUZZ_CHECK(full.front() == tok.cls_id() && full.back() == tok.sep_id());
  FUZZ_CHECK(cut.front() == tok.cls_id() && cut.back() == tok.sep_id());
  for (std::size_t i = 0; i + 1 < cut.size(); ++i) FUZZ_CHECK(cut[i] == full[i]);
  for (std::int32_t id : full) FUZZ_CHECK(id >= 0 && static_cast<std::size_t>(id) < tok.vocab_size());

  std::vector<WordPieceTokenizer::Token> tokens;
  tok.tokenize(text, true, tokens);
  FUZZ_CHECK(tokens.size() == full.size());
  std::size_t previous_start = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    FUZZ_CHECK(tokens[i].id == full[i]);
    if (i == 0 || i + 1 == tokens.size()) continue;  // [CLS] and [SEP] put around
    FUZZ_CHECK(tokens[i].start < tokens[i].stop && tokens[i].stop <= text.size());
    FUZZ_CHECK(tokens[i].start >= previous_start);
    previous_start = tokens[i].start;
  }
  std::vector<std::int32_t> ids;
  for (const std::uint8_t b : text) ids.push_back(static_cast<std::int32_t>(b % tok.vocab_size()));
  const std::string back = tok.decode(ids, (data[1] & 0x80) != 0);
  FUZZ_CHECK(back.size() <= ids.size() * 16);
  return 0;
}
