// The WordPiece tokenizer against the reference (Hugging Face tokenizers on
// the model's tokenizer.json): every case in fixtures/tokenizer/cases.json must
// give the reference's ids exactly; then truncation, bytes that are not UTF-8,
// the empty text, threads, and the errors load() reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/infer/tokenizer.h"

namespace ferry::infer {
namespace {

using Ids = std::vector<std::int32_t>;

std::string model_dir() {
  const char* env = std::getenv("FERRY_MODEL_DIR");
  return env != nullptr && *env != '\0' ? env : FERRY_MODEL_DIR;
}

struct Case {
  std::string text;
  Ids ids;  // truncated to kFixtureMaxTokens
  std::size_t full_length = 0;
};
constexpr std::size_t kFixtureMaxTokens = 256;

std::vector<Case> load_cases() {
  const std::string path = std::string(FERRY_TOKENIZER_FIXTURES) + "/cases.json";
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path + ": run tests/infer/fixtures/tokenizer/make_fixtures.py");
  std::vector<Case> cases;
  for (const auto& c : nlohmann::json::parse(in)) {
    cases.push_back(
        {c.at("text").get<std::string>(), c.at("ids").get<Ids>(), c.at("full_length").get<std::size_t>()});
  }
  return cases;
}

std::string ids_text(const Ids& ids) {
  std::string s;
  for (std::int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string vocab = model_dir() + "/vocab.txt";
    // The model is a test input like any fixture: its absence is a failure,
    // not a skip, so that a CI run without it cannot pass quietly.
    if (!std::filesystem::exists(vocab)) {
      missing_ = "the model is not in " + model_dir() +
                 ": run scripts/fetch-model.sh (or point FERRY_MODEL_DIR at a copy of all-MiniLM-L6-v2)";
      return;
    }
    tokenizer_ = new WordPieceTokenizer(WordPieceTokenizer::load(vocab));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) FAIL() << missing_;
  }

  static Ids encode(std::string_view text, std::size_t max_tokens = 512) {
    Ids out;
    (void)tokenizer_->encode(text, max_tokens, out);
    return out;
  }

  static inline WordPieceTokenizer* tokenizer_ = nullptr;
  static inline std::string missing_;
};

TEST_F(TokenizerTest, MatchesReferenceOnEveryCase) {
  const std::vector<Case> cases = load_cases();
  ASSERT_GE(cases.size(), 600u);
  std::size_t passed = 0, shown = 0;
  for (const Case& c : cases) {
    Ids out;
    const auto enc = tokenizer_->encode(c.text, kFixtureMaxTokens, out);
    const bool ok = out == c.ids && enc.full_length == c.full_length &&
                    enc.truncated == (c.full_length > kFixtureMaxTokens);
    passed += ok;
    if (!ok && shown++ < 10) {
      ADD_FAILURE() << "text " << nlohmann::json(c.text).dump() << "\n  want " << ids_text(c.ids) << "(full "
                    << c.full_length << ")\n  got  " << ids_text(out) << "(full " << enc.full_length << ")";
    }
  }
  std::printf("reference cases: %zu of %zu pass\n", passed, cases.size());
  EXPECT_EQ(passed, cases.size());
}

// TEI's /tokenize: the same ids as encode(), uncut, each with the bytes of
// the text it came from.
TEST_F(TokenizerTest, TokenizeGivesEncodesIdsWithTheirPlaceInTheText) {
  std::vector<WordPieceTokenizer::Token> tokens;
  for (const Case& c : load_cases()) {
    tokenizer_->tokenize(c.text, true, tokens);
    Ids ids;
    for (const auto& t : tokens) ids.push_back(t.id);
    ASSERT_EQ(ids, encode(c.text, 1u << 20)) << nlohmann::json(c.text).dump();
    // In order; two pieces may share a source code point ("안" is three jamo
    // after NFD, and a piece may end between them), as the reference's do.
    std::size_t previous_start = 0, previous_stop = 0;
    for (std::size_t i = 1; i + 1 < tokens.size(); ++i) {
      const auto& t = tokens[i];
      ASSERT_LT(t.start, t.stop) << nlohmann::json(c.text).dump() << " token " << i;
      ASSERT_LE(t.stop, c.text.size());
      ASSERT_GE(t.start, previous_start) << nlohmann::json(c.text).dump() << " token " << i;
      ASSERT_GE(t.stop, previous_stop) << nlohmann::json(c.text).dump() << " token " << i;
      previous_start = t.start;
      previous_stop = t.stop;
    }
    tokenizer_->tokenize(c.text, false, tokens);
    ASSERT_EQ(tokens.size(), ids.size() - 2);
  }
}

TEST_F(TokenizerTest, TokenizeMapsPiecesBackToTheTextAsSent) {
  std::vector<WordPieceTokenizer::Token> tokens;
  const std::string text = "Café [MASK] unaffable, ÉCOLE";
  tokenizer_->tokenize(text, true, tokens);
  std::vector<std::string> pieces;
  for (const auto& t : tokens) pieces.push_back(t.special && t.stop == 0 ? "*" : text.substr(t.start, t.stop - t.start));
  // [CLS], café, [MASK] (special, written in the text), una ##ffa ##ble, ",", ecole, [SEP]
  EXPECT_EQ(pieces, (std::vector<std::string>{"*", "Café", "[MASK]", "una", "ffa", "ble", ",", "ÉCOLE", "*"}));
  EXPECT_TRUE(tokens[0].special);
  EXPECT_TRUE(tokens[2].special);
  EXPECT_FALSE(tokens[1].special);
  EXPECT_EQ(tokens[3].start, 13u);
  EXPECT_EQ(tokenizer_->token_text(tokens[4].id), "##ffa");
  EXPECT_EQ(tokenizer_->token_text(-1), "");
  EXPECT_EQ(tokenizer_->token_text(static_cast<std::int32_t>(tokenizer_->vocab_size())), "");
}

// As tokenizers' WordPiece decoder with cleanup: spaces between tokens, none
// before a "##" piece or before . , ! ?
TEST_F(TokenizerTest, DecodeJoinsPiecesAsTheReference) {
  const Ids ids = encode("Hello, World! unaffable tokenizers?");
  EXPECT_EQ(tokenizer_->decode(ids, true), "hello, world! unaffable tokenizers?");
  EXPECT_EQ(tokenizer_->decode(ids, false), "[CLS] hello, world! unaffable tokenizers? [SEP]");
  EXPECT_EQ(tokenizer_->decode(Ids{}, true), "");
  const Ids continuation_first = {tokenizer_->id_of("##ing"), tokenizer_->id_of("run")};
  EXPECT_EQ(tokenizer_->decode(continuation_first, true), "##ing run");
  EXPECT_EQ(tokenizer_->decode(Ids{tokenizer_->unk_id(), tokenizer_->id_of("a")}, true), "a");
}

TEST_F(TokenizerTest, FixturesTruncateSomewhere) {
  // Without a case past 256 tokens the reference check would not cover truncation.
  std::size_t truncated = 0;
  for (const Case& c : load_cases()) truncated += c.full_length > kFixtureMaxTokens;
  EXPECT_GE(truncated, 3u);
}

TEST_F(TokenizerTest, EmptyTextIsClsSep) {
  Ids out;
  const auto enc = tokenizer_->encode("", 256, out);
  EXPECT_EQ(out, (Ids{tokenizer_->cls_id(), tokenizer_->sep_id()}));
  EXPECT_EQ(enc.full_length, 2u);
  EXPECT_FALSE(enc.truncated);
  EXPECT_EQ(encode(" \t\r\n\x01"), out);  // nothing but whitespace and a control character
}

TEST_F(TokenizerTest, TruncatesBeforeSep) {
  const std::string text = "the quick brown fox jumps over the lazy dog";
  const Ids full = encode(text);
  ASSERT_EQ(full.size(), 11u);
  for (std::size_t max : {2u, 3u, 10u, 11u, 256u}) {
    Ids out;
    const auto enc = tokenizer_->encode(text, max, out);
    const std::size_t kept = std::min(max, full.size());
    Ids want(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(kept - 1));
    want.push_back(tokenizer_->sep_id());
    EXPECT_EQ(out, want) << "max_tokens " << max;
    EXPECT_EQ(enc.full_length, full.size()) << "max_tokens " << max;
    EXPECT_EQ(enc.truncated, full.size() > max) << "max_tokens " << max;
  }
}

TEST_F(TokenizerTest, TruncatesLongTextAt256) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "word ";
  Ids out;
  const auto enc = tokenizer_->encode(text, 256, out);
  ASSERT_EQ(out.size(), 256u);
  EXPECT_EQ(out.front(), tokenizer_->cls_id());
  EXPECT_EQ(out.back(), tokenizer_->sep_id());
  EXPECT_EQ(out[1], tokenizer_->id_of("word"));
  EXPECT_EQ(out[254], tokenizer_->id_of("word"));
  EXPECT_EQ(enc.full_length, 402u);
  EXPECT_TRUE(enc.truncated);
}

TEST_F(TokenizerTest, AppendsToWhatOutHolds) {
  Ids out{7, 8};
  (void)tokenizer_->encode("hello", 256, out);
  EXPECT_EQ(out, (Ids{7, 8, tokenizer_->cls_id(), tokenizer_->id_of("hello"), tokenizer_->sep_id()}));
}

TEST_F(TokenizerTest, RejectsMaxTokensBelowTwo) {
  Ids out;
  EXPECT_THROW((void)tokenizer_->encode("hello", 1, out), Error);
  EXPECT_THROW((void)tokenizer_->encode("hello", 0, out), Error);
}

TEST_F(TokenizerTest, InvalidUtf8ReadsAsDroppedReplacementChar) {
  // U+FFFD is dropped by clean_text without splitting the word it sits in, so
  // each bad sequence must vanish and leave the text around it as it was.
  const std::pair<std::string, std::string> cases[] = {
      {"hel\xFFlo", "hello"},                 // a byte that never starts UTF-8
      {"hel\x80lo", "hello"},                 // a lone continuation byte
      {"hel\xC0\xAFlo", "hello"},             // overlong '/'
      {"hel\xE0\x80\xAFlo", "hello"},         // overlong, three bytes
      {"hel\xED\xA0\x80lo", "hello"},         // a UTF-16 surrogate
      {"hel\xF4\x90\x80\x80lo", "hello"},     // past U+10FFFF
      {"hel\xE2\x82(lo", "hel(lo"},           // cut short: the '(' after it survives
      {"caf\xC3", "caf"},                     // cut off at the end
      {"\xF0\x9F\x98", ""},                   // a cut-off emoji alone
      {"na\xC3\xAFve \xC3", "na\xC3\xAFve"},  // valid two-byte text before a bad byte
  };
  for (const auto& [bad, good] : cases) {
    EXPECT_EQ(encode(bad), encode(good))
        << "the bytes of " << nlohmann::json(good).dump() << " with bad ones in";
  }
  // Every byte value in every position: nothing crashes, and the result is framed.
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const Ids out = encode(all + all);
  EXPECT_EQ(out.front(), tokenizer_->cls_id());
  EXPECT_EQ(out.back(), tokenizer_->sep_id());
}

TEST_F(TokenizerTest, SpecialTokensInTextAreMatchedRaw) {
  // The reference matches its added tokens in the text before normalizing it.
  EXPECT_EQ(encode("a[MASK]b"),
            (Ids{tokenizer_->cls_id(), tokenizer_->id_of("a"), tokenizer_->id_of("[MASK]"),
                 tokenizer_->id_of("b"), tokenizer_->sep_id()}));
  EXPECT_EQ(encode("[mask]"), (Ids{tokenizer_->cls_id(), tokenizer_->id_of("["), tokenizer_->id_of("mask"),
                                   tokenizer_->id_of("]"), tokenizer_->sep_id()}));
}

TEST_F(TokenizerTest, WordLengthLimit) {
  const std::string hundred(100, 'a'), hundred_one(101, 'a');
  EXPECT_NE(encode(hundred)[1], tokenizer_->unk_id());
  EXPECT_EQ(encode(hundred_one), (Ids{tokenizer_->cls_id(), tokenizer_->unk_id(), tokenizer_->sep_id()}));
  // The limit counts code points, not bytes: 100 two-byte letters pass.
  std::string accented;
  for (int i = 0; i < 100; ++i) accented += "\xD0\xB6";  // U+0436
  EXPECT_NE(encode(accented)[1], tokenizer_->unk_id());
}

TEST_F(TokenizerTest, VocabularyLookups) {
  EXPECT_EQ(tokenizer_->vocab_size(), 30522u);
  EXPECT_EQ(tokenizer_->id_of("[PAD]"), 0);
  EXPECT_EQ(tokenizer_->unk_id(), tokenizer_->id_of("[UNK]"));
  EXPECT_EQ(tokenizer_->cls_id(), tokenizer_->id_of("[CLS]"));
  EXPECT_EQ(tokenizer_->sep_id(), tokenizer_->id_of("[SEP]"));
  EXPECT_GE(tokenizer_->id_of("##ing"), 0);
  EXPECT_EQ(tokenizer_->id_of("no-such-token-here"), -1);
  EXPECT_EQ(tokenizer_->id_of(""), -1);
}

TEST_F(TokenizerTest, ThreadsShareOneTokenizer) {
  const std::vector<Case> cases = load_cases();
  std::vector<Ids> want;
  for (const Case& c : cases) want.push_back(encode(c.text, kFixtureMaxTokens));
  std::vector<std::size_t> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      Ids out;
      for (int round = 0; round < 3; ++round) {
        for (std::size_t i = t; i < cases.size(); i += 1 + t) {
          out.clear();
          (void)tokenizer_->encode(cases[i].text, kFixtureMaxTokens, out);
          mismatches[t] += out != want[i];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t m : mismatches) EXPECT_EQ(m, 0u);
}

// load() errors, on vocabularies written here.
class TokenizerLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ferry_tokenizer_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  static std::string load_error(const std::string& path) {
    try {
      (void)WordPieceTokenizer::load(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  std::filesystem::path dir_;
};

TEST_F(TokenizerLoadTest, MissingFile) {
  const std::string path = (dir_ / "absent.txt").string();
  EXPECT_NE(load_error(path).find(path), std::string::npos) << load_error(path);
}

TEST_F(TokenizerLoadTest, EmptyFile) {
  EXPECT_NE(load_error(write("empty.txt", "")).find("empty"), std::string::npos);
}

TEST_F(TokenizerLoadTest, RequiredTokens) {
  EXPECT_NE(load_error(write("no_unk.txt", "[PAD]\n[CLS]\n[SEP]\nhello\n")).find("[UNK]"), std::string::npos);
  EXPECT_NE(load_error(write("no_cls.txt", "[UNK]\n[SEP]\nhello\n")).find("[CLS]"), std::string::npos);
  EXPECT_NE(load_error(write("no_sep.txt", "[UNK]\n[CLS]\nhello\n")).find("[SEP]"), std::string::npos);
}

TEST_F(TokenizerLoadTest, SmallVocabulary) {
  // Ids are line numbers; \r\n line ends and trailing blanks are not part of a
  // token; a word with no full split is one [UNK]; a repeated line takes the later id.
  const auto tok =
      WordPieceTokenizer::load(write("small.txt", "[UNK]\r\n[CLS]\n[SEP] \nun\n##aff\n##able\nun\n,\n##x"));
  EXPECT_EQ(tok.vocab_size(), 9u);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.cls_id(), 1);
  EXPECT_EQ(tok.sep_id(), 2);
  EXPECT_EQ(tok.id_of("un"), 6);
  Ids out;
  const auto enc = tok.encode("Unaffable, unaffy unzzz", 64, out);
  EXPECT_EQ(out, (Ids{1, 6, 4, 5, 7, 0, 0, 2}));
  EXPECT_EQ(enc.full_length, 8u);
}

}  // namespace
}  // namespace ferry::infer
