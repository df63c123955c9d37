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
#include "ferry/worker/cuda/cuda_handles.h"
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
  const worker::cuda::Stream owned_stream = worker::cuda::Stream::non_blocking();
  const cudaStream_t stream = owned_stream.get();
  const std::uint64_t rounds = std::min<std::uint64_t>(round_trips, 20000);
  MinimalMechanisms r;

  r.launch_sync_us = p50_us(rounds, [&](std::uint32_t) {
    const auto t0 = Clock::now();
    empty_kernel<<<1, 1, 0, stream>>>();
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    return since(t0);
  });

  {
    const worker::cuda::GraphExec exec =
        worker::cuda::capture_graph(stream, [](cudaStream_t s) { empty_kernel<<<1, 1, 0, s>>>(); });
    r.graph_sync_us = p50_us(rounds, [&](std::uint32_t) {
      const auto t0 = Clock::now();
      FERRY_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream));
      FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
      return since(t0);
    });
  }

  // memops: round i is posted before its clock starts (as memops pre-posts), so
  // the round trip is the flag, the stream's wait, the kernel and the write.
  const worker::cuda::StreamMemops& memops = worker::cuda::StreamMemops::get();
  auto post = [&](std::uint32_t i) {
    memops.wait(stream, reinterpret_cast<CUdeviceptr>(w.dev(2)), i, CU_STREAM_WAIT_VALUE_EQ);
    empty_kernel<<<1, 1, 0, stream>>>();
    memops.write(stream, reinterpret_cast<CUdeviceptr>(w.dev(3)), i, CU_STREAM_WRITE_VALUE_DEFAULT);
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
  cudaFreeHost(w.h);
  return r;
}

}  // namespace ferry::bench
