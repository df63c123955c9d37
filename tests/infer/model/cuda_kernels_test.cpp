// The CUDA model's attention, embedding and LayerNorm kernels on random
// inputs, against the same arithmetic on the CPU in double: sequence lengths
// around every tile edge (1, 15-17, 63-65, 127-129, 200, 256), eager launches
// that split long sequences' queries and graph-style ones that do not, f16,
// bf16 and f32, MiniLM's shape (384 wide, 12 heads) and BERT-base's head of 64.
// Needs no model files, so it also runs under compute-sanitizer. Exits 77
// (ctest: skipped) where there is no GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "infer/model/cuda/kernels.cuh"

namespace ferry::infer::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}

template <typename T>
float to_f(T v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else
    return __bfloat162float(v);
}

template <typename T>
T from_f(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

// Largest |difference| the element type's rounding explains for outputs of about 1.
template <typename T>
double tolerance() {
  if constexpr (std::is_same_v<T, float>)
    return 1e-4;
  else if constexpr (std::is_same_v<T, __half>)
    return 1e-2;
  else
    return 5e-2;
}

template <typename T>
struct Device {
  T* p = nullptr;
  explicit Device(std::size_t n) {
    cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T));
  }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

template <typename T>
std::vector<T> random_values(std::size_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<T> v(n);
  for (T& x : v) x = from_f<T>(u(rng));
  return v;
}

// Attention of every (sequence, head) on the CPU, as kernels.cuh specifies it:
// the query's bias added and rounded to T, keys and values with theirs in f32.
template <typename T>
std::vector<double> reference_attention(const std::vector<T>& qkv, const std::vector<float>& bias,
                                        const std::vector<std::uint32_t>& starts, std::size_t hidden,
                                        std::size_t heads) {
  const std::size_t d = hidden / heads;
  const std::size_t tokens = starts.back();
  std::vector<double> out(tokens * hidden);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
    const std::size_t b = starts[s], len = starts[s + 1] - b;
    for (std::size_t h = 0; h < heads; ++h) {
      const auto at = [&](std::size_t row, std::size_t part, std::size_t c) {
        return to_f(qkv[(b + row) * 3 * hidden + part * hidden + h * d + c]) +
               bias[part * hidden + h * d + c];
      };
      for (std::size_t i = 0; i < len; ++i) {
        std::vector<double> score(len);
        double top = -INFINITY;
        for (std::size_t j = 0; j < len; ++j) {
          double dot = 0;
          for (std::size_t c = 0; c < d; ++c)
            dot += to_f(from_f<T>(at(i, 0, c))) * static_cast<double>(at(j, 1, c));
          score[j] = dot * scale;
          top = std::max(top, score[j]);
        }
        double sum = 0;
        for (double& x : score) sum += (x = std::exp(x - top));
        for (std::size_t c = 0; c < d; ++c) {
          double o = 0;
          for (std::size_t j = 0; j < len; ++j) o += score[j] * at(j, 2, c);
          out[(b + i) * hidden + h * d + c] = o / sum;
        }
      }
    }
  }
  return out;
}

template <typename T>
void run_attention(const std::vector<std::uint32_t>& lengths, std::size_t hidden, std::size_t heads,
                   bool eager) {
  std::mt19937 rng(static_cast<unsigned>(lengths.size() * 131 + hidden + eager));
  std::vector<std::uint32_t> starts{0};
  std::size_t longest = 0;
  for (std::uint32_t n : lengths) {
    starts.push_back(starts.back() + n);
    longest = std::max<std::size_t>(longest, n);
  }
  const std::size_t tokens = starts.back();
  const std::vector<T> qkv = random_values<T>(tokens * 3 * hidden, 2.0f, rng);
  std::vector<float> bias(3 * hidden);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (float& b : bias) b = u(rng);

  Device<T> qkv_d(qkv.size()), ctx_d(tokens * hidden);
  Device<float> bias_d(bias.size());
  Device<std::uint32_t> starts_d(starts.size());
  check(cudaMemcpy(qkv_d.p, qkv.data(), qkv.size() * sizeof(T), cudaMemcpyHostToDevice), "qkv up");
  check(cudaMemcpy(bias_d.p, bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice), "bias up");
  check(cudaMemcpy(starts_d.p, starts.data(), starts.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice),
        "starts up");
  launch_attention<T>(qkv_d.p, bias_d.p, starts_d.p, lengths.size(), eager ? longest : 0, hidden, heads,
                      ctx_d.p, nullptr);
  check(cudaDeviceSynchronize(), "attention");
  std::vector<T> ctx(tokens * hidden);
  check(cudaMemcpy(ctx.data(), ctx_d.p, ctx.size() * sizeof(T), cudaMemcpyDeviceToHost), "ctx down");

  const std::vector<double> want = reference_attention(qkv, bias, starts, hidden, heads);
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t k = 0; k < want.size(); ++k) {
    const double diff = std::abs(to_f(ctx[k]) - want[k]);
    if (!(diff <= worst)) worst = diff, worst_at = k;  // a NaN counts as the worst
  }
  EXPECT_LE(worst, tolerance<T>()) << "token " << worst_at / hidden << " column " << worst_at % hidden
                                   << ": got " << to_f(ctx[worst_at]) << ", want " << want[worst_at];
}

const std::vector<std::uint32_t> kEdges{1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 256};

template <typename T>
class KernelTest : public ::testing::Test {};
using Elements = ::testing::Types<__half, __nv_bfloat16, float>;
TYPED_TEST_SUITE(KernelTest, Elements);

TYPED_TEST(KernelTest, AttentionMatchesTheCpuAtEveryTileEdge) {
  for (const bool eager : {false, true}) {
    SCOPED_TRACE(eager ? "eager (long sequences split)" : "as a graph (no split)");
    run_attention<TypeParam>(kEdges, 384, 12, eager);
  }
}

TYPED_TEST(KernelTest, AttentionOfOneLongSequenceSplitsAcrossBlocks) {
  run_attention<TypeParam>({256}, 384, 12, true);
  run_attention<TypeParam>({512, 3}, 384, 12, true);
}

TYPED_TEST(KernelTest, AttentionWithHeadsOf64) {
  run_attention<TypeParam>({1, 17, 64, 65, 130}, 768, 12, true);
}

TYPED_TEST(KernelTest, AttentionWithHeadsNarrowerThanTheTile) {
  run_attention<TypeParam>({3, 40, 70}, 192, 12, true);  // heads of 16
  run_attention<TypeParam>({9, 66}, 480, 12, false);     // heads of 40
}

template <typename T>
void run_norm(std::size_t rows, std::size_t tokens, std::size_t hidden) {
  std::mt19937 rng(static_cast<unsigned>(rows * 7 + hidden));
  const std::vector<T> x = random_values<T>(rows * hidden, 3.0f, rng);
  const std::vector<T> residual = random_values<T>(rows * hidden, 3.0f, rng);
  std::vector<float> bias(hidden), gamma(hidden), beta(hidden);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (std::size_t c = 0; c < hidden; ++c) bias[c] = u(rng), gamma[c] = 1.0f + u(rng), beta[c] = u(rng);
  const float eps = 1e-12f;

  Device<T> x_d(x.size()), r_d(residual.size());
  Device<float> bias_d(hidden), gamma_d(hidden), beta_d(hidden);
  Device<std::uint32_t> tokens_d(1);
  const auto tok = static_cast<std::uint32_t>(tokens);
  check(cudaMemcpy(x_d.p, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice), "x up");
  check(cudaMemcpy(r_d.p, residual.data(), residual.size() * sizeof(T), cudaMemcpyHostToDevice),
        "residual up");
  check(cudaMemcpy(bias_d.p, bias.data(), hidden * sizeof(float), cudaMemcpyHostToDevice), "bias up");
  check(cudaMemcpy(gamma_d.p, gamma.data(), hidden * sizeof(float), cudaMemcpyHostToDevice), "gamma up");
  check(cudaMemcpy(beta_d.p, beta.data(), hidden * sizeof(float), cudaMemcpyHostToDevice), "beta up");
  check(cudaMemcpy(tokens_d.p, &tok, sizeof(tok), cudaMemcpyHostToDevice), "tokens up");
  launch_bias_residual_norm<T>(x_d.p, bias_d.p, r_d.p, gamma_d.p, beta_d.p, eps, rows, tokens_d.p, hidden,
                               nullptr);
  check(cudaDeviceSynchronize(), "bias_residual_norm");
  std::vector<T> got(residual.size());
  check(cudaMemcpy(got.data(), r_d.p, got.size() * sizeof(T), cudaMemcpyDeviceToHost), "residual down");

  double worst = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const T* in_r = residual.data() + r * hidden;
    const T* out_r = got.data() + r * hidden;
    if (r >= tokens) {  // rows past the batch's tokens are left as they were
      for (std::size_t c = 0; c < hidden; ++c) ASSERT_EQ(to_f(out_r[c]), to_f(in_r[c])) << "row " << r;
      continue;
    }
    std::vector<double> v(hidden);
    double mean = 0, var = 0;
    for (std::size_t c = 0; c < hidden; ++c) mean += v[c] = to_f(x[r * hidden + c]) + bias[c] + to_f(in_r[c]);
    mean /= hidden;
    for (double e : v) var += (e - mean) * (e - mean);
    const double inv = 1.0 / std::sqrt(var / hidden + eps);
    for (std::size_t c = 0; c < hidden; ++c) {
      const double want = (v[c] - mean) * inv * gamma[c] + beta[c];
      const double diff = std::abs(to_f(out_r[c]) - want);
      if (!(diff <= worst)) worst = diff;
    }
  }
  EXPECT_LE(worst, 4 * tolerance<T>()) << rows << " rows of " << hidden;
}

TYPED_TEST(KernelTest, BiasResidualNormMatchesTheCpu) {
  run_norm<TypeParam>(37, 37, 384);  // four a lane access
  run_norm<TypeParam>(64, 50, 768);  // BERT-base, rows past the tokens
  run_norm<TypeParam>(9, 9, 390);    // pairs
  run_norm<TypeParam>(5, 5, 1000);   // a block a row
}

template <typename T>
void run_embed_norm(const std::vector<std::uint32_t>& lengths, std::size_t hidden, std::size_t padding_rows) {
  std::mt19937 rng(static_cast<unsigned>(lengths.size() * 17 + hidden));
  constexpr std::size_t kVocab = 1000, kPositions = 512;
  const std::vector<T> word = random_values<T>(kVocab * hidden, 1.0f, rng);
  const std::vector<T> position = random_values<T>(kPositions * hidden, 1.0f, rng);
  const std::vector<T> token_type = random_values<T>(hidden, 1.0f, rng);
  std::vector<float> gamma(hidden), beta(hidden);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (std::size_t c = 0; c < hidden; ++c) gamma[c] = 1.0f + u(rng), beta[c] = u(rng);
  std::vector<std::uint32_t> starts{0};
  for (std::uint32_t n : lengths) starts.push_back(starts.back() + n);
  const std::size_t tokens = starts.back(), rows = tokens + padding_rows;
  std::vector<std::int32_t> ids(rows);
  std::uniform_int_distribution<std::int32_t> pick(0, kVocab - 1);
  for (auto& id : ids) id = pick(rng);
  const float eps = 1e-12f;

  Device<T> word_d(word.size()), position_d(position.size()), type_d(hidden), out_d(rows * hidden);
  Device<float> gamma_d(hidden), beta_d(hidden);
  Device<std::int32_t> ids_d(rows);
  Device<std::uint32_t> starts_d(starts.size());
  check(cudaMemcpy(word_d.p, word.data(), word.size() * sizeof(T), cudaMemcpyHostToDevice), "word up");
  check(cudaMemcpy(position_d.p, position.data(), position.size() * sizeof(T), cudaMemcpyHostToDevice),
        "pos up");
  check(cudaMemcpy(type_d.p, token_type.data(), hidden * sizeof(T), cudaMemcpyHostToDevice), "type up");
  check(cudaMemcpy(gamma_d.p, gamma.data(), hidden * sizeof(float), cudaMemcpyHostToDevice), "gamma up");
  check(cudaMemcpy(beta_d.p, beta.data(), hidden * sizeof(float), cudaMemcpyHostToDevice), "beta up");
  check(cudaMemcpy(ids_d.p, ids.data(), rows * sizeof(std::int32_t), cudaMemcpyHostToDevice), "ids up");
  check(cudaMemcpy(starts_d.p, starts.data(), starts.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice),
        "starts up");
  check(cudaMemset(out_d.p, 0, rows * hidden * sizeof(T)), "out clear");
  const EmbeddingTables tables{word_d.p, position_d.p, type_d.p, gamma_d.p, beta_d.p, eps};
  // The batch's token count is starts[sequences], in device memory.
  launch_embed_norm<T>(ids_d.p, starts_d.p, lengths.size(), rows, starts_d.p + lengths.size(), hidden, tables,
                       out_d.p, nullptr);
  check(cudaDeviceSynchronize(), "embed_norm");
  std::vector<T> got(rows * hidden);
  check(cudaMemcpy(got.data(), out_d.p, got.size() * sizeof(T), cudaMemcpyDeviceToHost), "out down");

  double worst = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    for (std::size_t t = starts[s]; t < starts[s + 1]; ++t) {
      std::vector<double> v(hidden);
      double mean = 0, var = 0;
      for (std::size_t c = 0; c < hidden; ++c)
        mean += v[c] = to_f(word[ids[t] * hidden + c]) + to_f(position[(t - starts[s]) * hidden + c]) +
                       to_f(token_type[c]);
      mean /= hidden;
      for (double e : v) var += (e - mean) * (e - mean);
      const double inv = 1.0 / std::sqrt(var / hidden + eps);
      for (std::size_t c = 0; c < hidden; ++c) {
        const double diff = std::abs(to_f(got[t * hidden + c]) - ((v[c] - mean) * inv * gamma[c] + beta[c]));
        if (!(diff <= worst)) worst = diff;
      }
    }
  }
  for (std::size_t k = tokens * hidden; k < rows * hidden; ++k)
    ASSERT_EQ(to_f(got[k]), 0.0f) << "padding row " << k / hidden << " was written";
  EXPECT_LE(worst, 4 * tolerance<T>()) << tokens << " tokens of " << hidden;
}

TYPED_TEST(KernelTest, EmbedNormMatchesTheCpu) {
  run_embed_norm<TypeParam>({1, 17, 128, 3}, 384, 7);  // four a lane access
  run_embed_norm<TypeParam>({64, 5}, 768, 0);          // BERT-base
  run_embed_norm<TypeParam>({9, 2}, 390, 3);           // pairs
  run_embed_norm<TypeParam>({4, 4}, 1000, 2);          // a block a token
}

}  // namespace
}  // namespace ferry::infer::cuda

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_kernels_test: no CUDA device, skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
