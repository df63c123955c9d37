#pragma once
// What the GPU can keep waiting at once, for the launch methods whose work
// waits on the GPU (a persistent or waiting kernel spinning on its item, a
// stream waiting for a word): the hardware queues streams are fed through, and
// the blocks that can be resident together. Host-only header.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <string>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"

namespace ferry::worker::cuda {

// CUDA feeds streams to the GPU through CUDA_DEVICE_MAX_CONNECTIONS hardware
// queues (8 unless the environment says otherwise), streams beyond that
// sharing them, and waiting work at the head of a queue holds back whatever
// follows it there: a stream with no traffic could stall another stream's
// ready work for good.
//
// Contract: call before the process's CUDA context exists (before the first
// GpuContext); later the variable is not read. Asks for the most queues
// unless the user chose a number, and returns the number CUDA will use.
// Whoever keeps more streams waiting at once than that must refuse to start.
//
// The packet path's graph and memops workers keep a wait in every lane's
// stream of every list, so they call it. The request path's backends keep at
// most one stream waiting each (persistent: the kernel's stream; memops: the
// one stream its slots are posted in; burst and graph wait on the host), so
// the default queues suffice and they do not ask; a process that runs several
// of them, or adds waiting streams of its own, asks itself before its first
// CUDA call.
inline constexpr int kMostHardwareQueues = 32;
inline int ask_for_hardware_queues() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(kMostHardwareQueues).c_str(), /*overwrite=*/0);
  const int n = std::atoi(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  return n >= 1 && n <= kMostHardwareQueues ? n : 8;  // what CUDA takes for an unusable value
}

// A kernel whose blocks wait on the GPU (for their items, or for each other)
// needs all of them resident at once: one that is not would never run, and
// its work never be done. Throws ferry::Error when `blocks` blocks of `threads`
// threads of kernel (no dynamic shared memory) do not fit on device together:
// "<blocks> <what> must all be resident, and <GPU> holds <n>: <remedy>".
template <typename Kernel>
void check_resident(Kernel kernel, std::size_t blocks, int threads, int device, const std::string& what,
                    const std::string& remedy) {
  int per_sm = 0, sms = 0;
  FERRY_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(kernel), threads, 0));
  FERRY_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (blocks <= std::size_t(per_sm) * sms) return;
  cudaDeviceProp prop{};
  FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  throw Error(std::to_string(blocks) + " " + what + " must all be resident, and " + prop.name + " holds " +
              std::to_string(per_sm * sms) + ": " + remedy);
}

}  // namespace ferry::worker::cuda
