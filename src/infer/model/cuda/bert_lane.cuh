#pragma once
// One batch in flight on the CUDA BERT model: a stream, the cuBLAS handles and
// workspace on it, pinned staging, the activations, and the CUDA graphs that
// replay the forward pass. The weights are the model's, shared by its lanes,
// so that a second lane costs activations and graphs, not another copy of the
// model. A lane runs one call at a time; the model hands lanes to callers
// (bert_cuda.cu).
//
// One call is: ids and starts into pinned staging -> one copy each to the
// device -> ~50 kernels -> one copy of the pooled [n][hidden] f32 rows back ->
// stream synchronise -> memcpy to the caller. All of it between the staging
// and the synchronise is enqueued by enqueue_batch(). While one lane waits on
// its copies and its synchronise, another lane's kernels keep the GPU busy.
//
// CUDA graphs, all made when the lane is built. Instantiating a graph can
// wait for every kernel on the device to finish, and ferry http's persistent
// GPU workers never finish: a graph made while they run hangs the model for
// good (cuGraphInstantiateWithFlags was where the batcher stood). So the lane
// captures one graph per bucket of (rows, sequences) at start: rows are
// gemm_rows(tokens), sequences a power of two up to max_batch. A batch runs as
// its bucket: the missing sequences are empty (starts repeat the token count)
// and every kernel reads the real token count from starts_d[sequences] on the
// device, so the padding costs the products' rows and nothing else. Batches of
// more than kMaxGraphRows rows, and embed_tokens() (/embed_all), run eagerly:
// launching needs no instantiation, and at those sizes the launches hide
// behind the kernels.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "ferry/infer/bert.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "infer/model/bert_weights.h"
#include "infer/model/cuda/device_memory.h"
#include "infer/model/cuda/device_weights.cuh"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/products.h"

namespace ferry::infer::cuda {

using worker::cuda::GraphExec;
using worker::cuda::Stream;

// cuBLAS allocates its workspace on first use unless given one, and an
// allocation cannot happen inside graph capture; 32 MiB is what NVIDIA
// recommends for Hopper.
inline constexpr std::size_t kCublasWorkspaceBytes = 32u << 20;
// The largest bucket with a graph: its kernels take longer than launching them.
inline constexpr std::size_t kMaxGraphRows = 2048;

// The rows cuBLAS sees for a batch of `tokens`: rounded up to 16 * 2^k or
// 24 * 2^k. cuBLAS loads the kernel a shape needs when it first meets the
// shape, and loading a kernel waits for every kernel running on the device,
// which ferry http's persistent GPU workers never stop doing. With rows from
// this short list, every kernel is loaded at start (warm_up) and none later.
// The padding rows cost at most half as much again in the products; each
// output row depends on its input row alone, so the real rows are exact.
inline std::size_t gemm_rows(std::size_t tokens) {
  std::size_t step = 16;
  for (;;) {
    if (tokens <= step) return step;
    if (tokens <= step + step / 2) return step + step / 2;
    step *= 2;
  }
}

// The sequence bucket of a batch: the next power of two, at most max_batch.
inline std::size_t sequence_bucket(std::size_t sequences, std::size_t max_batch) {
  std::size_t bucket = 1;
  while (bucket < sequences) bucket *= 2;
  return std::min(bucket, max_batch);
}

// What every lane of a model shares: its shape, its options and its weights.
template <typename T>
struct LaneSetup {
  const BertConfig& config;
  const DeviceBertWeights<T>& weights;
  std::size_t max_batch;
  std::size_t max_batch_tokens;
  Gelu gelu;
  Pooling pooling;
  bool use_graphs;
};

template <typename T>
class BertLane {
 public:
  // Allocates, warms up (choosing every product's algorithm, or taking
  // those `tuned` chose: another lane of the same model) and captures the
  // graphs, on the current device. Throws ferry::Error.
  BertLane(const LaneSetup<T>& setup, const Products* tuned)
      : s_(setup),
        cublas_workspace_(kCublasWorkspaceBytes),
        products_(Element<T>::kCublasType, cublas_workspace_.get(), kCublasWorkspaceBytes, tuned),
        ids_h_(gemm_rows(s_.max_batch_tokens)),
        starts_h_(s_.max_batch + 1),
        pooled_h_(s_.max_batch * s_.config.hidden),
        ids_d_(gemm_rows(s_.max_batch_tokens)),
        starts_d_(s_.max_batch + 1),
        rows_(gemm_rows(s_.max_batch_tokens)),
        hidden_d_(rows_ * s_.config.hidden),
        qkv_d_(rows_ * 3 * s_.config.hidden),
        context_d_(rows_ * s_.config.hidden),
        sublayer_d_(rows_ * s_.config.hidden),
        intermediate_d_(rows_ * s_.config.intermediate),
        pooled_d_(s_.max_batch * s_.config.hidden),
        tokens_d_(s_.max_batch_tokens * s_.config.hidden),
        tokens_h_(s_.max_batch_tokens * s_.config.hidden) {
    warm_up();
    if (s_.use_graphs) capture_buckets();
  }

  BertLane(const BertLane&) = delete;
  BertLane& operator=(const BertLane&) = delete;

  ~BertLane() {
    // Buffers are freed after this body; make sure no copy or kernel still uses them.
    cudaStreamSynchronize(stream_.get());
  }

  const Products& products() const noexcept { return products_; }

  // cudaSuccess or cudaErrorNotReady while the lane can run; a sticky error
  // (a kernel fault) once the context is unusable.
  cudaError_t query() const noexcept { return cudaStreamQuery(stream_.get()); }

  // The calls below take a checked, non-empty batch on the model's device.
  void embed(const TokenBatch& batch, float* out) {
    stage(batch);
    run(batch.tokens(), batch.size(), batch.longest());
    // Kernel faults surface here (or in the launch above for a graph).
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    std::memcpy(out, pooled_h_.get(), batch.size() * s_.config.hidden * sizeof(float));
  }

  void embed_tokens(const TokenBatch& batch, float* out) {
    stage(batch);
    enqueue_batch(gemm_rows(batch.tokens()), batch.tokens(), batch.size(), batch.longest(), Output::Tokens);
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    std::memcpy(out, tokens_h_.get(), batch.tokens() * s_.config.hidden * sizeof(float));
  }

 private:
  // What a pass copies back: pooled_h_ or, for embed_tokens(), tokens_h_.
  enum class Output : std::uint8_t { Pooled, Tokens };
  using Bucket = std::pair<std::size_t, std::size_t>;  // rows, sequences

  void stage(const TokenBatch& batch) {
    std::memcpy(ids_h_.get(), batch.ids.data(), batch.tokens() * sizeof(std::int32_t));
    std::memcpy(starts_h_.get(), batch.starts.data(), (batch.size() + 1) * sizeof(std::uint32_t));
  }

  // Replays the batch's bucket graph, or runs it eagerly past the largest.
  void run(std::size_t tokens, std::size_t sequences, std::size_t longest) {
    const std::size_t rows = gemm_rows(tokens);
    if (s_.use_graphs && rows <= kMaxGraphRows) {
      const std::size_t bucket = sequence_bucket(sequences, s_.max_batch);
      const auto it = graphs_.find({rows, bucket});
      if (it != graphs_.end()) {
        // The bucket's missing sequences are empty ones at the end.
        std::fill(starts_h_.get() + sequences + 1, starts_h_.get() + bucket + 1,
                  static_cast<std::uint32_t>(tokens));
        FERRY_CUDA_CHECK(cudaGraphLaunch(it->second.get(), stream_.get()));
        return;
      }
    }
    enqueue_batch(rows, tokens, sequences, longest, Output::Pooled);
  }

  // One graph per bucket a batch can fall in: rows from gemm_rows(), sequences
  // from sequence_bucket(), leaving out buckets no batch reaches (more than
  // half the bucket's sequences cannot fit in its rows). Each is uploaded too,
  // so that its first launch has nothing left to set up.
  void capture_buckets() {
    const std::size_t max_rows = std::min(kMaxGraphRows, rows_);
    for (std::size_t rows = gemm_rows(1); rows <= max_rows; rows = gemm_rows(rows + 1)) {
      for (std::size_t bucket = 1;; bucket = std::min(2 * bucket, s_.max_batch)) {
        if (bucket / 2 + 1 > rows) break;
        GraphExec exec = capture(rows, bucket);
        FERRY_CUDA_CHECK(cudaGraphUpload(exec.get(), stream_.get()));
        graphs_.emplace(Bucket{rows, bucket}, std::move(exec));
        if (bucket == s_.max_batch) break;
      }
    }
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }

  // Records enqueue_batch() into a graph. Thread-local capture mode: CUDA
  // calls from other threads (another lane, the GPU workers) neither join
  // this capture nor invalidate it.
  GraphExec capture(std::size_t rows, std::size_t sequences) {
    return worker::cuda::capture_graph(
        stream_.get(), [&](cudaStream_t) { enqueue_batch(rows, rows, sequences, 0, Output::Pooled); });
  }

  // Chooses every product's algorithm at every row count gemm_rows() gives
  // (Products::tune), so that each one's kernel is loaded before any
  // persistent kernel starts. The buffers start as zeros; later, padding rows
  // keep what earlier batches left there, which stays finite, and no real row
  // reads a padding row.
  void warm_up() {
    cudaStream_t stream = stream_.get();
    const std::size_t h = s_.config.hidden;
    const std::size_t inter = s_.config.intermediate;
    FERRY_CUDA_CHECK(cudaMemsetAsync(hidden_d_.get(), 0, rows_ * h * sizeof(T), stream));
    FERRY_CUDA_CHECK(cudaMemsetAsync(context_d_.get(), 0, rows_ * h * sizeof(T), stream));
    FERRY_CUDA_CHECK(cudaMemsetAsync(intermediate_d_.get(), 0, rows_ * inter * sizeof(T), stream));
    const DeviceLayer<T>& l = s_.weights.layers.front();
    for (std::size_t rows = gemm_rows(1);; rows = gemm_rows(rows + 1)) {
      products_.tune(stream, hidden_d_.get(), l.qkv.weight.get(), nullptr, qkv_d_.get(), rows, h, 3 * h,
                     Epilogue::None);
      products_.tune(stream, context_d_.get(), l.attention_out.weight.get(), nullptr, sublayer_d_.get(), rows,
                     h, h, Epilogue::None);
      products_.tune(stream, hidden_d_.get(), l.intermediate.weight.get(), l.intermediate_bias.get(),
                     intermediate_d_.get(), rows, h, inter, intermediate_epilogue());
      products_.tune(stream, intermediate_d_.get(), l.output.weight.get(), nullptr, sublayer_d_.get(), rows,
                     inter, h, Epilogue::None);
      if (rows >= rows_) break;
    }
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  // The tanh GELU rides in the product's epilogue; the exact one is a kernel after it.
  Epilogue intermediate_epilogue() const {
    return s_.gelu == Gelu::Tanh ? Epilogue::GeluBias : Epilogue::None;
  }

  // intermediate_d_ = GELU(hidden_d_ * W + b) over `rows` rows: one product
  // with the tanh form in its epilogue, or the product and then the exact
  // form's kernel over the batch's tokens (tokens_d).
  void feed_forward_in(const DeviceLayer<T>& l, std::size_t rows, const std::uint32_t* tokens_d) {
    const std::size_t h = s_.config.hidden;
    const std::size_t inter = s_.config.intermediate;
    products_.run(stream_.get(), hidden_d_.get(), l.intermediate.weight.get(), l.intermediate_bias.get(),
                  intermediate_d_.get(), rows, h, inter, intermediate_epilogue());
    if (s_.gelu == Gelu::Exact)
      launch_bias_gelu<T>(intermediate_d_.get(), l.intermediate.bias.get(), rows, tokens_d, inter,
                          stream_.get());
  }

  // Everything from the staged input to the staged output, on stream_:
  // `rows` rows of products and `sequences` sequences, of which the kernels
  // take starts_d[sequences] tokens. `tokens` sizes embed_tokens()'s copy
  // back, which only eager runs make. `longest`, the longest sequence's tokens,
  // lets attention split long sequences over more blocks; a graph, which
  // serves any batch of its bucket, passes 0.
  void enqueue_batch(std::size_t rows, std::size_t tokens, std::size_t sequences, std::size_t longest,
                     Output output) {
    cudaStream_t stream = stream_.get();
    const BertConfig& c = s_.config;
    const DeviceBertWeights<T>& w = s_.weights;
    const std::size_t h = c.hidden;
    const std::size_t inter = c.intermediate;
    const float eps = c.layer_norm_eps;

    FERRY_CUDA_CHECK(cudaMemcpyAsync(ids_d_.get(), ids_h_.get(), rows * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream));
    FERRY_CUDA_CHECK(cudaMemcpyAsync(starts_d_.get(), starts_h_.get(),
                                     (sequences + 1) * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                                     stream));

    const EmbeddingTables tables{w.word_embeddings.get(),       w.position_embeddings.get(),
                                 w.token_type_embeddings.get(), w.embedding_norm.gamma.get(),
                                 w.embedding_norm.beta.get(),   eps};
    const std::uint32_t* tokens_d = starts_d_.get() + sequences;
    launch_embed_norm<T>(ids_d_.get(), starts_d_.get(), sequences, rows, tokens_d, h, tables, hidden_d_.get(),
                         stream);

    for (const DeviceLayer<T>& l : w.layers) {
      products_.run(stream, hidden_d_.get(), l.qkv.weight.get(), nullptr, qkv_d_.get(), rows, h, 3 * h,
                    Epilogue::None);
      launch_attention<T>(qkv_d_.get(), l.qkv.bias.get(), starts_d_.get(), sequences, longest, h, c.heads,
                          context_d_.get(), stream);
      products_.run(stream, context_d_.get(), l.attention_out.weight.get(), nullptr, sublayer_d_.get(), rows,
                    h, h, Epilogue::None);
      launch_bias_residual_norm<T>(sublayer_d_.get(), l.attention_out.bias.get(), hidden_d_.get(),
                                   l.attention_norm.gamma.get(), l.attention_norm.beta.get(), eps, rows,
                                   tokens_d, h, stream);
      feed_forward_in(l, rows, tokens_d);
      products_.run(stream, intermediate_d_.get(), l.output.weight.get(), nullptr, sublayer_d_.get(), rows,
                    inter, h, Epilogue::None);
      launch_bias_residual_norm<T>(sublayer_d_.get(), l.output.bias.get(), hidden_d_.get(),
                                   l.output_norm.gamma.get(), l.output_norm.beta.get(), eps, rows, tokens_d,
                                   h, stream);
    }

    if (output == Output::Tokens) {
      launch_to_f32<T>(hidden_d_.get(), tokens * h, tokens_d_.get(), stream);
      FERRY_CUDA_CHECK(cudaMemcpyAsync(tokens_h_.get(), tokens_d_.get(), tokens * h * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream));
      return;
    }
    launch_pool<T>(hidden_d_.get(), starts_d_.get(), sequences, h, s_.pooling, pooled_d_.get(), stream);
    FERRY_CUDA_CHECK(cudaMemcpyAsync(pooled_h_.get(), pooled_d_.get(), sequences * h * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
  }

  LaneSetup<T> s_;

  // Declaration order is construction order: the stream and handles exist
  // before anything enqueues, and are destroyed after the buffers' users end.
  Stream stream_ = Stream::non_blocking();
  DeviceBuffer<std::byte> cublas_workspace_;  // outlives the handles that use it
  Products products_;                         // every product, on stream_ only

  // Pinned staging (the _h side) and the device's copies (_d).
  PinnedBuffer<std::int32_t> ids_h_;
  PinnedBuffer<std::uint32_t> starts_h_;
  PinnedBuffer<float> pooled_h_;
  DeviceBuffer<std::int32_t> ids_d_;
  DeviceBuffer<std::uint32_t> starts_d_;

  std::size_t rows_;  // gemm_rows(max_batch_tokens): the most rows a product has
  // Activations, sized for rows_: the residual stream, the fused
  // projection, the attention context, a sublayer's output before its
  // LayerNorm, and the feed-forward block's inner activations.
  DeviceBuffer<T> hidden_d_;
  DeviceBuffer<T> qkv_d_;
  DeviceBuffer<T> context_d_;
  DeviceBuffer<T> sublayer_d_;
  DeviceBuffer<T> intermediate_d_;
  DeviceBuffer<float> pooled_d_;
  // embed_tokens()'s [max_batch_tokens][hidden] f32 states. Made with the
  // lane, not on first use: an allocation once persistent GPU workers run
  // is one more call that could wait on them.
  DeviceBuffer<float> tokens_d_;
  PinnedBuffer<float> tokens_h_;

  // Last, so destroyed first: graphs refer to the buffers above.
  std::map<Bucket, GraphExec> graphs_;
};

}  // namespace ferry::infer::cuda
