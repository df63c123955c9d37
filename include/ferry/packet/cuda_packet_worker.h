#pragma once
// The GPU packet workers, as host code sees them: no CUDA types, so any .cpp may
// include this. A user's .cu file includes ferry/packet/cuda/packet_backend.cuh
// and writes FERRY_CUDA_PACKET_HANDLER(MyHandler) once.

#include <memory>

#include "ferry/packet/packet_worker.h"

namespace ferry::packet {

// A GPU worker running `handler` by options.launch (burst, persistent, graph or
// memops). Throws ferry::Error for cpu or none, or a GPU that lacks what it needs.
template <typename Handler>
std::unique_ptr<PacketWorker> make_cuda_packet_worker(const PacketWorkerOptions& options, Handler handler);

}  // namespace ferry::packet
