#pragma once
// The kernels of the GPU packet workers. Each handles one item of a
// communication list: a block's warps take its packets in turn, one warp a
// packet, run the handler in place, and write back each packet's length; then
// one thread marks the item DONE, after a system-scope fence, so the TX core
// that acquires DONE sees every byte. No host thread waits on a kernel.

#include <cstdint>

#include "ferry/core/comm_list.h"
#include "ferry/worker/cuda/device_ring.cuh"

namespace ferry::packet::cuda {

inline constexpr unsigned kItemThreads = 1024;  // 32 warps: a burst of 32 is one packet a warp

using worker::cuda::globaltimer_ns;

// Waits, on thread 0, until item k is READY or ERROR, and tells the block which.
__device__ inline std::uint32_t wait_for_item(const CommList& list, std::uint32_t k) {
  __shared__ std::uint32_t status;
  if (threadIdx.x == 0) {
    std::uint32_t s;
    while ((s = comm_status(list.item(k))) != kCommReady && s != kCommError) {
    }
    status = s;
  }
  __syncthreads();
  return status;
}

// The block handles item k (READY, already acquired) and marks it DONE.
template <typename Handler>
__device__ void handle_item(const CommList& list, std::uint32_t k, std::uint64_t ns_per_packet, const Handler& h) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  CommItem& item = list.item(k);
  CommPacket* packets = list.packets(k);
  const std::uint32_t n = item.num_packets;
  for (std::uint32_t i = warp; i < n; i += warps) {
    const CommPacket p = packets[i];
    auto* data = reinterpret_cast<std::uint8_t*>(p.addr);
    const std::uint32_t len =
        worker::cuda::apply_warp(h, ByteView{data, p.size}, MutableByteView{data, p.room}, lane);
    if (ns_per_packet != 0 && lane == 0) {
      const std::uint64_t until = globaltimer_ns() + ns_per_packet;
      while (globaltimer_ns() < until) {
      }
    }
    if (lane == 0) packets[i].size = len <= p.room ? len : p.room;
    __syncwarp();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    set_comm_status(item, kCommDone);
  }
}

// persistent: `lanes` blocks serve each list; lane j takes items j, j + lanes,
// ... until it meets ERROR. Items finish out of order; TX sends them in order.
template <typename Handler>
__global__ void persistent_packet_kernel(const CommList* lists, unsigned lanes, std::uint64_t ns_per_packet,
                                         Handler h) {
  const CommList list = lists[blockIdx.x / lanes];
  for (std::uint32_t k = blockIdx.x % lanes;; k += lanes) {
    if (wait_for_item(list, k) == kCommError) return;
    handle_item(list, k, ns_per_packet, h);
  }
}

// burst: launched by the dispatcher for an item it saw READY.
template <typename Handler>
__global__ void burst_packet_kernel(CommList list, std::uint32_t k, std::uint64_t ns_per_packet, Handler h) {
  handle_item(list, k, ns_per_packet, h);
}

// graph: pre-posted before the item is READY; it waits for it on the GPU.
template <typename Handler>
__global__ void waiting_packet_kernel(CommList list, std::uint32_t k, std::uint64_t ns_per_packet, Handler h) {
  if (wait_for_item(list, k) == kCommError) return;
  handle_item(list, k, ns_per_packet, h);
}

// memops: runs after the stream's wait released it, for work or for teardown.
template <typename Handler>
__global__ void released_packet_kernel(CommList list, std::uint32_t k, std::uint64_t ns_per_packet, Handler h) {
  __shared__ std::uint32_t status;
  if (threadIdx.x == 0) status = comm_status(list.item(k));
  __syncthreads();
  if (status != kCommReady) return;
  handle_item(list, k, ns_per_packet, h);
}

}  // namespace ferry::packet::cuda
