#include <cuda/atomic>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/launch/gpu_probes.h"
#include "core/latency_histogram.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "ferry/worker/cuda/device_ring.cuh"
#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/handlers.h"

namespace ferry::bench {
namespace {

using worker::cuda::load_acquire_sys;
using worker::cuda::load_relaxed_sys;
using worker::cuda::store_relaxed_sys;
using worker::cuda::store_release_sys;

// The floor: one thread waits for ping == i, answers pong = i. Nothing else.
template <PingPongOrder kOrder>
__global__ void ping_pong_kernel(std::uint32_t* ping, std::uint32_t* pong, std::uint32_t rounds) {
  for (std::uint32_t i = 1; i <= rounds; ++i) {
    if constexpr (kOrder == PingPongOrder::Relaxed) {
      while (load_relaxed_sys(ping) != i) {
      }
      store_relaxed_sys(pong, i);
    } else {
      while (load_acquire_sys(ping) != i) {
      }
      store_release_sys(pong, i);
    }
  }
}

__global__ void naive_reverse_kernel(const std::uint8_t* in, std::uint8_t* out, std::uint32_t n, std::uint32_t size) {
  const std::uint32_t m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n) return;
  worker::Reverse{}(ByteView{in + std::size_t(m) * size, size}, MutableByteView{out + std::size_t(m) * size, size});
}

__global__ void warp_reverse_kernel(const std::uint8_t* in, std::uint8_t* out, std::uint32_t n, std::uint32_t size) {
  const std::uint32_t m = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  if (m >= n) return;
  worker::cuda::apply_warp(worker::Reverse{}, ByteView{in + std::size_t(m) * size, size},
                           MutableByteView{out + std::size_t(m) * size, size}, threadIdx.x % 32);
}

template <typename Launch>
double median_ms(Launch&& launch, int reps) {
  cudaEvent_t a, b;
  FERRY_CUDA_CHECK(cudaEventCreate(&a));
  FERRY_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> times;
  for (int r = 0; r < reps + 3; ++r) {
    FERRY_CUDA_CHECK(cudaEventRecord(a));
    launch();
    FERRY_CUDA_CHECK(cudaEventRecord(b));
    FERRY_CUDA_CHECK(cudaEventSynchronize(b));
    FERRY_CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 3) times.push_back(ms);  // the first runs are warm-up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

std::string gpu_name(const std::string& gpu) {
  try {
    worker::cuda::GpuContext ctx(gpu);
    return ctx.name();
  } catch (const Error&) {
    return "";
  }
}

std::optional<FloorResult> measure_floor(const std::string& gpu, std::uint64_t round_trips,
                                         PingPongOrder order) {
  worker::cuda::GpuContext ctx(gpu);
  std::uint32_t* flags_h = nullptr;
  FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags_h), 256, cudaHostAllocMapped));
  std::uint32_t* ping_h = flags_h;
  std::uint32_t* pong_h = flags_h + 32;  // separate cache lines
  *ping_h = 0;
  *pong_h = 0;
  std::uint32_t* flags_d = nullptr;
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flags_d), flags_h, 0));
  const worker::cuda::Stream owned_stream = worker::cuda::Stream::non_blocking();
  const cudaStream_t stream = owned_stream.get();
  const auto rounds = static_cast<std::uint32_t>(round_trips + 1000);
  if (order == PingPongOrder::Relaxed)
    ping_pong_kernel<PingPongOrder::Relaxed><<<1, 1, 0, stream>>>(flags_d, flags_d + 32, rounds);
  else
    ping_pong_kernel<PingPongOrder::AcquireRelease><<<1, 1, 0, stream>>>(flags_d, flags_d + 32, rounds);
  FERRY_CUDA_CHECK(cudaGetLastError());
  LatencyHistogram hist;
  for (std::uint32_t i = 1; i <= rounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic_ref<std::uint32_t>(*ping_h).store(i, std::memory_order_release);
    while (std::atomic_ref<std::uint32_t>(*pong_h).load(std::memory_order_acquire) != i) {
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (i > 1000) hist.record(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  }
  FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaFreeHost(flags_h);
  return FloorResult{hist.percentile_ns(50) / 1e3, hist.percentile_ns(99) / 1e3, hist.min_ns() / 1e3, hist.count()};
}

std::optional<HandlerThroughput> measure_handler_throughput(const std::string& gpu) {
  worker::cuda::GpuContext ctx(gpu);
  HandlerThroughput r;
  r.messages = 65536;
  r.message_bytes = 1024;
  const std::size_t bytes = std::size_t(r.messages) * r.message_bytes;
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t i = 0; i < bytes; ++i) host[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
  std::uint8_t *in = nullptr, *out = nullptr, *copy = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&in, bytes));
  FERRY_CUDA_CHECK(cudaMalloc(&out, bytes));
  FERRY_CUDA_CHECK(cudaMalloc(&copy, bytes * 4));
  FERRY_CUDA_CHECK(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice));

  // The device's memory bandwidth, measured here: a 256 MiB device-to-device copy.
  const double copy_ms = median_ms([&] { cudaMemcpyAsync(copy + bytes * 2, copy, bytes * 2, cudaMemcpyDeviceToDevice); }, 20);
  r.device_copy_gbs = 2.0 * double(bytes * 2) / (copy_ms * 1e6);

  auto verify = [&] {
    std::vector<std::uint8_t> got(bytes);
    FERRY_CUDA_CHECK(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost));
    for (std::uint32_t m = 0; m < r.messages; m += 97)
      for (std::uint32_t j = 0; j < r.message_bytes; ++j)
        if (got[std::size_t(m) * r.message_bytes + j] != host[std::size_t(m) * r.message_bytes + r.message_bytes - 1 - j])
          return false;
    return true;
  };
  FERRY_CUDA_CHECK(cudaMemset(out, 0, bytes));
  const double naive_ms = median_ms(
      [&] { naive_reverse_kernel<<<(r.messages + 255) / 256, 256>>>(in, out, r.messages, r.message_bytes); }, 20);
  const bool naive_ok = verify();
  FERRY_CUDA_CHECK(cudaMemset(out, 0, bytes));
  const double warp_ms = median_ms(
      [&] { warp_reverse_kernel<<<r.messages * 32 / 256, 256>>>(in, out, r.messages, r.message_bytes); }, 20);
  r.verified = naive_ok && verify();
  r.naive_gbs = 2.0 * double(bytes) / (naive_ms * 1e6);
  r.warp_gbs = 2.0 * double(bytes) / (warp_ms * 1e6);
  cudaFree(in);
  cudaFree(out);
  cudaFree(copy);
  return r;
}

}  // namespace ferry::bench
