// The CUDA BERT model: validation, the weights on the device, and its lanes
// (bert_lane.cuh), each running one batch at a time on a stream of its own.
// embed() takes a free lane, so that up to BertOptions::lanes calls run at
// once: one lane's copies and synchronise overlap another's kernels.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "infer/model/batch_check.h"
#include "infer/model/cuda/bert_cuda.h"
#include "infer/model/cuda/bert_lane.cuh"
#include "infer/model/cuda/device_weights.cuh"
#include "infer/model/cuda/kernels.cuh"

namespace ferry::infer {
namespace {

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
  if (options.lanes == 0) throw Error("CUDA model: lanes must be at least 1");
  // cuBLAS takes dimensions as int, and the kernels index blocks by token.
  // The row kernels move 16 bytes (8 elements) and pairs at a time.
  if (c.intermediate % 8 != 0 || c.hidden % 2 != 0)
    throw Error("CUDA model: intermediate_size " + std::to_string(c.intermediate) + " (a multiple of 8) and hidden " +
                std::to_string(c.hidden) + " (even) are what the kernels take");
  if (cuda::gemm_rows(options.max_batch_tokens) * std::max(3 * c.hidden, c.intermediate) >
      static_cast<std::size_t>(INT32_MAX))
    throw Error("CUDA model: max_batch_tokens " + std::to_string(options.max_batch_tokens) +
                " is too large for one batch's activations");
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
        weights_(cuda::upload_bert_weights<T>(weights)) {
    info_.name = folder_name(options.model_dir);
    info_.hidden = config_.hidden;
    info_.max_positions = config_.max_positions;
    info_.vocab = config_.vocab;
    info_.precision = precision_name(options.precision);
    info_.device = std::move(device_name);
    info_.pooling = options.pooling.value_or(Pooling::Mean);
    const cuda::LaneSetup<T> setup{
        config_,       weights_,        max_batch_, max_batch_tokens_, options.gelu.value_or(Gelu::Tanh),
        info_.pooling, graphs_enabled()};
    // The first lane chooses the products' algorithms; the others take its choices.
    for (std::size_t i = 0; i < options.lanes; ++i) {
      lanes_.push_back(
          std::make_unique<cuda::BertLane<T>>(setup, i == 0 ? nullptr : &lanes_.front()->products()));
      free_.push_back(lanes_.back().get());
    }
  }

  ~BertCudaModel() override {
    // The lanes synchronise their streams as they go, before the weights do.
    cudaSetDevice(gpu_);
    lanes_.clear();
  }

  const ModelInfo& info() const noexcept override { return info_; }
  std::size_t concurrency() const noexcept override { return lanes_.size(); }

  // A sticky error (a kernel fault) leaves the context unusable: every later
  // call fails the same way, so the service stays unhealthy rather than
  // answering each batch with it.
  std::string fault() const override {
    const cudaError_t err = lanes_.front()->query();
    if (err == cudaSuccess || err == cudaErrorNotReady) return {};
    return std::string("the GPU model's CUDA context failed: ") + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")";
  }

  void embed(const TokenBatch& batch, float* out) override {
    if (!prepare(batch)) return;
    Lease lease(*this);
    lease.lane.embed(batch, out);
  }

  void embed_tokens(const TokenBatch& batch, float* out) override {
    if (!prepare(batch)) return;
    Lease lease(*this);
    lease.lane.embed_tokens(batch, out);
  }

 private:
  // A free lane, for one call; callers beyond the lanes wait for one.
  struct Lease {
    explicit Lease(BertCudaModel& m) : model(m), lane(m.acquire()) {}
    ~Lease() { model.release(lane); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    BertCudaModel& model;
    cuda::BertLane<T>& lane;
  };

  cuda::BertLane<T>& acquire() {
    std::unique_lock lock(free_mutex_);
    free_cv_.wait(lock, [&] { return !free_.empty(); });
    cuda::BertLane<T>* lane = free_.back();  // the lane used last: its buffers are the warmest
    free_.pop_back();
    return *lane;
  }

  void release(cuda::BertLane<T>& lane) {
    {
      std::lock_guard lock(free_mutex_);
      free_.push_back(&lane);
    }
    free_cv_.notify_one();
  }

  // Checks the batch; false for an empty one.
  bool prepare(const TokenBatch& batch) {
    check_batch(batch, info_, max_batch_, max_batch_tokens_);
    if (batch.size() == 0) return false;
    // embed() may be called from a thread other than the one that built the model.
    FERRY_CUDA_CHECK(cudaSetDevice(gpu_));
    // check_launch reads the thread's last error: drop one that another
    // library's call left on this thread, so that it is not blamed on our
    // kernels. A sticky error (a faulted context) is still reported by every call.
    (void)cudaGetLastError();
    return true;
  }

  BertConfig config_;
  int gpu_;
  std::size_t max_batch_;
  std::size_t max_batch_tokens_;
  ModelInfo info_;
  cuda::DeviceBertWeights<T> weights_;  // before the lanes, which read it

  std::vector<std::unique_ptr<cuda::BertLane<T>>> lanes_;
  std::mutex free_mutex_;
  std::condition_variable free_cv_;
  std::vector<cuda::BertLane<T>*> free_;  // under free_mutex_
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
