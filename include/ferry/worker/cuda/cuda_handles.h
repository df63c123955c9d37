#pragma once
// Owning handles for the CUDA objects every launch method keeps (streams,
// events, instantiated graphs), and the capture of work posted into a stream
// as a graph. Used by both paths' backends (worker/cuda/*_backend.cuh,
// packet/cuda/packet_backend.cuh) and by the model lanes of infer/.
//
// A handle is empty until made (Stream::non_blocking(), Event::without_timing(),
// GraphExec(graph)) and destroys its object with itself. release() gives the
// object up without destroying it: a worker that is stuck (its streams did not
// drain, see stream_drain.h) releases what the GPU may still use, and process
// exit reclaims it.

#include <cuda_runtime.h>

#include <optional>
#include <utility>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"

namespace ferry::worker::cuda {

// The common part of the handles: owns one T, destroyed by Destroy unless released.
template <typename T, cudaError_t (*Destroy)(T)>
class Handle {
 public:
  Handle() = default;
  Handle(Handle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    std::swap(handle_, o.handle_);
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (handle_ != nullptr) Destroy(handle_);
  }
  T get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  // Leaves the object alive: the caller (or process exit) owns it now.
  T release() noexcept { return std::exchange(handle_, nullptr); }

 protected:
  T handle_ = nullptr;
};

class Stream : public Handle<cudaStream_t, cudaStreamDestroy> {
 public:
  // A stream that does not synchronise with the legacy default stream. Throws.
  static Stream non_blocking() {
    Stream s;
    FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&s.handle_, cudaStreamNonBlocking));
    return s;
  }
};

class Event : public Handle<cudaEvent_t, cudaEventDestroy> {
 public:
  // An event for ordering and completion only (no timestamps, cheaper to record). Throws.
  static Event without_timing() {
    Event e;
    FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&e.handle_, cudaEventDisableTiming));
    return e;
  }
};

class GraphExec : public Handle<cudaGraphExec_t, cudaGraphExecDestroy> {
 public:
  GraphExec() = default;
  // Instantiates graph (which the caller still owns and destroys). Throws.
  explicit GraphExec(cudaGraph_t graph) { FERRY_CUDA_CHECK(cudaGraphInstantiate(&handle_, graph, 0)); }
};

// Gives up every handle in a container of them (see release()).
template <typename Handles>
void release_all(Handles& handles) noexcept {
  for (auto& h : handles) h.release();
}

namespace detail {

// Ends the capture on stream and drops what it recorded, so that the stream is
// usable again; clears the error a refused capture leaves behind.
inline void abandon_capture(cudaStream_t stream) noexcept {
  cudaGraph_t partial = nullptr;
  cudaStreamEndCapture(stream, &partial);
  if (partial != nullptr) cudaGraphDestroy(partial);
  cudaGetLastError();
}

inline GraphExec instantiate_and_drop(cudaGraph_t graph) {
  try {
    GraphExec exec(graph);
    cudaGraphDestroy(graph);
    return exec;
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
}

}  // namespace detail

// Records what post(stream) enqueues into stream as a graph, and instantiates
// it. Thread-local capture mode: CUDA calls from other threads (another
// worker, another lane) neither join this capture nor invalidate it. Throws
// what post throws (the capture ended and dropped first), or ferry::Error when
// ending the capture or instantiating fails.
template <typename Post>
GraphExec capture_graph(cudaStream_t stream, Post&& post) {
  FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    post(stream);
  } catch (...) {
    detail::abandon_capture(stream);
    throw;
  }
  cudaGraph_t graph = nullptr;
  FERRY_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return detail::instantiate_and_drop(graph);
}

// As capture_graph, but for work a driver may refuse to capture (stream memory
// operations): nullopt when post threw ferry::Error or ending the capture
// failed, the stream then usable again and the error cleared, so the caller can
// post the work directly instead. Other exceptions, and a failure to
// instantiate a graph that was captured, are thrown.
template <typename Post>
std::optional<GraphExec> try_capture_graph(cudaStream_t stream, Post&& post) {
  FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    post(stream);
  } catch (const Error&) {
    detail::abandon_capture(stream);
    return std::nullopt;
  } catch (...) {
    detail::abandon_capture(stream);
    throw;
  }
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    return std::nullopt;
  }
  return detail::instantiate_and_drop(graph);
}

}  // namespace ferry::worker::cuda
