#pragma once
// Owning handles for a CUDA stream and an instantiated CUDA graph: each is created by its constructor
// (throwing ferry::Error naming the call that failed) and destroyed with the object.

#include <cuda_runtime.h>

#include <utility>

#include "ferry/worker/cuda/cuda_check.h"

namespace ferry::infer::cuda {

class Stream {
 public:
  Stream() { FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(stream_); }
  cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class GraphExec {
 public:
  // Instantiates graph (which the caller still owns and destroys).
  explicit GraphExec(cudaGraph_t graph) { FERRY_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph, 0)); }
  GraphExec(GraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t get() const noexcept { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace ferry::infer::cuda
