// The CPU model on all-MiniLM-L6-v2 against sentence-transformers' own vectors
// (tests/infer/fixtures/reference/, made by make_reference.py there), and the
// properties a server relies on: the same batch gives the same bits, and a
// sequence's vector does not depend on what else is in its batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/infer/bert.h"
#include "ferry/infer/model.h"
#include "reference_vectors.h"

namespace ferry::infer {
namespace {

using test::cosine;
using test::load_reference;
using test::model_dir;
using test::Reference;

class BertCpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = model_dir();
    // The model is a test input like any fixture: its absence is a failure,
    // not a skip, so that a CI run without it cannot pass quietly.
    if (!std::filesystem::exists(dir + "/model.safetensors")) {
      missing_ = "the model is not in " + dir +
                 ": run scripts/fetch-model.sh (or point FERRY_MODEL_DIR at a copy of all-MiniLM-L6-v2)";
      return;
    }
    BertOptions options;
    options.model_dir = dir;
    options.expected_sha256 = kMiniLmSha256;
    options.cpu_threads = 1;
    options.max_batch_tokens = 4096;
    model_ = make_bert_model(options).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(model_, nullptr) << missing_; }

  // Embeds the batch and normalises each row.
  static std::vector<float> embed(const TokenBatch& batch) {
    const std::size_t dims = model_->info().hidden;
    std::vector<float> out(batch.size() * dims);
    model_->embed(batch, out.data());
    for (std::size_t i = 0; i < batch.size(); ++i) l2_normalize(std::span(out).subspan(i * dims, dims));
    return out;
  }

  // The same weights with another pooling than the folder's, or the default (tanh) GELU.
  static std::unique_ptr<EmbeddingModel> other_model(std::optional<Pooling> pooling, Gelu gelu = Gelu::Exact) {
    BertOptions options;
    options.model_dir = model_dir();
    options.cpu_threads = 1;
    options.max_batch_tokens = 4096;
    options.pooling = pooling;
    options.gelu = gelu;
    return make_bert_model(options);
  }

  static inline EmbeddingModel* model_ = nullptr;
  static inline std::string missing_;
};

TEST_F(BertCpuTest, Info) {
  const ModelInfo& info = model_->info();
  EXPECT_EQ(info.name, std::filesystem::path(model_dir()).filename().string());
  EXPECT_EQ(info.hidden, 384u);
  EXPECT_EQ(info.max_positions, 512u);
  EXPECT_EQ(info.vocab, 30522u);
  EXPECT_EQ(info.precision, "f32");
  EXPECT_EQ(info.device.rfind("cpu (", 0), 0u) << info.device;
  EXPECT_NE(info.device.find("OpenBLAS"), std::string::npos) << info.device;
}

TEST_F(BertCpuTest, MatchesSentenceTransformers) {
  const Reference ref = load_reference();
  ASSERT_EQ(ref.dims, model_->info().hidden);
  ASSERT_GE(ref.ids.size(), 60u);
  // Batches of mixed lengths: every 7 sentences in reference order (which
  // mixes short, long and truncated ones), the last batch shorter.
  constexpr std::size_t kBatch = 7;
  // Tighter than a GPU model can be held to (0.9999): the CPU computes in f32
  // with the exact GELU, as the reference does, and reaches 1 - 1e-9. The tanh
  // form (tested below) scores 0.9999975; this bound tells the two apart.
  constexpr double kMinCosine = 0.999999;
  double min_cosine = 1.0;
  std::size_t worst = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t first = 0; first < ref.ids.size(); first += kBatch) {
    TokenBatch batch;
    const std::size_t n = std::min(kBatch, ref.ids.size() - first);
    for (std::size_t i = 0; i < n; ++i) batch.add(ref.ids[first + i]);
    const std::vector<float> out = embed(batch);
    for (std::size_t i = 0; i < n; ++i) {
      const double c = cosine(std::span(out).subspan(i * ref.dims, ref.dims),
                              std::span(ref.embeddings).subspan((first + i) * ref.dims, ref.dims));
      EXPECT_GE(c, kMinCosine) << "sentence " << first + i;
      if (c < min_cosine) {
        min_cosine = c;
        worst = first + i;
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("bert cpu: %zu sentences, minimum cosine %.9f (sentence %zu), %.2f s\n", ref.ids.size(),
              min_cosine, worst, seconds);
}

// The tanh GELU (the GPU's default) on the CPU: close to the reference, and
// measurably not the exact form, the CPU's default, which the bound above holds to 1e-6.
TEST_F(BertCpuTest, TheTanhGeluIsCloseToTheReferenceAndNotExact) {
  const Reference ref = load_reference();
  const auto tanh_model = other_model(std::nullopt, Gelu::Tanh);
  double min_cosine = 1.0;
  for (std::size_t first = 0; first < ref.ids.size(); first += 7) {
    TokenBatch batch;
    const std::size_t n = std::min<std::size_t>(7, ref.ids.size() - first);
    for (std::size_t i = 0; i < n; ++i) batch.add(ref.ids[first + i]);
    std::vector<float> out(n * ref.dims);
    tanh_model->embed(batch, out.data());
    for (std::size_t i = 0; i < n; ++i) {
      const auto row = std::span(out).subspan(i * ref.dims, ref.dims);
      l2_normalize(row);
      min_cosine =
          std::min(min_cosine, cosine(row, std::span(ref.embeddings).subspan((first + i) * ref.dims, ref.dims)));
    }
  }
  std::printf("bert cpu, tanh GELU: minimum cosine %.9f\n", min_cosine);
  EXPECT_GE(min_cosine, 0.99999);
  EXPECT_LT(min_cosine, 0.999999) << "the tanh form computed the exact one";
}

TEST_F(BertCpuTest, SameBatchTwiceGivesTheSameBits) {
  const Reference ref = load_reference();
  TokenBatch batch;
  for (std::size_t i = 0; i < 12; ++i) batch.add(ref.ids[i * 13 % ref.ids.size()]);
  const std::vector<float> a = embed(batch);
  const std::vector<float> b = embed(batch);
  EXPECT_EQ(a, b);
}

TEST_F(BertCpuTest, AVectorDoesNotDependOnItsBatch) {
  const Reference ref = load_reference();
  const std::size_t dims = model_->info().hidden;
  // The longest sentence among shorter ones, and a short one among longer ones.
  std::size_t longest = 0, shortest = 0;
  for (std::size_t i = 0; i < ref.ids.size(); ++i) {
    if (ref.ids[i].size() > ref.ids[longest].size()) longest = i;
    if (ref.ids[i].size() < ref.ids[shortest].size()) shortest = i;
  }
  for (std::size_t target : {longest, shortest, std::size_t{5}}) {
    TokenBatch alone;
    alone.add(ref.ids[target]);
    const std::vector<float> single = embed(alone);

    TokenBatch mixed;
    for (std::size_t i = 0; i < 9; ++i) {
      if (i == 4) mixed.add(ref.ids[target]);
      mixed.add(ref.ids[(target + 17 * (i + 1)) % ref.ids.size()]);
    }
    const std::vector<float> out = embed(mixed);
    const double c = cosine(single, std::span(out).subspan(4 * dims, dims));
    EXPECT_GT(c, 0.99999) << "sentence " << target << " alone vs in a batch of " << mixed.size();
  }
}

// TEI's /embed_all and the poolings are one forward pass read two ways: a
// sequence's pooled vector is its token states' mean, its first row ([CLS])
// or its last, as the model's pooling says.
TEST_F(BertCpuTest, PoolingsAreTheTokenStatesMeanFirstAndLastRows) {
  const Reference ref = load_reference();
  const std::size_t dims = model_->info().hidden;
  TokenBatch batch;
  for (std::size_t i : {0, 1, 5, 17, 200}) batch.add(ref.ids[i]);
  std::vector<float> states(batch.tokens() * dims);
  model_->embed_tokens(batch, states.data());

  EXPECT_EQ(model_->info().pooling, Pooling::Mean);  // all-MiniLM-L6-v2's 1_Pooling/config.json
  std::vector<float> mean(batch.size() * dims);
  model_->embed(batch, mean.data());
  const auto cls = other_model(Pooling::Cls);
  const auto last = other_model(Pooling::LastToken);
  EXPECT_EQ(cls->info().pooling, Pooling::Cls);
  EXPECT_EQ(last->info().pooling, Pooling::LastToken);
  std::vector<float> first_rows(batch.size() * dims), last_rows(batch.size() * dims);
  cls->embed(batch, first_rows.data());
  last->embed(batch, last_rows.data());

  for (std::size_t s = 0; s < batch.size(); ++s) {
    const float* first = states.data() + std::size_t(batch.starts[s]) * dims;
    const float* final = states.data() + std::size_t(batch.starts[s + 1] - 1) * dims;
    // The same sgemm calls on the same rows: the same bits.
    EXPECT_EQ(std::vector<float>(first, first + dims),
              std::vector<float>(first_rows.begin() + s * dims, first_rows.begin() + (s + 1) * dims))
        << "sequence " << s;
    EXPECT_EQ(std::vector<float>(final, final + dims),
              std::vector<float>(last_rows.begin() + s * dims, last_rows.begin() + (s + 1) * dims))
        << "sequence " << s;
    for (std::size_t c = 0; c < dims; ++c) {
      double sum = 0;
      for (std::size_t t = batch.starts[s]; t < batch.starts[s + 1]; ++t) sum += states[t * dims + c];
      EXPECT_NEAR(mean[s * dims + c], sum / (batch.starts[s + 1] - batch.starts[s]), 1e-5) << s << "," << c;
    }
  }
  // [CLS] pooling is not mean pooling in disguise.
  EXPECT_LT(cosine(std::span(first_rows).subspan(0, dims), std::span(mean).subspan(0, dims)), 0.99);
}

// sentence-transformers' vectors for the same model with a CLS Pooling module
// (make_reference.py writes embeddings_cls.f32 beside embeddings.f32). They
// need torch, which only the GPU machine has: without them the test says so
// and is skipped; the test above holds CLS pooling to the token states.
TEST_F(BertCpuTest, ClsPoolingMatchesSentenceTransformers) {
  const Reference ref = load_reference();
  const std::vector<float> expected = test::load_reference_vectors("embeddings_cls.f32", ref);
  if (expected.empty())
    GTEST_SKIP() << "no embeddings_cls.f32 in the reference folder: run make_reference.py where torch is";
  const auto cls = other_model(Pooling::Cls);
  constexpr std::size_t kBatch = 7;
  double min_cosine = 1.0;
  for (std::size_t first = 0; first < ref.ids.size(); first += kBatch) {
    TokenBatch batch;
    const std::size_t n = std::min(kBatch, ref.ids.size() - first);
    for (std::size_t i = 0; i < n; ++i) batch.add(ref.ids[first + i]);
    std::vector<float> out(n * ref.dims);
    cls->embed(batch, out.data());
    for (std::size_t i = 0; i < n; ++i) {
      std::span<float> v = std::span(out).subspan(i * ref.dims, ref.dims);
      l2_normalize(v);
      const double c = cosine(v, std::span(expected).subspan((first + i) * ref.dims, ref.dims));
      EXPECT_GE(c, 0.999999) << "sentence " << first + i;
      min_cosine = std::min(min_cosine, c);
    }
  }
  std::printf("bert cpu, cls pooling: %zu sentences, minimum cosine %.9f\n", ref.ids.size(), min_cosine);
}

TEST_F(BertCpuTest, RejectsInvalidBatches) {
  std::vector<float> out(2 * model_->info().hidden);
  TokenBatch b;
  b.add(std::vector<std::int32_t>{101, 30522, 102});
  EXPECT_THROW(model_->embed(b, out.data()), Error);
  b.clear();
  b.add(std::vector<std::int32_t>(513, 1000));
  EXPECT_THROW(model_->embed(b, out.data()), Error);
  std::vector<float> states(513 * model_->info().hidden);
  EXPECT_THROW(model_->embed_tokens(b, states.data()), Error);
  b.clear();
  b.add(std::vector<std::int32_t>{});
  EXPECT_THROW(model_->embed(b, out.data()), Error);
  EXPECT_THROW(model_->embed_tokens(b, states.data()), Error);
  b.clear();
  for (int i = 0; i < 9; ++i) b.add(std::vector<std::int32_t>(500, 1000));  // 4500 > max_batch_tokens 4096
  EXPECT_THROW(model_->embed(b, out.data()), Error);
}

TEST(BertCpuModel, WrongSha256IsRefused) {
  BertOptions options;
  options.model_dir = model_dir();
  ASSERT_TRUE(std::filesystem::exists(options.model_dir + "/model.safetensors"))
      << "the model is not in " << options.model_dir << ": run scripts/fetch-model.sh";
  options.expected_sha256 = std::string(64, 'a');
  try {
    (void)make_bert_model(options);
    ADD_FAILURE() << "a wrong sha256 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sha256"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ferry::infer
