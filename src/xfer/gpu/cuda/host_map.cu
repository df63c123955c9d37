// Device addresses of mapped host memory (see host_map.h).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "ferry/worker/cuda/cuda_check.h"
#include "xfer/gpu/cuda/host_map.h"

namespace ferry::xfer::gpu::cuda {
namespace {

struct Range {
  std::uintptr_t host;
  std::size_t size;
  std::intptr_t delta;  // device address - host address
};

std::mutex g_mu;
std::vector<Range> g_ranges;
// Set only where some range's device address differs: the usual UVA case then
// costs one relaxed load per lookup and never takes the lock.
std::atomic<bool> g_any_delta{false};

}  // namespace

void note_mapped(void* host, std::size_t size) {
  int device = 0;
  FERRY_CUDA_CHECK(cudaGetDevice(&device));
  int same = 0;
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&same, cudaDevAttrCanUseHostPointerForRegisteredMem, device));
  void* dev = nullptr;
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
  if (same != 0 && dev == host) return;
  std::lock_guard lk(g_mu);
  g_ranges.push_back({reinterpret_cast<std::uintptr_t>(host), size,
                      reinterpret_cast<std::intptr_t>(dev) - reinterpret_cast<std::intptr_t>(host)});
  g_any_delta.store(true, std::memory_order_release);
}

void forget_mapped(void* host) noexcept {
  std::lock_guard lk(g_mu);
  std::erase_if(g_ranges, [&](const Range& r) { return r.host == reinterpret_cast<std::uintptr_t>(host); });
}

void* device_view(const void* host) noexcept {
  // Acquire pairs with the release in note_mapped: a lane that sees the flag sees the range.
  if (!g_any_delta.load(std::memory_order_acquire)) return const_cast<void*>(host);
  const auto p = reinterpret_cast<std::uintptr_t>(host);
  std::lock_guard lk(g_mu);
  for (const Range& r : g_ranges)
    if (p >= r.host && p < r.host + r.size) return reinterpret_cast<void*>(p + r.delta);
  return const_cast<void*>(host);
}

}  // namespace ferry::xfer::gpu::cuda
