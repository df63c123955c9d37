// The GPU packet workers for Ferry's own packet handler, built the way a user's
// handler is (FERRY_CUDA_PACKET_HANDLER).

#include "ferry/packet/cuda/packet_backend.cuh"
#include "ferry/worker/handlers.h"

FERRY_CUDA_PACKET_HANDLER(ferry::worker::MacSwap);

namespace ferry::packet {

std::unique_ptr<PacketWorker> make_gpu_macswap_worker(const PacketWorkerOptions& options) {
  return make_cuda_packet_worker(options, worker::MacSwap{});
}

}  // namespace ferry::packet
