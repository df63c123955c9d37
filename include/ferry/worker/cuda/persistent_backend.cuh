#pragma once
// The persistent launch method: one long-running kernel, one block per channel,
// polls the request rings itself. After launch no host thread sits between the
// server and the GPU. Made for a handler type by handler_backend.cuh.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "ferry/core/arena_control.h"
#include "ferry/worker/backend.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/cuda/persistent.cuh"
#include "ferry/worker/cuda/stream_drain.h"
#include "ferry/worker/handlers.h"

namespace ferry::worker::cuda {

template <typename Handler>
class PersistentBackend final : public Backend {
 public:
  PersistentBackend(const WorkerOptions& options, Handler handler)
      : options_(options), handler_(handler), gpu_(options.gpu) {}
  ~PersistentBackend() override {
    try {
      stop();
    } catch (...) {
    }
    // stream_ is destroyed even when stuck: CUDA frees a stream once its work is done.
  }

  void prepare(Arena& arena) override {
    gpu_.register_arena(arena);
    // The idle kernel reads a lone short request with its poll (persistent.cuh).
    for (std::uint32_t c = 0; c < arena.num_channels(); ++c) arena.channel(c).requests.ask_for_check_words();
    stream_ = Stream::non_blocking();
    // Warm-up: one launch that finds the stop flag set and returns, so module
    // loading and first-launch costs are paid before any request waits.
    auto* header = arena.header();
    arena_control::request_stop(*header);
    launch();
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    arena_control::clear_stop(*header);
  }

  void start() override {
    launch();
    running_ = true;
  }

  void stop() override {
    if (!running_) return;
    running_ = false;
    arena_control::request_stop(*gpu_.arena()->header());  // S1; the kernel's polls are S2's device mirror
    const cudaStream_t stream = stream_.get();
    const StreamDrain d =
        drain_streams({&stream, 1}, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (d.timed_out) {
      set_failure("persistent kernel did not stop within 5 s of the stop flag");
      stuck_ = true;
    } else if (!d.error.empty()) {
      set_failure("persistent kernel failed: " + d.error);
    }
  }

  bool stuck() const override { return stuck_; }

  std::string failure() const override {
    if (!failure_.empty()) return failure_;
    if (std::string why = worker_error_text(arena_control::first_error(*gpu_.arena()->header()));
        !why.empty())
      return why;
    if (running_) {
      const cudaError_t st = cudaStreamQuery(stream_.get());
      if (st == cudaSuccess) return "the persistent kernel exited while it should be running";
      if (st != cudaErrorNotReady) return std::string("persistent kernel failed: ") + cudaGetErrorString(st);
    }
    return {};
  }

  std::uint64_t handled() const override { return arena_control::total_handled(*gpu_.arena()); }

  std::string describe() const override {
    return "cuda persistent kernel on " + gpu_.describe() + ", " + std::to_string(gpu_.arena()->num_channels()) +
           " block(s) of " + std::to_string(kPersistentThreads) + " threads, handler " + handler_name<Handler>();
  }

 private:
  void launch() {
    const unsigned blocks = gpu_.arena()->num_channels();
    persistent_kernel<<<blocks, kPersistentThreads, 0, stream_.get()>>>(
        gpu_.channels_d(), gpu_.stop_d(), gpu_.error_d(), options_.idle_sleep_max_us * 1000u, handler_);
    FERRY_CUDA_CHECK(cudaGetLastError());
  }

  void set_failure(const std::string& why) {
    if (failure_.empty()) failure_ = why;
  }

  WorkerOptions options_;
  Handler handler_;
  GpuContext gpu_;
  Stream stream_;
  bool running_ = false;
  std::string failure_;  // set by stop() on the orchestrator's thread only
  bool stuck_ = false;   // likewise
};

}  // namespace ferry::worker::cuda
