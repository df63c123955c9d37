#include "infer/model/bert_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "ferry/core/status.h"
#include "infer/model/batch_check.h"
#include "infer/model/openblas.h"
#include "infer/model/worker_pool.h"

namespace ferry::infer {

namespace {

// y[rows][out] = x[rows][in] * weight[out][in]^T + bias: the bias is copied
// into every row first so that one sgemm with beta = 1 adds the product.
void linear(const float* x, std::size_t rows, std::size_t in, const float* weight, const float* bias,
            std::size_t out, float* y) noexcept {
  for (std::size_t r = 0; r < rows; ++r) std::memcpy(y + r * out, bias, out * sizeof(float));
  openblas().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(out),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), weight, static_cast<int>(in), 1.0f, y,
              static_cast<int>(out));
}

// One row in place: (x - mean) / sqrt(var + eps) * gamma + beta.
void layer_norm_row(float* x, std::size_t n, const LayerNorm& norm, float eps) noexcept {
  // Moments in double: two-pass, so that a large mean does not cancel the variance.
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  double var = 0;
  for (std::size_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const auto m = static_cast<float>(mean);
  const auto inv = static_cast<float>(1.0 / std::sqrt(var + eps));
  for (std::size_t i = 0; i < n; ++i) x[i] = (x[i] - m) * inv * norm.gamma[i] + norm.beta[i];
}

// x = LayerNorm(x + sublayer), BERT's post-norm residual.
void add_layer_norm(float* x, const float* sublayer, std::size_t rows, std::size_t hidden,
                    const LayerNorm& norm, float eps) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = x + r * hidden;
    const float* add = sublayer + r * hidden;
    for (std::size_t i = 0; i < hidden; ++i) row[i] += add[i];
    layer_norm_row(row, hidden, norm, eps);
  }
}

void gelu(float* x, std::size_t n, Gelu form) noexcept {
  if (form == Gelu::Exact) {
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    for (std::size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
    return;
  }
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  for (std::size_t i = 0; i < n; ++i)
    x[i] = 0.5f * x[i] * (1.0f + std::tanh(kSqrt2OverPi * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

void softmax_rows(float* s, std::size_t rows, std::size_t cols) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = s + r * cols;
    const float max = *std::max_element(row, row + cols);
    float sum = 0;
    for (std::size_t c = 0; c < cols; ++c) {
      row[c] = std::exp(row[c] - max);
      sum += row[c];
    }
    const float inv = 1.0f / sum;
    for (std::size_t c = 0; c < cols; ++c) row[c] *= inv;
  }
}

// A heap array left uninitialised: scratch for max_batch_tokens is large
// (about 1 GiB at 16384 tokens for a 1024-wide model), and pages that a
// smaller batch never touches then never become resident.
std::unique_ptr<float[]> scratch(std::size_t n) {
  return std::make_unique_for_overwrite<float[]>(n);
}

class BertCpuModel final : public EmbeddingModel {
 public:
  BertCpuModel(BertWeights w, const BertOptions& options, std::string name)
      : config_(w.config),
        max_batch_(options.max_batch),
        max_batch_tokens_(options.max_batch_tokens),
        gelu_(options.gelu.value_or(Gelu::Exact)),
        word_embeddings_(std::move(w.word_embeddings)),
        position_embeddings_(std::move(w.position_embeddings)),
        token_type_embeddings_(std::move(w.token_type_embeddings)),
        embedding_norm_(std::move(w.embedding_norm)) {
    if (max_batch_ == 0 || max_batch_tokens_ == 0)
      throw Error("bert cpu: max_batch and max_batch_tokens must be > 0");
    // sgemm takes int dimensions.
    const std::size_t widest = 3 * std::max(config_.hidden, config_.intermediate);
    if (max_batch_tokens_ > static_cast<std::size_t>(std::numeric_limits<int>::max()) / widest)
      throw Error("bert cpu: max_batch_tokens " + std::to_string(max_batch_tokens_) +
                  " is too large for this model");
    const std::size_t h = config_.hidden;
    for (BertLayer& l : w.layers) {
      Layer fused;
      // Q, K and V rows stacked: [3 * hidden][hidden], so one GEMM computes all three.
      fused.qkv_weight.reserve(3 * h * h);
      fused.qkv_bias.reserve(3 * h);
      for (const Linear* part : {&l.query, &l.key, &l.value}) {
        fused.qkv_weight.insert(fused.qkv_weight.end(), part->weight.begin(), part->weight.end());
        fused.qkv_bias.insert(fused.qkv_bias.end(), part->bias.begin(), part->bias.end());
      }
      fused.attention_out = std::move(l.attention_out);
      fused.attention_norm = std::move(l.attention_norm);
      fused.intermediate = std::move(l.intermediate);
      fused.output = std::move(l.output);
      fused.output_norm = std::move(l.output_norm);
      layers_.push_back(std::move(fused));
    }
    const std::size_t tokens = max_batch_tokens_;
    hidden_ = scratch(tokens * h);
    qkv_ = scratch(tokens * 3 * h);
    context_ = scratch(tokens * h);
    sublayer_ = scratch(tokens * h);
    intermediate_ = scratch(tokens * config_.intermediate);
    // Every core unless told otherwise. The model splits its work over its
    // own threads (worker_pool.h), each calling a single-threaded sgemm.
    const std::size_t threads = options.cpu_threads > 0 ? static_cast<std::size_t>(options.cpu_threads)
                                                        : std::max(1u, std::thread::hardware_concurrency());
    openblas().set_num_threads(1);
    pool_ = std::make_unique<WorkerPool>(threads);
    longest_ = std::min(config_.max_positions, tokens);
    scores_ = scratch(threads * longest_ * longest_);
    info_.name = std::move(name);
    info_.hidden = h;
    info_.max_positions = config_.max_positions;
    info_.vocab = config_.vocab;
    info_.precision = "f32";
    info_.pooling = options.pooling.value_or(Pooling::Mean);
    static const char* const kParallel[] = {"serial", "pthreads", "OpenMP"};
    const int parallel = openblas().get_parallel();
    info_.device = "cpu (" + std::to_string(threads) + " threads, OpenBLAS " +
                   std::string(parallel >= 0 && parallel <= 2 ? kParallel[parallel] : "?") + ")";
  }

  const ModelInfo& info() const noexcept override { return info_; }

  void embed(const TokenBatch& batch, float* out) override {
    if (!forward(batch)) return;
    pool(batch, out);
  }

  void embed_tokens(const TokenBatch& batch, float* out) override {
    if (!forward(batch)) return;
    std::memcpy(out, hidden_.get(), batch.tokens() * config_.hidden * sizeof(float));
  }

 private:
  // Leaves the batch's last hidden states in hidden_; false for an empty batch.
  bool forward(const TokenBatch& batch) {
    check_batch(batch, info_, max_batch_, max_batch_tokens_);
    const std::size_t tokens = batch.tokens();
    if (tokens == 0) return false;
    const std::size_t h = config_.hidden;
    const float eps = config_.layer_norm_eps;

    const std::size_t inter = config_.intermediate;
    embedding_layer(batch);
    for (const Layer& l : layers_) {
      // Each block of token rows goes through a step on one thread; attention
      // goes by sequence. Every step reads only what the one before wrote.
      by_rows(tokens, [&](std::size_t r0, std::size_t n) {
        linear(hidden_.get() + r0 * h, n, h, l.qkv_weight.data(), l.qkv_bias.data(), 3 * h, qkv_.get() + r0 * 3 * h);
      });
      attention(batch);
      by_rows(tokens, [&](std::size_t r0, std::size_t n) {
        linear(context_.get() + r0 * h, n, h, l.attention_out.weight.data(), l.attention_out.bias.data(), h,
               sublayer_.get() + r0 * h);
        add_layer_norm(hidden_.get() + r0 * h, sublayer_.get() + r0 * h, n, h, l.attention_norm, eps);
        linear(hidden_.get() + r0 * h, n, h, l.intermediate.weight.data(), l.intermediate.bias.data(), inter,
               intermediate_.get() + r0 * inter);
        gelu(intermediate_.get() + r0 * inter, n * inter, gelu_);
        linear(intermediate_.get() + r0 * inter, n, inter, l.output.weight.data(), l.output.bias.data(), h,
               sublayer_.get() + r0 * h);
        add_layer_norm(hidden_.get() + r0 * h, sublayer_.get() + r0 * h, n, h, l.output_norm, eps);
      });
    }
    return true;
  }

  struct Layer {
    std::vector<float> qkv_weight;  // [3 * hidden][hidden]: query, key, value
    std::vector<float> qkv_bias;    // [3 * hidden]
    Linear attention_out;
    LayerNorm attention_norm;
    Linear intermediate, output;
    LayerNorm output_norm;
  };

  // Calls step(first_row, rows) for blocks of the batch's rows, across the pool.
  template <typename Step>
  void by_rows(std::size_t rows, const Step& step) {
    // A few blocks per thread keep them busy when blocks take uneven time; 16
    // rows at least keep each sgemm worth its call.
    const std::size_t per = std::max<std::size_t>(16, (rows + 2 * pool_->size() - 1) / (2 * pool_->size()));
    const std::size_t blocks = (rows + per - 1) / per;
    pool_->run(blocks, [&](std::size_t b, std::size_t) {
      const std::size_t r0 = b * per;
      step(r0, std::min(per, rows - r0));
    });
  }

  // hidden_ = LayerNorm(word + position + token type 0), positions restarting
  // at 0 in every sequence.
  void embedding_layer(const TokenBatch& batch) noexcept {
    const std::size_t h = config_.hidden;
    const float* type0 = token_type_embeddings_.data();
    for (std::size_t s = 0; s < batch.size(); ++s) {
      for (std::size_t t = batch.starts[s]; t < batch.starts[s + 1]; ++t) {
        float* row = hidden_.get() + t * h;
        const float* word = word_embeddings_.data() + static_cast<std::size_t>(batch.ids[t]) * h;
        const float* position = position_embeddings_.data() + (t - batch.starts[s]) * h;
        for (std::size_t i = 0; i < h; ++i) row[i] = word[i] + position[i] + type0[i];
        layer_norm_row(row, h, embedding_norm_, config_.layer_norm_eps);
      }
    }
  }

  // context_ = softmax(Q K^T / sqrt(d)) V for every sequence and head, each
  // sequence attending only to itself: no padding and no mask needed.
  void attention(const TokenBatch& batch) {
    const std::size_t h = config_.hidden;
    const std::size_t d = h / config_.heads;
    const int ld_qkv = static_cast<int>(3 * h);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    pool_->run(batch.size(), [&](std::size_t s, std::size_t worker) {
      const std::size_t start = batch.starts[s];
      const int len = static_cast<int>(batch.starts[s + 1] - start);
      float* scores = scores_.get() + worker * longest_ * longest_;
      for (std::size_t head = 0; head < config_.heads; ++head) {
        const float* q = qkv_.get() + start * 3 * h + head * d;
        const float* k = q + h;
        const float* v = q + 2 * h;
        openblas().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, static_cast<int>(d), scale, q, ld_qkv,
                    k, ld_qkv, 0.0f, scores, len);
        softmax_rows(scores, static_cast<std::size_t>(len), static_cast<std::size_t>(len));
        openblas().sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, static_cast<int>(d), len, 1.0f, scores,
                    len, v, ld_qkv, 0.0f, context_.get() + start * h + head * d, static_cast<int>(h));
      }
    });
  }

  // out[s] = sequence s's last hidden states pooled as info_.pooling says.
  void pool(const TokenBatch& batch, float* out) const noexcept {
    const std::size_t h = config_.hidden;
    for (std::size_t s = 0; s < batch.size(); ++s) {
      float* row = out + s * h;
      if (info_.pooling != Pooling::Mean) {
        const std::size_t t = info_.pooling == Pooling::Cls ? batch.starts[s] : batch.starts[s + 1] - 1;
        std::memcpy(row, hidden_.get() + t * h, h * sizeof(float));
        continue;
      }
      std::fill(row, row + h, 0.0f);
      for (std::size_t t = batch.starts[s]; t < batch.starts[s + 1]; ++t) {
        const float* x = hidden_.get() + t * h;
        for (std::size_t i = 0; i < h; ++i) row[i] += x[i];
      }
      const float inv = 1.0f / static_cast<float>(batch.starts[s + 1] - batch.starts[s]);
      for (std::size_t i = 0; i < h; ++i) row[i] *= inv;
    }
  }

  BertConfig config_;
  std::size_t max_batch_;
  std::size_t max_batch_tokens_;
  Gelu gelu_;
  std::vector<float> word_embeddings_;
  std::vector<float> position_embeddings_;
  std::vector<float> token_type_embeddings_;
  LayerNorm embedding_norm_;
  std::vector<Layer> layers_;
  ModelInfo info_;

  // Scratch, each sized for max_batch_tokens (scores_ for the longest sequence).
  std::unique_ptr<float[]> hidden_;        // [tokens][hidden], the residual stream
  std::unique_ptr<float[]> qkv_;           // [tokens][3 * hidden]
  std::unique_ptr<float[]> context_;       // [tokens][hidden], attention's output before its dense layer
  std::unique_ptr<float[]> sublayer_;      // [tokens][hidden], a sublayer's output before the residual add
  std::unique_ptr<float[]> intermediate_;  // [tokens][intermediate]
  std::unique_ptr<float[]> scores_;        // per thread: [len][len] for one sequence and head at a time
  std::size_t longest_ = 0;                // the longest sequence a batch may hold
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace

std::unique_ptr<EmbeddingModel> make_bert_cpu_model(BertWeights weights, const BertOptions& options,
                                                    std::string name) {
  return std::make_unique<BertCpuModel>(std::move(weights), options, std::move(name));
}

}  // namespace ferry::infer
