// The CUDA model on all-MiniLM-L6-v2 in each precision: against
// sentence-transformers' own vectors (tests/infer/fixtures/reference/, made by
// make_reference.py there), against the CPU model on sequences up to
// max_positions long (which the reference does not reach: it stops at 256),
// across CUDA graph replays, from several threads on several lanes, and its
// refusals. Exits 77 (ctest: skipped)
// where there is no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <thread>
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

// The pinned digest, unless FERRY_MODEL_SHA256 says otherwise (empty: not
// checked): a GPU machine that cannot take the 87 MiB f32 file may be given
// an f16 copy of it, which the loader reads as well.
std::string model_sha256() {
  const char* env = std::getenv("FERRY_MODEL_SHA256");
  return env != nullptr ? env : kMiniLmSha256;
}

// What each precision must reach against an f32 reference.
double required_cosine(Precision p) {
  return p == Precision::F32 ? 0.9999 : 0.999;
}

// Models are loaded once per precision (and the CPU model once) and kept
// until main() clears them, before the CUDA runtime shuts down.
std::map<std::string, std::unique_ptr<EmbeddingModel>>& models() {
  static std::map<std::string, std::unique_ptr<EmbeddingModel>> m;
  return m;
}

// The model is a test input like any fixture: its absence is a failure, not
// a skip, so that a CI run without it cannot pass quietly.
void require_model_files() {
  const std::string dir = model_dir();
  if (!std::filesystem::exists(dir + "/model.safetensors"))
    throw Error("the model is not in " + dir +
                ": run scripts/fetch-model.sh (or point FERRY_MODEL_DIR at a copy of all-MiniLM-L6-v2)");
}

EmbeddingModel& cuda_model(Precision p, Gelu gelu = Gelu::Tanh) {
  auto& slot = models()[std::string("cuda-") + precision_name(p) + "-" + gelu_name(gelu)];
  if (!slot) {
    require_model_files();
    BertOptions options;
    options.model_dir = model_dir();
    options.expected_sha256 = model_sha256();
    options.cuda = true;
    options.precision = p;
    options.gelu = gelu;
    slot = make_bert_model(options);
  }
  return *slot;
}

// The same weights pooled otherwise than the folder's mean.
EmbeddingModel& cuda_pooled_model(Precision p, Pooling pooling) {
  auto& slot = models()[std::string("cuda-") + precision_name(p) + "-" + pooling_name(pooling)];
  if (!slot) {
    require_model_files();
    BertOptions options;
    options.model_dir = model_dir();
    options.cuda = true;
    options.precision = p;
    options.pooling = pooling;
    slot = make_bert_model(options);
  }
  return *slot;
}

// Every token's state (/embed_all), not normalised.
std::vector<float> embed_tokens(EmbeddingModel& model, const TokenBatch& batch) {
  std::vector<float> out(batch.tokens() * model.info().hidden);
  model.embed_tokens(batch, out.data());
  return out;
}

EmbeddingModel& cpu_model() {
  auto& slot = models()["cpu"];
  if (!slot) {
    require_model_files();
    BertOptions options;
    options.model_dir = model_dir();
    options.expected_sha256 = model_sha256();
    slot = make_bert_model(options);
  }
  return *slot;
}

// Embeds the batch and normalises each row.
std::vector<float> embed(EmbeddingModel& model, const TokenBatch& batch) {
  const std::size_t dims = model.info().hidden;
  std::vector<float> out(batch.size() * dims);
  model.embed(batch, out.data());
  for (std::size_t i = 0; i < batch.size(); ++i) l2_normalize(std::span(out).subspan(i * dims, dims));
  return out;
}

// [CLS], length - 2 random ids from the ordinary vocabulary, [SEP].
std::vector<std::int32_t> random_sequence(std::size_t length, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> word(1000, 30000);
  std::vector<std::int32_t> ids(length);
  for (auto& id : ids) id = word(rng);
  ids.front() = 101;
  if (length > 1) ids.back() = 102;
  return ids;
}

class BertCudaTest : public ::testing::TestWithParam<Precision> {
 protected:
  EmbeddingModel& model() { return cuda_model(GetParam()); }
};

TEST_P(BertCudaTest, Info) {
  const ModelInfo& info = model().info();
  EXPECT_EQ(info.name, std::filesystem::path(model_dir()).filename().string());
  EXPECT_EQ(info.hidden, 384u);
  EXPECT_EQ(info.max_positions, 512u);
  EXPECT_EQ(info.vocab, 30522u);
  EXPECT_EQ(info.precision, precision_name(GetParam()));
  EXPECT_FALSE(info.device.empty());
  EXPECT_NE(info.device, "cpu");
}

TEST_P(BertCudaTest, MatchesSentenceTransformers) {
  const Reference ref = load_reference();
  EmbeddingModel& m = model();
  ASSERT_EQ(ref.dims, m.info().hidden);
  ASSERT_GE(ref.ids.size(), 60u);
  const double required = required_cosine(GetParam());
  // Twice: every 7 sentences in reference order (mixed lengths, the last
  // batch shorter), then all of them in one batch.
  for (const std::size_t batch_size : {std::size_t{7}, ref.ids.size()}) {
    double min_cosine = 1.0;
    std::size_t worst = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t first = 0; first < ref.ids.size(); first += batch_size) {
      TokenBatch batch;
      const std::size_t n = std::min(batch_size, ref.ids.size() - first);
      for (std::size_t i = 0; i < n; ++i) batch.add(ref.ids[first + i]);
      const std::vector<float> out = embed(m, batch);
      for (std::size_t i = 0; i < n; ++i) {
        const double c = cosine(std::span(out).subspan(i * ref.dims, ref.dims),
                                std::span(ref.embeddings).subspan((first + i) * ref.dims, ref.dims));
        EXPECT_GE(c, required) << "sentence " << first + i << " in batches of " << batch_size;
        if (c < min_cosine) {
          min_cosine = c;
          worst = first + i;
        }
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("bert cuda %s: %zu sentences in batches of %zu, minimum cosine %.9f (sentence %zu), %.3f s\n",
                precision_name(GetParam()), ref.ids.size(), batch_size, min_cosine, worst, seconds);
  }
}

// Sequences longer than attention's key tile (64 keys at head_dim 32) and than its
// 128 threads, up to max_positions, and a single-token one; the CPU model in
// f32 is the reference. bf16 keeps 8 bits of mantissa and random ids give
// flat attention over hundreds of keys, so it gets a looser bound here.
// The first batch fits a graph, whose attention walks every query row in one
// block; the second has more tokens than any graph, so it runs eagerly and
// splits the long sequences' queries over several blocks.
TEST_P(BertCudaTest, MatchesTheCpuModelOnLongSequences) {
  std::mt19937 rng(18);
  const std::vector<std::vector<std::size_t>> batches = {{512, 1, 300, 129, 128, 2},
                                                         {512, 384, 1, 257, 512, 300, 129, 256, 2, 511}};
  for (const auto& lengths : batches) {
    TokenBatch batch;
    for (const std::size_t length : lengths) batch.add(random_sequence(length, rng));
    const std::vector<float> gpu = embed(model(), batch);
    const std::vector<float> cpu = embed(cpu_model(), batch);
    const std::size_t dims = model().info().hidden;
    const double required = GetParam() == Precision::BF16 ? 0.995 : required_cosine(GetParam());
    double min_cosine = 1.0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const double c = cosine(std::span(gpu).subspan(i * dims, dims), std::span(cpu).subspan(i * dims, dims));
      EXPECT_GE(c, required) << "sequence " << i << " of " << batch.sequence(i).size() << " tokens, batch of "
                             << batch.tokens() << " tokens";
      min_cosine = std::min(min_cosine, c);
    }
    std::printf("bert cuda %s vs cpu, %zu tokens, lengths up to 512: minimum cosine %.9f\n",
                precision_name(GetParam()), batch.tokens(), min_cosine);
  }
}

// /embed_all's token states against the CPU model's, row by row. The same
// shapes as embed() runs: graphs are kept per (tokens, sequences, output), so
// alternating the two never replays one's graph for the other.
TEST_P(BertCudaTest, TokenStatesMatchTheCpuModelAndKeepTheirOwnGraphs) {
  const Reference ref = load_reference();
  TokenBatch batch;
  for (std::size_t i : {0, 1, 5, 17, 200, 239}) batch.add(ref.ids[i]);
  const std::size_t dims = model().info().hidden;
  const std::vector<float> cpu = embed_tokens(cpu_model(), batch);
  const double required = GetParam() == Precision::BF16 ? 0.995 : required_cosine(GetParam());
  std::vector<float> first_pooled;
  std::vector<float> first_tokens;
  double min_cosine = 1.0;
  for (int round = 0; round < 3; ++round) {  // eager, captured, replayed
    const std::vector<float> pooled = embed(model(), batch);
    const std::vector<float> tokens = embed_tokens(model(), batch);
    ASSERT_EQ(tokens.size(), cpu.size());
    for (std::size_t t = 0; t < batch.tokens(); ++t) {
      const double c = cosine(std::span(tokens).subspan(t * dims, dims), std::span(cpu).subspan(t * dims, dims));
      EXPECT_GE(c, required) << "token " << t << ", round " << round;
      min_cosine = std::min(min_cosine, c);
    }
    if (round == 0) {
      first_pooled = pooled;
      first_tokens = tokens;
      continue;
    }
    EXPECT_EQ(pooled, first_pooled) << "round " << round;
    EXPECT_EQ(tokens, first_tokens) << "round " << round;
  }
  std::printf("bert cuda %s token states vs cpu: minimum cosine %.9f\n", precision_name(GetParam()), min_cosine);
}

// CLS and last-token pooling on the GPU: each sequence's first and last token
// state, bit for bit as embed_tokens() returns them, and close to the CPU's.
TEST_P(BertCudaTest, ClsAndLastTokenPoolingAreTheFirstAndLastTokenStates) {
  const Reference ref = load_reference();
  TokenBatch batch;
  for (std::size_t i : {0, 1, 5, 17, 37, 200}) batch.add(ref.ids[i]);
  const std::size_t dims = model().info().hidden;
  const std::vector<float> cpu = embed_tokens(cpu_model(), batch);
  const double required = GetParam() == Precision::BF16 ? 0.995 : required_cosine(GetParam());
  for (const Pooling pooling : {Pooling::Cls, Pooling::LastToken}) {
    EmbeddingModel& m = cuda_pooled_model(GetParam(), pooling);
    ASSERT_EQ(m.info().pooling, pooling);
    const std::vector<float> tokens = embed_tokens(m, batch);
    for (int round = 0; round < 3; ++round) {  // eager, captured, replayed
      std::vector<float> pooled(batch.size() * dims);
      m.embed(batch, pooled.data());
      for (std::size_t s = 0; s < batch.size(); ++s) {
        const std::size_t t = pooling == Pooling::Cls ? batch.starts[s] : batch.starts[s + 1] - 1;
        const auto row = std::span(pooled).subspan(s * dims, dims);
        EXPECT_TRUE(std::equal(row.begin(), row.end(), tokens.begin() + t * dims))
            << pooling_name(pooling) << ", sequence " << s << ", round " << round;
        EXPECT_GE(cosine(row, std::span(cpu).subspan(t * dims, dims)), required)
            << pooling_name(pooling) << ", sequence " << s;
      }
    }
  }
}

// A shape's first batch runs eagerly, its second is captured into a graph,
// later ones replay it: each must read its own batch's ids, not the ids the
// graph was captured with.
TEST_P(BertCudaTest, GraphReplaysReadEachBatchsIds) {
  std::mt19937 rng(7);
  TokenBatch a, b;
  for (const std::size_t length : {32, 17, 64}) {
    a.add(random_sequence(length, rng));
    b.add(random_sequence(length, rng));
  }
  const std::vector<float> a1 = embed(model(), a);  // eager
  const std::vector<float> b1 = embed(model(), b);  // captured
  const std::vector<float> a2 = embed(model(), a);  // replayed
  const std::vector<float> b2 = embed(model(), b);  // replayed
  const std::size_t dims = model().info().hidden;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto row = [&](const std::vector<float>& v) { return std::span(v).subspan(i * dims, dims); };
    EXPECT_GT(cosine(row(a1), row(a2)), 0.999999) << "sequence " << i;
    EXPECT_GT(cosine(row(b1), row(b2)), 0.999999) << "sequence " << i;
    EXPECT_LT(cosine(row(a2), row(b2)), 0.99)
        << "sequence " << i << ": two different batches gave one vector";
  }
}

TEST_P(BertCudaTest, AVectorDoesNotDependOnItsBatch) {
  const Reference ref = load_reference();
  const std::size_t dims = model().info().hidden;
  std::size_t longest = 0, shortest = 0;
  for (std::size_t i = 0; i < ref.ids.size(); ++i) {
    if (ref.ids[i].size() > ref.ids[longest].size()) longest = i;
    if (ref.ids[i].size() < ref.ids[shortest].size()) shortest = i;
  }
  for (const std::size_t target : {longest, shortest, std::size_t{5}}) {
    TokenBatch alone;
    alone.add(ref.ids[target]);
    const std::vector<float> single = embed(model(), alone);
    TokenBatch mixed;
    for (std::size_t i = 0; i < 9; ++i) {
      if (i == 4) mixed.add(ref.ids[target]);
      mixed.add(ref.ids[(target + 17 * (i + 1)) % ref.ids.size()]);
    }
    const std::vector<float> out = embed(model(), mixed);
    // cuBLAS may pick another kernel for another token count, which changes
    // the rounding of f16 and bf16 (not by much); a sequence attending to its
    // neighbours would fall far below these bounds.
    const double required = GetParam() == Precision::F32   ? 0.99999
                            : GetParam() == Precision::F16 ? 0.9995
                                                           : 0.999;
    EXPECT_GT(cosine(single, std::span(out).subspan(4 * dims, dims)), required) << "sentence " << target;
  }
}

// Several threads calling one model of three lanes: each call gets the
// vectors its own batch gives on a model of one lane, whichever lane it ran on
// and whatever the others ran beside it; a fourth thread waits for a lane.
TEST(BertCudaLanes, CallsAtOnceEachGetTheirOwnBatchsVectors) {
  require_model_files();
  BertOptions options;
  options.model_dir = model_dir();
  options.cuda = true;
  options.precision = Precision::F16;
  options.lanes = 3;
  const std::unique_ptr<EmbeddingModel> lanes = make_bert_model(options);
  ASSERT_EQ(lanes->concurrency(), 3u);
  EmbeddingModel& one = cuda_model(Precision::F16);
  ASSERT_EQ(one.concurrency(), 1u);

  // Shapes that land in graphs of several buckets, and eager ones past them.
  std::mt19937 rng(41);
  std::vector<TokenBatch> batches(24);
  std::vector<std::vector<float>> expected;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const std::size_t sequences = 1 + rng() % 40;
    const std::size_t longest = b % 6 == 5 ? 512 : 24 + rng() % 200;
    for (std::size_t i = 0; i < sequences; ++i)
      batches[b].add(random_sequence(2 + rng() % (longest - 1), rng));
    expected.push_back(embed(one, batches[b]));
  }
  const std::size_t dims = one.info().hidden;
  std::vector<std::thread> callers;
  std::vector<std::string> failures(4);
  for (std::size_t c = 0; c < failures.size(); ++c) {
    callers.emplace_back([&, c] {
      try {
        for (std::size_t round = 0; round < 10; ++round) {
          for (std::size_t k = 0; k < batches.size(); ++k) {
            const std::size_t b = (k * (c + 1) + round) % batches.size();
            const std::vector<float> got = embed(*lanes, batches[b]);
            for (std::size_t i = 0; i < batches[b].size(); ++i) {
              const double c2 = cosine(std::span(got).subspan(i * dims, dims),
                                       std::span(expected[b]).subspan(i * dims, dims));
              if (!(c2 > 0.99999))
                throw Error("batch " + std::to_string(b) + " sequence " + std::to_string(i) + ": cosine " +
                            std::to_string(c2) + " to the one-lane model's vector");
            }
          }
        }
      } catch (const std::exception& e) {
        failures[c] = e.what();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (std::size_t c = 0; c < failures.size(); ++c) EXPECT_EQ(failures[c], "") << "caller " << c;
}

TEST_P(BertCudaTest, RejectsInvalidBatchesAndKeepsWorking) {
  EmbeddingModel& m = model();
  std::vector<float> out(300 * m.info().hidden);
  TokenBatch b;
  b.add(std::vector<std::int32_t>{101, 30522, 102});
  EXPECT_THROW(m.embed(b, out.data()), Error);
  b.clear();
  b.add(std::vector<std::int32_t>{101, -1, 102});
  EXPECT_THROW(m.embed(b, out.data()), Error);
  b.clear();
  b.add(std::vector<std::int32_t>(513, 1000));
  EXPECT_THROW(m.embed(b, out.data()), Error);
  b.clear();
  b.add(std::vector<std::int32_t>{});
  EXPECT_THROW(m.embed(b, out.data()), Error);
  b.clear();
  for (int i = 0; i < 33; ++i) b.add(std::vector<std::int32_t>(500, 1000));  // 16500 > max_batch_tokens 16384
  EXPECT_THROW(m.embed(b, out.data()), Error);
  b.clear();
  for (int i = 0; i < 257; ++i) b.add(std::vector<std::int32_t>{101, 102});  // 257 > max_batch 256
  EXPECT_THROW(m.embed(b, out.data()), Error);

  // An empty batch writes nothing; a good batch still works after the refusals.
  b.clear();
  out[0] = 42.0f;
  m.embed(b, out.data());
  EXPECT_EQ(out[0], 42.0f);
  b.add(std::vector<std::int32_t>{101, 7592, 2088, 102});
  const std::vector<float> v = embed(m, b);
  EXPECT_NEAR(std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0)), 1.0, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Precisions, BertCudaTest,
                         ::testing::Values(Precision::F16, Precision::BF16, Precision::F32),
                         [](const ::testing::TestParamInfo<Precision>& p) {
                           return std::string(precision_name(p.param));
                         });

// The exact (erf) GELU runs as a kernel after the product, the default tanh
// form inside the product's epilogue: both must reach the reference, and the
// switch must change the computation (else this test proves nothing).
TEST(BertCudaModel, ExactGeluMatchesSentenceTransformersAndTheTanhForm) {
  const Reference ref = load_reference();
  for (const Precision p : {Precision::F16, Precision::F32}) {
    EmbeddingModel& exact_model = cuda_model(p, Gelu::Exact);
    double min_reference = 1.0, min_forms = 1.0, max_difference = 0.0;
    for (std::size_t first = 0; first < ref.ids.size(); first += 7) {
      TokenBatch batch;
      const std::size_t n = std::min<std::size_t>(7, ref.ids.size() - first);
      for (std::size_t i = 0; i < n; ++i) batch.add(ref.ids[first + i]);
      const std::vector<float> exact = embed(exact_model, batch);
      const std::vector<float> tanh_form = embed(cuda_model(p), batch);
      for (std::size_t i = 0; i < n; ++i) {
        const auto row = [&](const std::vector<float>& v) { return std::span(v).subspan(i * ref.dims, ref.dims); };
        min_reference = std::min(
            min_reference, cosine(row(exact), std::span(ref.embeddings).subspan((first + i) * ref.dims, ref.dims)));
        min_forms = std::min(min_forms, cosine(row(exact), row(tanh_form)));
      }
      for (std::size_t k = 0; k < exact.size(); ++k)
        max_difference = std::max(max_difference, static_cast<double>(std::abs(exact[k] - tanh_form[k])));
    }
    std::printf("bert cuda %s exact GELU: minimum cosine %.9f to the reference, %.9f to tanh (max |diff| %.3g)\n",
                precision_name(p), min_reference, min_forms, max_difference);
    EXPECT_GE(min_reference, required_cosine(p));
    EXPECT_GE(min_forms, 0.9999);
    EXPECT_GT(max_difference, 0.0) << "--gelu exact computed what tanh did";
  }
}

TEST(BertCudaModel, AMissingGpuIsNamed) {
  require_model_files();
  BertOptions options;
  options.model_dir = model_dir();
  options.cuda = true;
  options.gpu = 999;
  try {
    (void)make_bert_model(options);
    ADD_FAILURE() << "GPU 999 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ferry::infer

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bert_cuda_test: no CUDA device, skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  ferry::infer::models().clear();  // while the CUDA runtime is still up
  return rc;
}
