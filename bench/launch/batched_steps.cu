// The graph and memops methods' lone request, step by step (gpu_probes.h,
// BatchedSteps): from each minimal mechanism towards what the method does for
// one request, one step at a time, so that a step's cost is its round trip
// less the one before. The kernel of the full variants is shaped as the
// method's (batch_kernel.cuh): 128 threads read the posted batch from mapped
// host memory, one warp answers the request into a response slot there and
// publishes it with a release of its seq, which the host polls.

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/launch/gpu_probes.h"
#include "core/latency_histogram.h"
#include "ferry/worker/cuda/batch_kernel.cuh"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "ferry/worker/cuda/driver_api.h"
#include "ferry/worker/cuda/gpu_context.h"

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;
using worker::cuda::kBatchThreads;
using worker::cuda::kInlinePayload;
using worker::cuda::LaunchedBatch;
using worker::cuda::PostedBatch;

constexpr std::uint32_t kSlots = 64;  // as BatchedBackend's batches in flight
constexpr std::uint32_t kWarmRounds = 200;

struct alignas(128) Response {
  SlotDesc desc;
  alignas(16) std::uint8_t payload[kInlinePayload];
};

// Mapped host memory: the posted batches, memops' go and done words per slot
// (on lines of their own, as the backend's are packed), and the response.
struct Shared {
  PostedBatch batches[kSlots];
  alignas(128) std::uint32_t go[kSlots];
  alignas(128) std::uint32_t done[kSlots];
  Response response;
};

__global__ void empty_step_kernel() {}

// The warp's answer: the request's bytes reversed, then len and cookie, then
// the seq by a release (as handle_batch publishes).
__device__ void answer(const std::uint8_t* in, std::uint32_t len, std::uint64_t cookie, std::uint32_t seq,
                       Response* r) {
  const unsigned lane = threadIdx.x;
  if (lane < len) r->payload[len - 1 - lane] = in[lane];
  if (lane + 32 < len) r->payload[len - 1 - (lane + 32)] = in[lane + 32];
  __syncwarp();
  if (lane == 0) {
    r->desc.len = len;
    r->desc.cookie = cookie;
    worker::cuda::store_release_sys(&r->desc.seq, seq);
  }
}

// Reads the batch as batch_kernel_by_ref does (load_posted); answers when kPublish.
template <bool kPublish>
__global__ void read_batch_kernel(const PostedBatch* p, Response* r) {
  __shared__ worker::cuda::PostedView views[worker::cuda::kMessagesPerBlock];
  const unsigned warp = threadIdx.x / 32;
  worker::cuda::PostedView& v = views[warp];
  worker::cuda::load_posted(p, warp, &v);
  if (warp != 0) return;
  if constexpr (kPublish) {
    answer(v.message.payload, v.message.len, v.message.cookie, v.d.first, r);
  } else if (threadIdx.x == 0 && v.d.first == 0xffffffffu) {
    r->desc.cookie = v.message.cookie + v.message.len + v.message.payload[0];  // never: keeps the loads
  }
}

// The batch in the launch's parameters, as kernel per burst sends a short one.
__global__ void launched_batch_kernel(const __grid_constant__ LaunchedBatch b, Response* r) {
  if (threadIdx.x / 32 != 0) return;
  const worker::cuda::InlineMessage& m = b.messages[0];
  answer(m.payload, m.len, m.cookie, b.d.first, r);
}

// The request of round i: 64 bytes that change every round.
void fill_request(std::uint32_t i, worker::cuda::InlineMessage* m) {
  m->len = kInlinePayload;
  m->cookie = i;
  for (std::uint32_t b = 0; b < kInlinePayload; ++b)
    m->payload[b] = static_cast<std::uint8_t>(i * 131 + b * 7);
}

bool answered(const Response& r, std::uint32_t i) {
  if (r.desc.len != kInlinePayload || r.desc.cookie != i) return false;
  for (std::uint32_t b = 0; b < kInlinePayload; ++b)
    if (r.payload[kInlinePayload - 1 - b] != static_cast<std::uint8_t>(i * 131 + b * 7)) return false;
  return true;
}

std::uint32_t load(std::uint32_t& w) {
  return std::atomic_ref<std::uint32_t>(w).load(std::memory_order_acquire);
}
void store(std::uint32_t& w, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(w).store(v, std::memory_order_release);
}

void wait_for(std::uint32_t& w, std::uint32_t v, const char* what) {
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (load(w) != v)
    if (Clock::now() > give_up) throw Error(std::string("batched steps probe: no answer (") + what + ")");
}

std::uint64_t since(Clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

class Probe {
 public:
  Probe(const std::string& gpu, std::uint64_t round_trips)
      : ctx_(gpu), rounds_(static_cast<std::uint32_t>(std::min<std::uint64_t>(round_trips, 20000))) {
    FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&h_), sizeof(Shared), cudaHostAllocMapped));
    std::memset(static_cast<void*>(h_), 0, sizeof(Shared));
    FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_), h_, 0));
  }
  ~Probe() { cudaFreeHost(h_); }

  // Runs trip(i) for the warm-up and timed rounds: p50 in microseconds.
  template <typename Trip>
  double p50_us(Trip&& trip) {
    LatencyHistogram hist;
    for (std::uint32_t i = 1; i <= kWarmRounds + rounds_; ++i) {
      const std::uint64_t ns = trip(i);
      if (i > kWarmRounds) hist.record(ns);
    }
    return hist.percentile_ns(50) / 1e3;
  }

  void post_batch(std::uint32_t i) {
    PostedBatch& p = h_->batches[i % kSlots];
    p.d = {0, i, 1, 0};
    fill_request(i, &p.messages[0]);
  }

  // Polls the response's seq and checks the answer.
  void collect(std::uint32_t i) {
    wait_for(h_->response.desc.seq, i, "response seq");
    if (!answered(h_->response, i)) ++wrong_;
  }

  BatchedSteps run() {
    BatchedSteps r;
    memops_ = &worker::cuda::StreamMemops::get();
    run_graph(r);
    run_memops(r);
    r.wrong_responses = wrong_;
    return r;
  }

 private:
  void run_graph(BatchedSteps& r) {
    const worker::cuda::Stream owned = worker::cuda::Stream::non_blocking();
    const cudaStream_t stream = owned.get();
    const worker::cuda::Event event = worker::cuda::Event::without_timing();
    const worker::cuda::GraphExec empty =
        worker::cuda::capture_graph(stream, [](cudaStream_t s) { empty_step_kernel<<<1, 1, 0, s>>>(); });
    r.graph_us[0] = p50_us([&](std::uint32_t) {
      const auto t0 = Clock::now();
      FERRY_CUDA_CHECK(cudaGraphLaunch(empty.get(), stream));
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
      return since(t0);
    });

    // One graph per slot, each reading its slot's batch, as the backend captures them.
    std::vector<worker::cuda::GraphExec> reading, publishing;
    for (std::uint32_t s = 0; s < kSlots; ++s) {
      reading.push_back(worker::cuda::capture_graph(stream, [&](cudaStream_t st) {
        read_batch_kernel<false><<<1, kBatchThreads, 0, st>>>(d_->batches + s, nullptr);
      }));
      publishing.push_back(worker::cuda::capture_graph(stream, [&](cudaStream_t st) {
        read_batch_kernel<true><<<1, kBatchThreads, 0, st>>>(d_->batches + s, &d_->response);
      }));
    }
    r.graph_us[1] = p50_us([&](std::uint32_t i) {
      const auto t0 = Clock::now();
      post_batch(i);
      FERRY_CUDA_CHECK(cudaGraphLaunch(reading[i % kSlots].get(), stream));
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
      return since(t0);
    });
    h_->response.desc.seq = 0;
    r.graph_us[2] = p50_us([&](std::uint32_t i) {
      const auto t0 = Clock::now();
      post_batch(i);
      FERRY_CUDA_CHECK(cudaGraphLaunch(publishing[i % kSlots].get(), stream));
      FERRY_CUDA_CHECK(cudaEventRecord(event.get(), stream));
      collect(i);
      return since(t0);
    });
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto launch = [&](std::uint32_t i) {
      post_batch(i);
      FERRY_CUDA_CHECK(cudaGraphLaunch(publishing[i % kSlots].get(), stream));
    };
    r.graph_us[4] = with_completion_poller(stream, launch, Completion::Event);
    r.graph_us[5] = with_completion_poller(stream, launch, Completion::StreamWrite);

    // One graph whose kernel node takes the batch by value, set before each launch.
    cudaGraph_t graph = nullptr;
    FERRY_CUDA_CHECK(cudaGraphCreate(&graph, 0));
    LaunchedBatch batch{};
    Response* response_d = &d_->response;
    void* args[] = {&batch, &response_d};
    cudaKernelNodeParams node_params{};
    node_params.func = reinterpret_cast<void*>(launched_batch_kernel);
    node_params.gridDim = dim3(1);
    node_params.blockDim = dim3(kBatchThreads);
    node_params.kernelParams = args;
    cudaGraphNode_t node = nullptr;
    FERRY_CUDA_CHECK(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &node_params));
    {
      const worker::cuda::GraphExec by_value(graph);
      h_->response.desc.seq = 0;
      r.graph_us[3] = p50_us([&](std::uint32_t i) {
        const auto t0 = Clock::now();
        batch.d = {0, i, 1, 0};
        fill_request(i, &batch.messages[0]);
        FERRY_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(by_value.get(), node, &node_params));
        FERRY_CUDA_CHECK(cudaGraphLaunch(by_value.get(), stream));
        FERRY_CUDA_CHECK(cudaEventRecord(event.get(), stream));
        collect(i);
        return since(t0);
      });
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    cudaGraphDestroy(graph);
  }

  // How a second thread learns that a launch is done, as the backend's completer.
  enum class Completion {
    Event,        // an event recorded after the launch, polled with cudaEventQuery
    StreamWrite,  // a stream write of a word in mapped memory after the launch, polled there
  };

  // Rounds that launch(i) posts and the host answers by polling the response,
  // while a second thread waits for each launch to complete by `how`.
  template <typename Launch>
  double with_completion_poller(cudaStream_t stream, Launch&& launch, Completion how) {
    std::vector<worker::cuda::Event> events;
    for (std::uint32_t s = 0; s < kSlots; ++s) events.push_back(worker::cuda::Event::without_timing());
    const std::uint32_t last = kWarmRounds + rounds_;
    std::atomic<std::uint32_t> posted{0};
    std::atomic<bool> failed{false};
    std::memset(h_->done, 0, sizeof h_->done);
    std::thread poller([&] {
      cudaSetDevice(ctx_.device());
      // The poller may start rounds behind (its first CUDA call takes a while),
      // so it takes a later round's word as this one's; it never waits beyond give_up.
      const auto give_up = Clock::now() + std::chrono::seconds(30);
      const auto until = [&](auto&& done) {
        while (!done())
          if (Clock::now() > give_up) return false;
        return true;
      };
      for (std::uint32_t i = 1; i <= last; ++i) {
        bool ok = until([&] { return posted.load(std::memory_order_acquire) >= i; });
        if (ok && how == Completion::StreamWrite)
          ok = until([&] { return static_cast<std::int32_t>(load(h_->done[i % kSlots]) - i) >= 0; });
        cudaError_t st = cudaSuccess;
        if (ok && how == Completion::Event)
          ok = until([&] { return (st = cudaEventQuery(events[i % kSlots].get())) != cudaErrorNotReady; });
        if (!ok || st != cudaSuccess) {
          failed = true;
          return;
        }
      }
    });
    h_->response.desc.seq = 0;
    const double us = p50_us([&](std::uint32_t i) {
      const auto t0 = Clock::now();
      launch(i);
      // The slot's completion from kSlots rounds ago has been seen: rounds are answered in turn.
      if (how == Completion::Event)
        FERRY_CUDA_CHECK(cudaEventRecord(events[i % kSlots].get(), stream));
      else
        memops_->write(stream, reinterpret_cast<CUdeviceptr>(d_->done + i % kSlots), i,
                       CU_STREAM_WRITE_VALUE_DEFAULT);
      posted.store(i, std::memory_order_release);
      collect(i);
      return since(t0);
    });
    poller.join();
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (failed) throw Error("batched steps probe: an event failed");
    return us;
  }

  // Round i uses slot i mod kSlots for the (i / kSlots + 1)th time, as the backend counts uses.
  static std::uint32_t use(std::uint32_t i) { return i / kSlots + 1; }

  template <typename Kernel>
  void arm(cudaStream_t stream, std::uint32_t i, Kernel&& kernel) {
    const std::uint32_t s = i % kSlots;
    memops_->wait(stream, reinterpret_cast<CUdeviceptr>(d_->go + s), use(i), CU_STREAM_WAIT_VALUE_EQ);
    kernel(stream, s);
    memops_->write(stream, reinterpret_cast<CUdeviceptr>(d_->done + s), use(i),
                   CU_STREAM_WRITE_VALUE_DEFAULT);
  }

  void release_all(std::uint32_t next) {
    // Rounds still posted (next .. next + kSlots - 1) get their go, with empty batches.
    for (std::uint32_t i = next; i < next + kSlots; ++i) {
      h_->batches[i % kSlots].d = {0, 0, 0, 0};
      h_->batches[i % kSlots].messages[0].len = 0;
      store(h_->go[i % kSlots], use(i));
    }
  }

  void run_memops(BatchedSteps& r) {
    const worker::cuda::Stream owned = worker::cuda::Stream::non_blocking();
    const cudaStream_t stream = owned.get();
    const auto empty = [](cudaStream_t st, std::uint32_t) { empty_step_kernel<<<1, 1, 0, st>>>(); };
    const auto reading = [&](cudaStream_t st, std::uint32_t s) {
      read_batch_kernel<false><<<1, kBatchThreads, 0, st>>>(d_->batches + s, nullptr);
    };
    const auto publishing = [&](cudaStream_t st, std::uint32_t s) {
      read_batch_kernel<true><<<1, kBatchThreads, 0, st>>>(d_->batches + s, &d_->response);
    };
    const std::uint32_t last = kWarmRounds + rounds_;

    // 0: one round posted at a time, after the one before is answered.
    reset_words();
    arm(stream, 1, empty);
    r.memops_us[0] = p50_us([&](std::uint32_t i) {
      const auto t0 = Clock::now();
      store(h_->go[i % kSlots], use(i));
      wait_for(h_->done[i % kSlots], use(i), "memops done");
      const std::uint64_t ns = since(t0);
      arm(stream, i + 1, empty);
      return ns;
    });
    store(h_->go[(last + 1) % kSlots], use(last + 1));
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));

    // 1-3: kSlots rounds posted ahead, each re-armed kSlots later by the timing
    // thread once its done word comes. The round trip ends at the done word, or
    // (3) at the response, before the done word.
    const auto ahead = [&](auto kernel, bool ends_at_response) {
      reset_words();
      for (std::uint32_t i = 1; i <= kSlots; ++i) arm(stream, i, kernel);
      const double us = p50_us([&](std::uint32_t i) {
        const auto t0 = Clock::now();
        post_batch(i);
        store(h_->go[i % kSlots], use(i));
        if (ends_at_response) collect(i);
        const std::uint64_t to_response = since(t0);
        wait_for(h_->done[i % kSlots], use(i), "memops done");
        const std::uint64_t ns = ends_at_response ? to_response : since(t0);
        arm(stream, i + kSlots, kernel);
        return ns;
      });
      release_all(last + 1);
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
      return us;
    };
    r.memops_us[1] = ahead(empty, false);
    r.memops_us[2] = ahead(reading, false);
    r.memops_us[3] = ahead(publishing, true);

    // 4: as 3, each round re-armed by a second thread once its done word comes
    // (the backend's completer); 5: as 4, with the timing thread starting its
    // next round only after the done word too, as it does in 3.
    r.memops_us[4] = rearmed_by_completer(stream, publishing, false);
    r.memops_us[5] = rearmed_by_completer(stream, publishing, true);
  }

  template <typename Kernel>
  double rearmed_by_completer(cudaStream_t stream, Kernel&& kernel, bool next_after_done) {
    const std::uint32_t last = kWarmRounds + rounds_;
    reset_words();
    for (std::uint32_t i = 1; i <= kSlots; ++i) arm(stream, i, kernel);
    std::atomic<bool> failed{false};
    std::thread completer([&] {
      cudaSetDevice(ctx_.device());
      try {
        for (std::uint32_t i = 1; i <= last; ++i) {
          wait_for(h_->done[i % kSlots], use(i), "memops done (completer)");
          arm(stream, i + kSlots, kernel);
        }
      } catch (const Error&) {
        failed = true;
      }
    });
    const double us = p50_us([&](std::uint32_t i) {
      const auto t0 = Clock::now();
      post_batch(i);
      store(h_->go[i % kSlots], use(i));
      collect(i);
      const std::uint64_t ns = since(t0);
      if (next_after_done) wait_for(h_->done[i % kSlots], use(i), "memops done");
      return ns;
    });
    completer.join();
    if (failed) throw Error("batched steps probe: the completer thread saw no done word");
    release_all(last + 1);
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    return us;
  }

  void reset_words() {
    std::memset(h_->go, 0, sizeof h_->go);
    std::memset(h_->done, 0, sizeof h_->done);
    h_->response.desc.seq = 0;
  }

  worker::cuda::GpuContext ctx_;
  std::uint32_t rounds_;
  Shared* h_ = nullptr;
  Shared* d_ = nullptr;
  const worker::cuda::StreamMemops* memops_ = nullptr;
  std::uint64_t wrong_ = 0;
};

}  // namespace

std::optional<BatchedSteps> measure_batched_steps(const std::string& gpu, std::uint64_t round_trips) {
  Probe probe(gpu, round_trips);
  return probe.run();
}

}  // namespace ferry::bench
