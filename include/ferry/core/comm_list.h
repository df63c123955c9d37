#pragma once
// The communication list of a packet path: gpudev's rte_gpu_comm_list, in memory
// that the RX core, the worker (a CPU thread or a GPU kernel) and the TX core all
// reach. It is a ring of items; each item holds one burst of packets and a status
// word that moves round one cycle:
//
//   FREE --RX--> READY --worker--> DONE --TX--> FREE
//
// and, on teardown, any status --> ERROR, which tells a worker still waiting on
// the item to quit. The three stages walk the items in the same order, each with
// an index of its own, so an item's status has one writer at every step and a
// stage never needs a read-modify-write (a GPU cannot do one on host memory).
// A stage writes the item's fields, then its status with release; the next
// stage acquires the status, then reads the fields.
//
// The values are gpudev's (RTE_GPU_COMM_LIST_FREE..ERROR). READY and ERROR are
// the odd ones, so a stream memory operation that waits for (status & 1) != 0
// wakes for work or for teardown, never for an item still DONE from its last turn.
//
// The layout is an ABI between the host and the GPU: offsets, not pointers, and
// CommList itself is a plain value that a kernel takes by argument, built from
// the device's address of the same memory (at()).
//
//   +0    CommListHeader   magic 'FCOM', version, capacity n, max_packets, offsets (64 B)
//   +64   CommItem[n]      one 64-byte line each: status, num_packets, ready_ns
//   ...   CommPacket[n * max_packets]   item k's packets from k * max_packets

#include <cstddef>
#include <cstdint>

#include "ferry/core/host_device.h"

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif
#if !defined(__CUDA_ARCH__)
#include <atomic>
#endif

namespace ferry {

inline constexpr std::uint32_t kCommListMagic = 0x4d4f4346;  // "FCOM" little-endian
inline constexpr std::uint16_t kCommListVersion = 1;

enum CommStatus : std::uint32_t {
  kCommFree = 0,   // the RX core may fill it
  kCommReady = 1,  // a burst waits for the worker
  kCommDone = 2,   // the worker is done; the TX core may send it
  kCommError = 3,  // teardown: whoever waits on it stops
};

struct CommListHeader {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved0;
  std::uint32_t capacity;     // items, a power of two
  std::uint32_t max_packets;  // packets per item at most
  std::uint64_t items_offset;
  std::uint64_t packets_offset;
  std::uint64_t total_size;
  std::uint64_t reserved[3];
};
static_assert(sizeof(CommListHeader) == 64);

// One packet of a burst, as the worker sees it.
struct CommPacket {
  std::uint64_t addr;  // its first byte, in the worker's address space
  std::uint32_t size;  // bytes; a worker that changes the packet's length writes it back
  std::uint32_t room;  // bytes the buffer holds from addr
};
static_assert(sizeof(CommPacket) == 16);

// Its own cache line, so that the stages writing neighbouring items never share one.
struct alignas(64) CommItem {
  std::uint32_t status;       // CommStatus
  std::uint32_t num_packets;  // written by RX before READY
  std::uint64_t ready_ns;     // RX's clock when it marked the item READY (latency)
  // RX's free-running index of the burst, written before READY. A stage that may
  // run a whole lap ahead of the item's last use (the burst dispatcher, whose
  // kernels can lag a full list behind) tells this turn's READY from the last's by it.
  std::uint32_t sequence;
  std::uint32_t reserved0;
  std::uint64_t reserved[5];
};
static_assert(sizeof(CommItem) == 64);

class CommList {
 public:
  CommList() = default;

  // Bytes a list of `capacity` items of up to `max_packets` each occupies.
  // Throws ferry::Error unless capacity is a power of two and max_packets in 1..4096.
  static std::size_t memsize(std::uint32_t capacity, std::uint32_t max_packets);
  // Writes a fresh list into mem (memsize() bytes, 64-byte aligned): every item FREE.
  static CommList init(void* mem, std::uint32_t capacity, std::uint32_t max_packets);

  // The same list through another mapping of its memory (the GPU's address).
  FERRY_HOST_DEVICE CommList at(void* base) const {
    CommList l = *this;
    l.base_ = static_cast<std::uint8_t*>(base);
    return l;
  }

  FERRY_HOST_DEVICE void* base() const { return base_; }
  FERRY_HOST_DEVICE std::uint32_t capacity() const { return capacity_; }
  FERRY_HOST_DEVICE std::uint32_t max_packets() const { return max_packets_; }
  FERRY_HOST_DEVICE CommItem& item(std::uint32_t k) const {
    return reinterpret_cast<CommItem*>(base_ + items_offset_)[k & (capacity_ - 1)];
  }
  FERRY_HOST_DEVICE CommPacket* packets(std::uint32_t k) const {
    return reinterpret_cast<CommPacket*>(base_ + packets_offset_) + std::size_t(k & (capacity_ - 1)) * max_packets_;
  }

 private:
  std::uint8_t* base_ = nullptr;
  std::uint32_t capacity_ = 0;
  std::uint32_t max_packets_ = 0;
  std::uint64_t items_offset_ = 0;
  std::uint64_t packets_offset_ = 0;
};

// C1: a stage takes an item it waits for; pairs with the previous stage's C2.
FERRY_HOST_DEVICE inline std::uint32_t comm_status(const CommItem& item) {
  auto& word = const_cast<std::uint32_t&>(item.status);
#if defined(__CUDA_ARCH__)
  return ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_system>(word).load(::cuda::memory_order_acquire);
#else
  return std::atomic_ref<std::uint32_t>(word).load(std::memory_order_acquire);
#endif
}

// C2: a stage hands an item on, after everything it wrote to the item and its packets.
FERRY_HOST_DEVICE inline void set_comm_status(CommItem& item, std::uint32_t status) {
#if defined(__CUDA_ARCH__)
  ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_system>(item.status).store(status, ::cuda::memory_order_release);
#else
  std::atomic_ref<std::uint32_t>(item.status).store(status, std::memory_order_release);
#endif
}

const char* comm_status_name(std::uint32_t status) noexcept;

}  // namespace ferry
