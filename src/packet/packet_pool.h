#pragma once
// The packet memory of ferry l2fwd: a buffer the worker provided (pinned host
// memory its GPU maps, GPU memory, or plain memory for a CPU worker), registered
// with DPDK as external memory, and an mbuf pool whose buffers point into it.
// So a burst that the port receives is already where the worker reads it.

#include <rte_dev.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <string>

#include "ferry/packet/packet_worker.h"

namespace ferry::packet {

class PacketPool {
 public:
  // mbufs buffers of RTE_PKTMBUF_HEADROOM + data_room bytes each, usable by
  // `port`, with a cache of `cache` per lcore. Throws.
  PacketPool(PacketWorker* worker, MemoryKind kind, std::uint16_t port, std::uint32_t mbufs, std::uint32_t data_room,
             unsigned cache);
  ~PacketPool();
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  rte_mempool* pool() const { return pool_; }
  // The worker's address of a packet byte the mbuf points at.
  std::uint64_t worker_address(const void* p) const {
    return reinterpret_cast<std::uint64_t>(p) + static_cast<std::uint64_t>(worker_delta_);
  }
  std::uint32_t mbufs() const { return mbufs_; }
  // mbufs not back in the pool.
  std::int64_t in_use() const;
  // mbufs free, in the pool or an lcore's cache. Not for the data path: it
  // reads every lcore's cache.
  std::uint32_t available() const;

 private:
  WorkerMemory memory_;
  void* registered_ = nullptr;  // the address DPDK knows the buffer by
  rte_device* device_ = nullptr;  // the port's, for DMA mapping
  bool dma_mapped_ = false;
  std::int64_t worker_delta_ = 0;
  std::uint32_t mbufs_ = 0;
  rte_mempool* pool_ = nullptr;
};

}  // namespace ferry::packet
