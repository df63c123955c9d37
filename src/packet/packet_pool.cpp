#include "packet_pool.h"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_memory.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "core/log.h"

namespace ferry::packet {
namespace {

constexpr std::size_t kGpuPage = 64 * 1024;
std::atomic<unsigned> g_pool_serial{0};

std::string dpdk_reason() { return rte_strerror(rte_errno); }

}  // namespace

PacketPool::PacketPool(PacketWorker* worker, MemoryKind kind, std::uint16_t port, std::uint32_t mbufs,
                       std::uint32_t data_room, unsigned cache)
    : mbufs_(mbufs) {
  const std::uint32_t buf_len = RTE_PKTMBUF_HEADROOM + data_room;
  if (buf_len > UINT16_MAX) throw Error("data room " + std::to_string(data_room) + " is too large for an mbuf");
  // Each buffer starts on a cache line; the region is whole pages of its kind.
  const std::uint32_t elt = (buf_len + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
  if (elt > UINT16_MAX) throw Error("data room " + std::to_string(data_room) + " is too large for an mbuf");
  const std::size_t bytes = std::size_t(elt) * mbufs;
  memory_ = worker != nullptr ? worker->allocate(bytes, kind) : detail::allocate_cpu_memory(bytes, kind);

  const std::size_t page = kind == MemoryKind::Device ? kGpuPage : static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // DPDK knows GPU memory by the GPU's address (no CPU mapping exists), host memory by the host's.
  registered_ = kind == MemoryKind::Device ? memory_.worker : memory_.host;
  worker_delta_ = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(memory_.worker) -
                                            reinterpret_cast<std::uintptr_t>(registered_));
  if (rte_extmem_register(registered_, memory_.bytes, nullptr, 0, page) != 0)
    throw Error("registering packet memory with DPDK failed: " + dpdk_reason());

  // A physical NIC must be able to DMA into it: map it for the port's device.
  // Virtual PMDs copy with the CPU and have nothing to map (ENOTSUP).
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0) throw Error("port " + std::to_string(port) + " does not exist");
  device_ = info.device;
  if (rte_dev_dma_map(info.device, registered_, reinterpret_cast<std::uint64_t>(registered_), memory_.bytes) == 0)
    dma_mapped_ = true;
  else if (rte_errno != ENOTSUP)
    log::app().warn("DMA-mapping packet memory for port {} failed: {}; the NIC may not reach it", port, dpdk_reason());

  rte_pktmbuf_extmem ext{};
  ext.buf_ptr = registered_;
  ext.buf_iova = reinterpret_cast<std::uint64_t>(registered_);  // IOVA as VA
  ext.buf_len = memory_.bytes;
  ext.elt_size = static_cast<std::uint16_t>(elt);
  const std::string name = "ferry_pkt_" + std::to_string(g_pool_serial.fetch_add(1));
  pool_ = rte_pktmbuf_pool_create_extbuf(name.c_str(), mbufs, cache, 0, static_cast<std::uint16_t>(buf_len),
                                         static_cast<int>(rte_socket_id()), &ext, 1);
  if (pool_ == nullptr)
    throw Error("creating a pool of " + std::to_string(mbufs) + " mbufs failed: " + dpdk_reason() +
                " (the mbuf headers live in DPDK's memory: give the EAL more with -m or hugepages)");
}

PacketPool::~PacketPool() {
  if (pool_ != nullptr) rte_mempool_free(pool_);
  if (registered_ != nullptr) {
    // The device outlives its closed port (until the EAL's cleanup).
    if (dma_mapped_) rte_dev_dma_unmap(device_, registered_, reinterpret_cast<std::uint64_t>(registered_), memory_.bytes);
    rte_extmem_unregister(registered_, memory_.bytes);
  }
}

std::int64_t PacketPool::in_use() const {
  return pool_ == nullptr ? 0 : static_cast<std::int64_t>(rte_mempool_in_use_count(pool_));
}

std::uint32_t PacketPool::available() const { return pool_ == nullptr ? 0 : rte_mempool_avail_count(pool_); }

}  // namespace ferry::packet
