// The CUDA BERT model: validation, staging through pinned memory, the forward
// pass (cuBLAS products + Ferry's kernels) and its CUDA graphs.
//
// One embed() is: ids and starts into pinned staging -> one copy each to the
// device -> ~50 kernels -> one copy of the pooled [n][hidden] f32 rows back ->
// stream synchronise -> memcpy to the caller. All of it between the staging
// and the synchronise is enqueued by enqueue_batch().
//
// CUDA graphs, all made when the model is built. Instantiating a graph can
// wait for every kernel on the device to finish, and ferry http's persistent
// GPU workers never finish: a graph made while they run hangs the model for
// good (issue 36: cuGraphInstantiateWithFlags was where the batcher stood).
// So the model captures one graph per bucket of (rows, sequences) at start:
// rows are gemm_rows(tokens), sequences a power of two up to max_batch. A
// batch runs as its bucket: the missing sequences are empty (starts repeat
// the token count) and every kernel reads the real token count from
// starts_d[sequences] on the device, so the padding costs the products' rows
// and nothing else. Batches of more than kMaxGraphRows rows, and
// embed_tokens() (/embed_all), run eagerly: launching needs no instantiation,
// and at those sizes the launches hide behind the kernels.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "infer/model/batch_check.h"
#include "infer/model/cuda/bert_cuda.h"
#include "infer/model/cuda/cuda_handles.h"
#include "infer/model/cuda/device_memory.h"
#include "infer/model/cuda/device_weights.cuh"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/kernels.cuh"
#include "infer/model/cuda/products.h"

namespace ferry::infer {
namespace {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

// cuBLAS allocates its workspace on first use unless given one, and an
// allocation cannot happen inside graph capture; 32 MiB is what NVIDIA
// recommends for Hopper.
constexpr std::size_t kCublasWorkspaceBytes = 32u << 20;
// The largest bucket with a graph: its kernels take longer than launching them.
constexpr std::size_t kMaxGraphRows = 2048;

// The model's name as the server reports it: the folder's name, as the CPU
// model does (bert_model.cpp's model_name).
std::string folder_name(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const auto slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// Selects options.gpu and returns its name; throws when there is none.
std::string select_device(int gpu) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    throw Error(std::string("no CUDA device for the embedding model (cudaGetDeviceCount: ") +
                (err == cudaSuccess ? "0 devices" : cudaGetErrorString(err)) +
                "); run it on the CPU instead");
  if (gpu < 0 || gpu >= count)
    throw Error("no CUDA device " + std::to_string(gpu) + " for the embedding model: this machine has " +
                std::to_string(count));
  FERRY_CUDA_CHECK(cudaSetDevice(gpu));
  cudaDeviceProp prop{};
  FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
  return prop.name;
}

// The rows cuBLAS sees for a batch of `tokens`: rounded up to 16 * 2^k or
// 24 * 2^k. cuBLAS loads the kernel a shape needs when it first meets the
// shape, and loading a kernel waits for every kernel running on the device,
// which ferry http's persistent GPU workers never stop doing. With rows from
// this short list, every kernel is loaded at start (warm_up) and none later.
// The padding rows cost at most half as much again in the products; each
// output row depends on its input row alone, so the real rows are exact.
std::size_t gemm_rows(std::size_t tokens) {
  std::size_t step = 16;
  for (;;) {
    if (tokens <= step) return step;
    if (tokens <= step + step / 2) return step + step / 2;
    step *= 2;
  }
}

void check_config(const BertConfig& c, const BertOptions& options) {
  if (c.heads == 0 || c.hidden % c.heads != 0)
    throw Error("CUDA model: hidden " + std::to_string(c.hidden) + " is not a multiple of heads " +
                std::to_string(c.heads));
  if (c.hidden / c.heads > cuda::kMaxHeadDim)
    throw Error("CUDA model: head_dim " + std::to_string(c.hidden / c.heads) +
                " exceeds the attention kernel's " + std::to_string(cuda::kMaxHeadDim));
  if (c.hidden > cuda::kMaxNormWidth)
    throw Error("CUDA model: hidden " + std::to_string(c.hidden) + " exceeds the LayerNorm kernels' " +
                std::to_string(cuda::kMaxNormWidth));
  if (c.type_vocab == 0) throw Error("CUDA model: the model has no token type embeddings");
  if (options.max_batch == 0 || options.max_batch_tokens == 0)
    throw Error("CUDA model: max_batch and max_batch_tokens must be at least 1");
  // cuBLAS takes dimensions as int, and the kernels index blocks by token.
  // The row kernels move 16 bytes (8 elements) and pairs at a time.
  if (c.intermediate % 8 != 0 || c.hidden % 2 != 0)
    throw Error("CUDA model: intermediate_size " + std::to_string(c.intermediate) + " (a multiple of 8) and hidden " +
                std::to_string(c.hidden) + " (even) are what the kernels take");
  if (gemm_rows(options.max_batch_tokens) * std::max(3 * c.hidden, c.intermediate) >
      static_cast<std::size_t>(INT32_MAX))
    throw Error("CUDA model: max_batch_tokens " + std::to_string(options.max_batch_tokens) +
                " is too large for one batch's activations");
}

// The sequence bucket of a batch: the next power of two, at most max_batch.
std::size_t sequence_bucket(std::size_t sequences, std::size_t max_batch) {
  std::size_t bucket = 1;
  while (bucket < sequences) bucket *= 2;
  return std::min(bucket, max_batch);
}

bool graphs_enabled() {
  // FERRY_CUDA_GRAPHS=0 runs every batch eagerly: for profilers that follow
  // kernels one by one, and to tell a graph problem from a kernel problem.
  const char* env = std::getenv("FERRY_CUDA_GRAPHS");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

template <typename T>
class BertCudaModel final : public EmbeddingModel {
 public:
  BertCudaModel(const BertWeights& weights, const BertOptions& options, std::string device_name)
      : config_(weights.config),
        gpu_(options.gpu),
        max_batch_(options.max_batch),
        max_batch_tokens_(options.max_batch_tokens),
        use_graphs_(graphs_enabled()),
        gelu_(options.gelu.value_or(Gelu::Tanh)),
        cublas_workspace_(kCublasWorkspaceBytes),
        products_(cuda::Element<T>::kCublasType, cublas_workspace_.get(), kCublasWorkspaceBytes),
        weights_(cuda::upload_bert_weights<T>(weights)),
        ids_h_(gemm_rows(max_batch_tokens_)),
        starts_h_(max_batch_ + 1),
        pooled_h_(max_batch_ * config_.hidden),
        ids_d_(gemm_rows(max_batch_tokens_)),
        starts_d_(max_batch_ + 1),
        rows_(gemm_rows(max_batch_tokens_)),
        hidden_d_(rows_ * config_.hidden),
        qkv_d_(rows_ * 3 * config_.hidden),
        context_d_(rows_ * config_.hidden),
        sublayer_d_(rows_ * config_.hidden),
        intermediate_d_(rows_ * config_.intermediate),
        pooled_d_(max_batch_ * config_.hidden),
        tokens_d_(max_batch_tokens_ * config_.hidden),
        tokens_h_(max_batch_tokens_ * config_.hidden) {
    info_.name = folder_name(options.model_dir);
    info_.hidden = config_.hidden;
    info_.max_positions = config_.max_positions;
    info_.vocab = config_.vocab;
    info_.precision = precision_name(options.precision);
    info_.device = std::move(device_name);
    info_.pooling = options.pooling.value_or(Pooling::Mean);
    warm_up();
    if (use_graphs_) capture_buckets();
  }

  ~BertCudaModel() override {
    // Buffers are freed after this body; make sure no copy or kernel still uses them.
    cudaSetDevice(gpu_);
    cudaStreamSynchronize(stream_.get());
  }

  const ModelInfo& info() const noexcept override { return info_; }

  // A sticky error (a kernel fault) leaves the context unusable: every later
  // call fails the same way, so the service stays unhealthy rather than
  // answering each batch with it.
  std::string fault() const override {
    const cudaError_t err = cudaStreamQuery(stream_.get());
    if (err == cudaSuccess || err == cudaErrorNotReady) return {};
    return std::string("the GPU model's CUDA context failed: ") + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")";
  }

  void embed(const TokenBatch& batch, float* out) override {
    if (!stage(batch)) return;
    run(batch.tokens(), batch.size(), batch.longest());
    // Kernel faults surface here (or in the launch above for a graph).
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    std::memcpy(out, pooled_h_.get(), batch.size() * config_.hidden * sizeof(float));
  }

  void embed_tokens(const TokenBatch& batch, float* out) override {
    if (!stage(batch)) return;
    enqueue_batch(gemm_rows(batch.tokens()), batch.tokens(), batch.size(), batch.longest(), Output::Tokens);
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    std::memcpy(out, tokens_h_.get(), batch.tokens() * config_.hidden * sizeof(float));
  }

 private:
  // What a pass copies back: pooled_h_ or, for embed_tokens(), tokens_h_.
  enum class Output : std::uint8_t { Pooled, Tokens };
  using Bucket = std::pair<std::size_t, std::size_t>;  // rows, sequences

  // Checks the batch and puts it in the pinned staging; false for an empty one.
  bool stage(const TokenBatch& batch) {
    check_batch(batch, info_, max_batch_, max_batch_tokens_);
    const std::size_t tokens = batch.tokens();
    const std::size_t sequences = batch.size();
    if (sequences == 0) return false;
    // embed() may be called from a thread other than the one that built the model.
    FERRY_CUDA_CHECK(cudaSetDevice(gpu_));
    // check_launch reads the thread's last error: drop one that another
    // library's call left on this thread, so that it is not blamed on our
    // kernels. A sticky error (a faulted context) is still reported by every call.
    (void)cudaGetLastError();
    std::memcpy(ids_h_.get(), batch.ids.data(), tokens * sizeof(std::int32_t));
    std::memcpy(starts_h_.get(), batch.starts.data(), (sequences + 1) * sizeof(std::uint32_t));
    return true;
  }

  // Replays the batch's bucket graph, or runs it eagerly past the largest.
  void run(std::size_t tokens, std::size_t sequences, std::size_t longest) {
    const std::size_t rows = gemm_rows(tokens);
    if (use_graphs_ && rows <= kMaxGraphRows) {
      const std::size_t bucket = sequence_bucket(sequences, max_batch_);
      const auto it = graphs_.find({rows, bucket});
      if (it != graphs_.end()) {
        // The bucket's missing sequences are empty ones at the end.
        std::fill(starts_h_.get() + sequences + 1, starts_h_.get() + bucket + 1, static_cast<std::uint32_t>(tokens));
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
      for (std::size_t bucket = 1;; bucket = std::min(2 * bucket, max_batch_)) {
        if (bucket / 2 + 1 > rows) break;
        cuda::GraphExec exec = capture(rows, bucket);
        FERRY_CUDA_CHECK(cudaGraphUpload(exec.get(), stream_.get()));
        graphs_.emplace(Bucket{rows, bucket}, std::move(exec));
        if (bucket == max_batch_) break;
      }
    }
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }

  // Records enqueue_batch() into a graph. Thread-local capture mode: CUDA
  // calls from other threads (another model, the GPU workers) neither join
  // this capture nor invalidate it.
  cuda::GraphExec capture(std::size_t rows, std::size_t sequences) {
    FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_batch(rows, rows, sequences, 0, Output::Pooled);
    } catch (...) {
      // End the capture so that the stream is usable again; the partial graph is dropped.
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_.get(), &partial);
      if (partial) cudaGraphDestroy(partial);
      throw;
    }
    cudaGraph_t graph = nullptr;
    FERRY_CUDA_CHECK(cudaStreamEndCapture(stream_.get(), &graph));
    try {
      cuda::GraphExec exec(graph);
      cudaGraphDestroy(graph);
      return exec;
    } catch (...) {
      cudaGraphDestroy(graph);
      throw;
    }
  }

  // Chooses every product's algorithm at every row count gemm_rows() gives,
  // by timing cuBLASLt's candidates (Products::tune), so that each one's
  // kernel is loaded before any persistent kernel starts. The buffers start as
  // zeros; later, padding rows keep what earlier batches left there, which
  // stays finite, and no real row reads a padding row.
  void warm_up() {
    cudaStream_t stream = stream_.get();
    const std::size_t h = config_.hidden;
    const std::size_t inter = config_.intermediate;
    FERRY_CUDA_CHECK(cudaMemsetAsync(hidden_d_.get(), 0, rows_ * h * sizeof(T), stream));
    FERRY_CUDA_CHECK(cudaMemsetAsync(context_d_.get(), 0, rows_ * h * sizeof(T), stream));
    FERRY_CUDA_CHECK(cudaMemsetAsync(intermediate_d_.get(), 0, rows_ * inter * sizeof(T), stream));
    const cuda::DeviceLayer<T>& l = weights_.layers.front();
    for (std::size_t rows = gemm_rows(1);; rows = gemm_rows(rows + 1)) {
      products_.tune(stream, hidden_d_.get(), l.qkv.weight.get(), nullptr, qkv_d_.get(), rows, h, 3 * h,
                     cuda::Epilogue::None);
      products_.tune(stream, context_d_.get(), l.attention_out.weight.get(), nullptr, sublayer_d_.get(), rows,
                     h, h, cuda::Epilogue::None);
      products_.tune(stream, hidden_d_.get(), l.intermediate.weight.get(), l.intermediate_bias.get(),
                     intermediate_d_.get(), rows, h, inter, intermediate_epilogue());
      products_.tune(stream, intermediate_d_.get(), l.output.weight.get(), nullptr, sublayer_d_.get(), rows,
                     inter, h, cuda::Epilogue::None);
      if (rows >= rows_) break;
    }
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  // The tanh GELU rides in the product's epilogue; the exact one is a kernel after it.
  cuda::Epilogue intermediate_epilogue() const {
    return gelu_ == Gelu::Tanh ? cuda::Epilogue::GeluBias : cuda::Epilogue::None;
  }

  // intermediate_d_ = GELU(hidden_d_ * W + b) over `rows` rows: one product
  // with the tanh form in its epilogue, or the product and then the exact
  // form's kernel over the batch's tokens (tokens_d).
  void feed_forward_in(const cuda::DeviceLayer<T>& l, std::size_t rows, const std::uint32_t* tokens_d) {
    const std::size_t h = config_.hidden;
    const std::size_t inter = config_.intermediate;
    products_.run(stream_.get(), hidden_d_.get(), l.intermediate.weight.get(), l.intermediate_bias.get(),
                  intermediate_d_.get(), rows, h, inter, intermediate_epilogue());
    if (gelu_ == Gelu::Exact)
      cuda::launch_bias_gelu<T>(intermediate_d_.get(), l.intermediate.bias.get(), rows, tokens_d, inter,
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
    const std::size_t h = config_.hidden;
    const std::size_t inter = config_.intermediate;
    const float eps = config_.layer_norm_eps;

    FERRY_CUDA_CHECK(cudaMemcpyAsync(ids_d_.get(), ids_h_.get(), rows * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream));
    FERRY_CUDA_CHECK(cudaMemcpyAsync(starts_d_.get(), starts_h_.get(),
                                     (sequences + 1) * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                                     stream));

    const cuda::EmbeddingTables tables{
        weights_.word_embeddings.get(),       weights_.position_embeddings.get(),
        weights_.token_type_embeddings.get(), weights_.embedding_norm.gamma.get(),
        weights_.embedding_norm.beta.get(),   eps};
    const std::uint32_t* tokens_d = starts_d_.get() + sequences;
    cuda::launch_embed_norm<T>(ids_d_.get(), starts_d_.get(), sequences, rows, tokens_d, h, tables, hidden_d_.get(),
                               stream);

    for (const cuda::DeviceLayer<T>& l : weights_.layers) {
      products_.run(stream, hidden_d_.get(), l.qkv.weight.get(), nullptr, qkv_d_.get(), rows, h, 3 * h,
                    cuda::Epilogue::None);
      cuda::launch_attention<T>(qkv_d_.get(), l.qkv.bias.get(), starts_d_.get(), sequences, longest, h,
                                config_.heads, context_d_.get(), stream);
      products_.run(stream, context_d_.get(), l.attention_out.weight.get(), nullptr, sublayer_d_.get(), rows,
                    h, h, cuda::Epilogue::None);
      cuda::launch_bias_residual_norm<T>(sublayer_d_.get(), l.attention_out.bias.get(), hidden_d_.get(),
                                         l.attention_norm.gamma.get(), l.attention_norm.beta.get(), eps,
                                         rows, tokens_d, h, stream);
      feed_forward_in(l, rows, tokens_d);
      products_.run(stream, intermediate_d_.get(), l.output.weight.get(), nullptr, sublayer_d_.get(), rows,
                    inter, h, cuda::Epilogue::None);
      cuda::launch_bias_residual_norm<T>(sublayer_d_.get(), l.output.bias.get(), hidden_d_.get(),
                                         l.output_norm.gamma.get(), l.output_norm.beta.get(), eps, rows,
                                         tokens_d, h, stream);
    }

    if (output == Output::Tokens) {
      cuda::launch_to_f32<T>(hidden_d_.get(), tokens * h, tokens_d_.get(), stream);
      FERRY_CUDA_CHECK(cudaMemcpyAsync(tokens_h_.get(), tokens_d_.get(), tokens * h * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream));
      return;
    }
    cuda::launch_pool<T>(hidden_d_.get(), starts_d_.get(), sequences, h, info_.pooling, pooled_d_.get(), stream);
    FERRY_CUDA_CHECK(cudaMemcpyAsync(pooled_h_.get(), pooled_d_.get(), sequences * h * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
  }

  BertConfig config_;
  int gpu_;
  std::size_t max_batch_;
  std::size_t max_batch_tokens_;
  bool use_graphs_;
  Gelu gelu_;
  ModelInfo info_;

  // Declaration order is construction order: the stream and handle exist
  // before anything enqueues, and are destroyed after the buffers' users end.
  cuda::Stream stream_;
  DeviceBuffer<std::byte> cublas_workspace_;  // outlives the handle that uses it
  cuda::Products products_;                   // every product, on stream_ only
  cuda::DeviceBertWeights<T> weights_;

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
  // model, not on first use: an allocation once persistent GPU workers run
  // is one more call that could wait on them.
  DeviceBuffer<float> tokens_d_;
  PinnedBuffer<float> tokens_h_;

  // Last, so destroyed first: graphs refer to the buffers above.
  std::map<Bucket, cuda::GraphExec> graphs_;
};

}  // namespace

std::unique_ptr<EmbeddingModel> make_bert_cuda_model(BertWeights weights, const BertOptions& options) {
  // Before the first CUDA call: the model shares its process with persistent
  // kernels (ferry http's GPU workers), and a kernel loaded lazily, at its
  // first launch, waits for every running kernel to finish, which a persistent
  // one never does. Loaded eagerly, nothing waits. (An explicit setting wins.)
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  std::string device_name = select_device(options.gpu);
  check_config(weights.config, options);
  switch (options.precision) {
    case Precision::F32:
      return std::make_unique<BertCudaModel<float>>(weights, options, std::move(device_name));
    case Precision::F16:
      return std::make_unique<BertCudaModel<__half>>(weights, options, std::move(device_name));
    case Precision::BF16:
      return std::make_unique<BertCudaModel<__nv_bfloat16>>(weights, options, std::move(device_name));
  }
  throw Error("CUDA model: unknown precision");
}

}  // namespace ferry::infer
