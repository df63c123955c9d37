#pragma once
// Waiting for a GPU worker's streams at stop, for every launch method of both
// paths (the request path's backends, the packet path's workers): until their
// work is done, a CUDA error shows, or a deadline passes. A stream still busy
// at the deadline may still read the memory its work was given, so the caller
// must then leave that memory allocated (the worker is "stuck").

#include <cuda_runtime.h>

#include <chrono>
#include <span>
#include <string>
#include <thread>

namespace ferry::worker::cuda {

struct StreamDrain {
  bool timed_out = false;  // work still queued at the deadline
  std::string error;       // the first CUDA error a stream reported, if any
};

inline StreamDrain drain_streams(std::span<const cudaStream_t> streams,
                                 std::chrono::steady_clock::time_point deadline) {
  StreamDrain d;
  for (cudaStream_t s : streams) {
    cudaError_t st;
    while ((st = cudaStreamQuery(s)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        d.timed_out = true;
        return d;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (st != cudaSuccess && d.error.empty()) d.error = cudaGetErrorString(st);
  }
  return d;
}

}  // namespace ferry::worker::cuda
