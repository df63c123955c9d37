// load_bert_weights() and make_bert_model() on a small BERT model written here
// (2 layers, hidden 8): the file's float types and name prefixes, and the
// errors a damaged or foreign model must give. No download needed.
#include "infer/model/bert_weights.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/infer/bert.h"
#include "infer/model/mapped_file.h"
#include "infer/model/safetensors_writer.h"
#include "infer/model/sha256.h"

namespace ferry::infer {
namespace {

namespace fs = std::filesystem;
using test::RawTensor;

constexpr std::size_t kVocab = 11, kHidden = 8, kLayers = 2, kHeads = 2, kInter = 16, kPositions = 6,
                      kTypes = 2;

nlohmann::json small_config() {
  return {{"architectures", {"BertModel"}},
          {"hidden_act", "gelu"},
          {"hidden_size", kHidden},
          {"intermediate_size", kInter},
          {"layer_norm_eps", 1e-12},
          {"max_position_embeddings", kPositions},
          {"model_type", "bert"},
          {"num_attention_heads", kHeads},
          {"num_hidden_layers", kLayers},
          {"type_vocab_size", kTypes},
          {"vocab_size", kVocab}};
}

// Values k/64 for small k are exact in f16 and bf16, so the same model
// written in any float type loads to the same f32 weights.
std::vector<float> values(std::size_t n, std::uint32_t& seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>((seed >> 24) % 65) - 32) / 64.0f;
  }
  return v;
}

std::uint16_t to_bf16(float f) {
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16);
}

// The tensors of a small BERT model, named as Hugging Face names them.
std::vector<RawTensor> small_model(const std::string& dtype, const std::string& prefix) {
  std::uint32_t seed = 1;
  std::vector<RawTensor> out;
  auto add = [&](const std::string& name, std::vector<std::size_t> shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    auto v = values(n, seed);
    RawTensor t{prefix + name, dtype, shape, {}};
    if (dtype == "F32") {
      t.bytes = test::f32_bytes(v);
    } else {  // BF16: the top half of each f32
      std::vector<std::uint16_t> h;
      for (float x : v) h.push_back(to_bf16(x));
      t.bytes = test::u16_bytes(h);
    }
    out.push_back(std::move(t));
  };
  add("embeddings.word_embeddings.weight", {kVocab, kHidden});
  add("embeddings.position_embeddings.weight", {kPositions, kHidden});
  add("embeddings.token_type_embeddings.weight", {kTypes, kHidden});
  add("embeddings.LayerNorm.weight", {kHidden});
  add("embeddings.LayerNorm.bias", {kHidden});
  for (std::size_t i = 0; i < kLayers; ++i) {
    const std::string l = "encoder.layer." + std::to_string(i);
    for (const char* name : {".attention.self.query", ".attention.self.key", ".attention.self.value",
                             ".attention.output.dense"}) {
      add(l + name + ".weight", {kHidden, kHidden});
      add(l + name + ".bias", {kHidden});
    }
    add(l + ".attention.output.LayerNorm.weight", {kHidden});
    add(l + ".attention.output.LayerNorm.bias", {kHidden});
    add(l + ".intermediate.dense.weight", {kInter, kHidden});
    add(l + ".intermediate.dense.bias", {kInter});
    add(l + ".output.dense.weight", {kHidden, kInter});
    add(l + ".output.dense.bias", {kHidden});
    add(l + ".output.LayerNorm.weight", {kHidden});
    add(l + ".output.LayerNorm.bias", {kHidden});
  }
  return out;
}

class BertWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ferry-bert-weights-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::vector<RawTensor>& tensors, const nlohmann::json& config = small_config()) {
    test::write_file(dir_ + "/config.json", config.dump());
    test::write_file(dir_ + "/model.safetensors", test::safetensors_file(tensors));
  }

  std::string file() const { return dir_ + "/model.safetensors"; }

  // Loads and expects a ferry::Error whose message contains `expected`.
  void expect_error(const std::string& expected, const std::string& sha256 = "") {
    try {
      (void)load_bert_weights(dir_, sha256);
      ADD_FAILURE() << "loaded, expected an error containing: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "message: " << e.what();
    }
  }

  std::string dir_;
};

TEST_F(BertWeightsTest, LoadsEveryTensorWithItsShape) {
  write(small_model("F32", ""));
  const BertWeights w = load_bert_weights(dir_, "");
  EXPECT_EQ(w.config.vocab, kVocab);
  EXPECT_EQ(w.config.hidden, kHidden);
  EXPECT_EQ(w.config.heads, kHeads);
  EXPECT_EQ(w.config.intermediate, kInter);
  EXPECT_EQ(w.config.max_positions, kPositions);
  ASSERT_EQ(w.layers.size(), kLayers);
  EXPECT_EQ(w.word_embeddings.size(), kVocab * kHidden);
  EXPECT_EQ(w.layers[1].intermediate.weight.size(), kInter * kHidden);
  EXPECT_EQ(w.layers[1].output.weight.size(), kHidden * kInter);
  EXPECT_EQ(w.layers[1].output_norm.beta.size(), kHidden);
  // The first tensor written is the word embeddings: its values come back in order.
  std::uint32_t seed = 1;
  EXPECT_EQ(w.word_embeddings, values(kVocab * kHidden, seed));
}

TEST_F(BertWeightsTest, Bf16WithBertPrefixAndExtraTensorsLoadsTheSameWeights) {
  write(small_model("F32", ""));
  const BertWeights f32 = load_bert_weights(dir_, "");
  auto tensors = small_model("BF16", "bert.");
  // What BertForXxx checkpoints also carry: ignored.
  tensors.push_back(RawTensor{
      "bert.embeddings.position_ids", "I64", {1, kPositions}, std::vector<std::uint8_t>(8 * kPositions)});
  tensors.push_back(RawTensor{"bert.pooler.dense.weight", "F32", {1}, test::f32_bytes({1.0f})});
  write(tensors);
  const BertWeights bf16 = load_bert_weights(dir_, "");
  EXPECT_EQ(bf16.word_embeddings, f32.word_embeddings);
  EXPECT_EQ(bf16.layers[1].value.weight, f32.layers[1].value.weight);
  EXPECT_EQ(bf16.layers[0].output_norm.gamma, f32.layers[0].output_norm.gamma);
}

TEST_F(BertWeightsTest, ChecksTheSha256BeforeParsing) {
  write(small_model("F32", ""));
  const std::string digest = sha256_hex(MappedFile::open(file()).bytes());
  EXPECT_NO_THROW((void)load_bert_weights(dir_, digest));
  expect_error("differs from the expected", std::string(64, '0'));
  // A hostile file with the wrong digest is refused on its digest, not parsed.
  test::write_file(file(), std::string("garbage"));
  expect_error("sha256", digest);
}

TEST_F(BertWeightsTest, RejectsATruncatedFile) {
  write(small_model("F32", ""));
  const auto size = fs::file_size(file());
  fs::resize_file(file(), size - 4);
  expect_error("truncated");
  fs::resize_file(file(), 20);  // cut inside the header: its length now runs past the file
  expect_error("runs past the file");
  fs::resize_file(file(), 0);
  expect_error("empty");
}

TEST_F(BertWeightsTest, RejectsShapesAndTensorsThatDoNotMatchTheConfig) {
  auto config = small_config();
  config["intermediate_size"] = kInter + 1;
  write(small_model("F32", ""), config);
  expect_error("has shape [16, 8], config.json implies [17, 8]");

  auto tensors = small_model("F32", "");
  tensors.erase(tensors.begin() + 6);  // encoder.layer.0.attention.self.query.bias
  write(tensors);
  expect_error("no tensor \"encoder.layer.0.attention.self.query.bias\"");

  config = small_config();
  config["num_hidden_layers"] = kLayers + 1;
  write(small_model("F32", ""), config);
  expect_error("encoder.layer.2.");
}

TEST_F(BertWeightsTest, RejectsConfigsItCannotRun) {
  auto config = small_config();
  config["hidden_act"] = "gelu_new";
  write(small_model("F32", ""), config);
  expect_error("hidden_act \"gelu_new\" is not supported");

  config = small_config();
  config["num_attention_heads"] = 3;
  write(small_model("F32", ""), config);
  expect_error("not a multiple of num_attention_heads");

  config = small_config();
  config.erase("vocab_size");
  write(small_model("F32", ""), config);
  expect_error("no \"vocab_size\"");

  write(small_model("F32", ""));
  fs::remove(dir_ + "/config.json");
  expect_error("cannot read");
}

// 1_Pooling/config.json as sentence-transformers writes it, read as TEI does;
// --pooling (BertOptions::pooling) wins over it.
TEST_F(BertWeightsTest, PoolingComesFromTheFolderUnlessSet) {
  write(small_model("F32", ""));
  const auto pooling_of = [&](const std::optional<Pooling>& set) {
    BertOptions options;
    options.model_dir = dir_;
    options.pooling = set;
    return make_bert_model(options)->info().pooling;
  };
  EXPECT_EQ(pooling_of(std::nullopt), Pooling::Mean);  // no 1_Pooling folder: as Ferry always pooled
  fs::create_directory(dir_ + "/1_Pooling");
  const auto config = [&](const char* json) { test::write_file(dir_ + "/1_Pooling/config.json", json); };
  config(R"({"word_embedding_dimension": 8, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false})");
  EXPECT_EQ(pooling_of(std::nullopt), Pooling::Cls);
  EXPECT_EQ(pooling_of(Pooling::LastToken), Pooling::LastToken);
  config(R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false, "pooling_mode_lasttoken": true})");
  EXPECT_EQ(pooling_of(std::nullopt), Pooling::LastToken);
  config(R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true})");  // TEI's order: cls first
  EXPECT_EQ(pooling_of(std::nullopt), Pooling::Cls);
  for (const auto& [json, expected] :
       std::vector<std::pair<const char*, const char*>>{
           {R"({"pooling_mode_cls_token": false, "pooling_mode_max_tokens": true})", "pooling_mode_max_tokens"},
           {R"({"pooling_mode_mean_tokens": false})", "sets no pooling mode"},
           {"[1, 2]", "is not a JSON object"}}) {
    config(json);
    try {
      (void)pooling_of(std::nullopt);
      ADD_FAILURE() << "accepted " << json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(pooling_of(Pooling::Mean), Pooling::Mean);  // --pooling needs no readable file
  }
  EXPECT_STREQ(pooling_name(Pooling::LastToken), "last_token");
  EXPECT_EQ(pooling_from_name("last-token"), Pooling::LastToken);
  EXPECT_EQ(pooling_from_name("cls"), Pooling::Cls);
  EXPECT_EQ(pooling_from_name("max"), std::nullopt);
}

TEST_F(BertWeightsTest, CpuModelRejectsInvalidBatches) {
  write(small_model("F32", ""));
  BertOptions options;
  options.model_dir = dir_;
  options.max_batch_tokens = 10;
  options.max_batch = 3;
  auto model = make_bert_model(options);
  EXPECT_EQ(model->info().hidden, kHidden);
  EXPECT_EQ(model->info().device.rfind("cpu", 0), 0u);
  std::vector<float> out(4 * kHidden);

  auto expect_refused = [&](const TokenBatch& batch, const std::string& expected) {
    try {
      model->embed(batch, out.data());
      ADD_FAILURE() << "embedded, expected an error containing: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "message: " << e.what();
    }
  };
  TokenBatch b;
  b.add(std::vector<std::int32_t>{1, 2, static_cast<std::int32_t>(kVocab)});
  expect_refused(b, "outside the vocabulary");
  b.clear();
  b.add(std::vector<std::int32_t>{1, -1});
  expect_refused(b, "outside the vocabulary");
  b.clear();
  b.add(std::vector<std::int32_t>(kPositions + 1, 1));
  expect_refused(b, "positions");
  b.clear();
  b.add(std::vector<std::int32_t>{1});
  b.add(std::vector<std::int32_t>{});
  expect_refused(b, "sequence 1 is empty");
  b.clear();
  for (int i = 0; i < 4; ++i) b.add(std::vector<std::int32_t>{1});
  expect_refused(b, "max_batch 3");
  b.clear();
  b.add(std::vector<std::int32_t>(6, 1));
  b.add(std::vector<std::int32_t>(5, 1));
  expect_refused(b, "max_batch_tokens 10");
  b.clear();
  b.add(std::vector<std::int32_t>{1, 2});
  b.starts.back() = 3;
  expect_refused(b, "starts end at 3");

  // A valid batch after the refusals: the model is still usable, and finite.
  b.clear();
  b.add(std::vector<std::int32_t>{1, 2, 3});
  model->embed(b, out.data());
  for (std::size_t i = 0; i < kHidden; ++i) EXPECT_TRUE(std::isfinite(out[i]));
}

}  // namespace
}  // namespace ferry::infer
