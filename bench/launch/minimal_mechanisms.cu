// The minimal mechanisms under the batched launch methods (gpu_probes.h): an
// empty kernel launched and synchronised, the same kernel as a one-node graph,
// and the kernel between a stream wait and a stream write. What burst, graph
// and memops could at best do, with no work and nothing read back.

#include <cuda.h>

#include <atomic>
#include <chrono>

#include "bench/launch/gpu_probes.h"
#include "core/latency_histogram.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/device_ring.cuh"
#include "ferry/worker/cuda/driver_api.h"
#include "ferry/worker/cuda/gpu_context.h"

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;

__global__ void empty_kernel() {}

struct Words {
  std::uint32_t* h = nullptr;  // memops' [64] go and [96] done, on lines of their own
  std::uint32_t* d = nullptr;
  std::uint32_t& host(int i) const { return h[i * 32]; }
  std::uint32_t* dev(int i) const { return d + i * 32; }
};

std::uint32_t load(std::uint32_t& w) {
  return std::atomic_ref<std::uint32_t>(w).load(std::memory_order_acquire);
}
void store(std::uint32_t& w, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(w).store(v, std::memory_order_release);
}

template <typename RoundTrip>
double p50_us(std::uint64_t rounds, RoundTrip&& trip) {
  LatencyHistogram hist;
  for (std::uint32_t i = 1; i <= rounds + 200; ++i) {
    const std::uint64_t ns = trip(i);
    if (i > 200) hist.record(ns);  // the first rounds are warm-up
  }
  return hist.percentile_ns(50) / 1e3;
}

std::uint64_t since(Clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

}  // namespace

std::optional<MinimalMechanisms> measure_minimal_mechanisms(const std::string& gpu,
                                                            std::uint64_t round_trips) {
  worker::cuda::GpuContext ctx(gpu);
  Words w;
  FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&w.h), 4 * 128, cudaHostAllocMapped));
  std::memset(w.h, 0, 4 * 128);
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&w.d), w.h, 0));
  cudaStream_t stream;
  FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::uint64_t rounds = std::min<std::uint64_t>(round_trips, 20000);
  MinimalMechanisms r;

  r.launch_sync_us = p50_us(rounds, [&](std::uint32_t) {
    const auto t0 = Clock::now();
    empty_kernel<<<1, 1, 0, stream>>>();
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    return since(t0);
  });

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  empty_kernel<<<1, 1, 0, stream>>>();
  FERRY_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  FERRY_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  r.graph_sync_us = p50_us(rounds, [&](std::uint32_t) {
    const auto t0 = Clock::now();
    FERRY_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    return since(t0);
  });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // memops: round i is posted before its clock starts (as memops pre-posts), so
  // the round trip is the flag, the stream's wait, the kernel and the write.
  const auto wait_value =
      worker::cuda::driver_entry_point<worker::cuda::StreamWaitValue32>("cuStreamWaitValue32");
  const auto write_value =
      worker::cuda::driver_entry_point<worker::cuda::StreamWriteValue32>("cuStreamWriteValue32");
  auto post = [&](std::uint32_t i) {
    auto s = reinterpret_cast<CUstream>(stream);
    worker::cuda::check_driver(
        wait_value(s, reinterpret_cast<CUdeviceptr>(w.dev(2)), i, CU_STREAM_WAIT_VALUE_EQ),
        "cuStreamWaitValue32");
    empty_kernel<<<1, 1, 0, stream>>>();
    worker::cuda::check_driver(
        write_value(s, reinterpret_cast<CUdeviceptr>(w.dev(3)), i, CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue32");
  };
  post(1);
  r.memops_us = p50_us(rounds, [&](std::uint32_t i) {
    const auto t0 = Clock::now();
    store(w.host(2), i);
    const auto give_up = t0 + std::chrono::seconds(5);
    while (load(w.host(3)) != i)
      if (Clock::now() > give_up)
        throw Error("minimal mechanism probe: the stream's write never came (memops)");
    const std::uint64_t ns = since(t0);
    post(i + 1);
    return ns;
  });
  store(w.host(2), static_cast<std::uint32_t>(rounds + 201));  // releases the last posted round
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
  cudaFreeHost(w.h);
  return r;
}

}  // namespace ferry::bench
