#pragma once
// The CUDA driver calls the launch methods need (stream memory operations),
// reached through cudaGetDriverEntryPointByVersion rather than by linking
// libcuda, so that a binary still starts on a machine without a GPU driver.

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"

namespace ferry::worker::cuda {

using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using StreamWriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

template <typename Fn>
Fn driver_entry_point(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  FERRY_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error(std::string("the CUDA driver has no ") + symbol + ", which the batched launch methods need");
  return reinterpret_cast<Fn>(fn);
}

inline void check_driver(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw Error(std::string(what) + " failed with CUresult " + std::to_string(r));
}

// The stream memory operations of the batched launch methods (memops waits
// and writes; burst and graph write) and of the packet path: a stream waits
// for a 32-bit word in mapped memory, or writes one. Each call
// throws ferry::Error naming the driver call that failed.
class StreamMemops {
 public:
  // The entry points, looked up on the first call (which throws when the
  // driver has none) and kept for the process.
  static const StreamMemops& get() {
    static const StreamMemops memops;
    return memops;
  }

  void wait(cudaStream_t stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) const {
    check_driver(wait_value_(reinterpret_cast<CUstream>(stream), addr, value, flags), "cuStreamWaitValue32");
  }
  void write(cudaStream_t stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) const {
    check_driver(write_value_(reinterpret_cast<CUstream>(stream), addr, value, flags),
                 "cuStreamWriteValue32");
  }

 private:
  StreamMemops()
      : wait_value_(driver_entry_point<StreamWaitValue32>("cuStreamWaitValue32")),
        write_value_(driver_entry_point<StreamWriteValue32>("cuStreamWriteValue32")) {}

  StreamWaitValue32 wait_value_;
  StreamWriteValue32 write_value_;
};

}  // namespace ferry::worker::cuda
