#pragma once
// The worker of a packet path: it takes each READY item of a pipeline's
// communication list (ferry/core/comm_list.h), runs a handler over its packets
// in place, and marks the item DONE. The CPU worker is below; the GPU workers
// (one per launch method) are in cuda/packet_backend.cuh, made for a handler
// type the same way as the request workers (ferry/worker/cuda_backend.h).
//
// A packet handler is an ordinary Ferry handler (ferry/worker/handlers.h) that
// is safe in place: it is called with out.data == in.data and out.size the room
// the packet's buffer has; what it returns is the packet's new length. MacSwap
// is one.
//
// The worker also provides the memory its lists and packets live in, since only
// it knows what its processor can reach: plain memory for the CPU, pinned host
// memory that the GPU maps, or GPU memory.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ferry/core/comm_list.h"
#include "ferry/core/detail/backoff.h"
#include "ferry/core/detail/first_failure.h"
#include "ferry/core/status.h"
#include "ferry/worker/backend.h"
#include "ferry/worker/handlers.h"

namespace ferry::packet {

// How packets are handled: by a worker of one of the launch methods the
// request path uses too (worker::LaunchMethod: l2fwd-nv's -w 1..4, and the DPDK
// gpudev article's stream memory operations), or by none: the RX core hands
// each burst to TX as it is (l2fwd-nv's -w 0).
using PacketLaunch = std::optional<worker::LaunchMethod>;

// "none", or a launch method's name (worker::parse_launch).
PacketLaunch parse_packet_launch(std::string_view name);
const char* to_string(const PacketLaunch& launch) noexcept;

enum class MemoryKind {
  Host,    // host memory the worker reaches (pinned and mapped for a GPU worker)
  Device,  // GPU memory: only a NIC with GPUDirect RDMA can fill it
};

struct PacketWorkerOptions {
  PacketLaunch launch = worker::LaunchMethod::Cpu;
  std::string gpu;                  // GPU modes: PCI address or device index; empty = device 0
  std::uint32_t max_packets = 32;   // packets per item at most (the burst)
  std::uint64_t ns_per_packet = 0;  // l2fwd-nv's -t: a synthetic workload of this long per packet
  std::uint32_t graph_items = 8;    // graph and memops: items each graph launch pre-posts
  // GPU modes: items of one list the GPU works on at once (persistent: blocks
  // per list; burst: streams per list; graph and memops: parallel branches of
  // each graph). One item at a time leaves the GPU waiting on PCIe round trips.
  std::uint32_t gpu_lanes = 4;
};

// Memory a worker handed out: `host` is where the CPU writes it (null for GPU
// memory), `worker` the same bytes in the worker's address space.
struct WorkerMemory {
  void* host = nullptr;
  void* worker = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<void> owner;  // frees it when the last copy goes
};

class PacketWorker {
 public:
  virtual ~PacketWorker() = default;
  // Memory of `bytes` bytes, aligned to 64 KiB. Throws ferry::Error where the
  // worker cannot provide that kind.
  virtual WorkerMemory allocate(std::size_t bytes, MemoryKind kind) = 0;
  // Starts serving these lists (one per pipeline), which live in memory this
  // worker allocated. Throws.
  virtual void start(const std::vector<CommList>& lists) = 0;
  // Waits for the worker to finish. RX and TX must have stopped, and every item
  // of its lists been marked ERROR, which is what ends it; the worker marks them
  // again once it posts no more work, since a burst it was finishing may have
  // written DONE over one. Gives up after `timeout`, and then reports stuck().
  // Idempotent.
  virtual void stop(std::chrono::milliseconds timeout) = 0;
  // The first error a worker hit, or empty while healthy (sticky).
  virtual std::string failure() const = 0;
  virtual std::string describe() const = 0;
  // True when stop() left work running (a kernel that never saw ERROR): the
  // process must exit without tearing down the GPU context.
  virtual bool stuck() const { return false; }
};

namespace detail {

// Host memory for a CPU worker, 64 KiB aligned.
WorkerMemory allocate_cpu_memory(std::size_t bytes, MemoryKind kind);

// Spins for about `ns` nanoseconds: the CPU worker's synthetic workload.
void spin_for_ns(std::uint64_t ns) noexcept;

// Marks every item of every list ERROR (teardown).
void mark_error(const std::vector<CommList>& lists) noexcept;

}  // namespace detail

// One thread per list. Items are taken in order; a thread waiting for work
// backs off (spin, yield, then short sleeps), so an idle path gives its core back.
template <typename Handler>
class CpuPacketWorker final : public PacketWorker {
 public:
  CpuPacketWorker(const PacketWorkerOptions& options, Handler handler) : options_(options), handler_(handler) {}
  // stop() should have run: the lists may be gone by now, so nothing here touches them.
  ~CpuPacketWorker() override {
    lists_.clear();
    stop(std::chrono::milliseconds(5000));
  }

  WorkerMemory allocate(std::size_t bytes, MemoryKind kind) override { return detail::allocate_cpu_memory(bytes, kind); }

  void start(const std::vector<CommList>& lists) override {
    lists_ = lists;
    for (const CommList& l : lists) threads_.emplace_back([this, l] { serve(l); });
  }

  void stop(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (exited_.load(std::memory_order_acquire) < threads_.size()) {
      if (std::chrono::steady_clock::now() > deadline) {
        stuck_.store(true);
        for (auto& t : threads_) t.detach();
        threads_.clear();
        return;
      }
      detail::mark_error(lists_);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  std::string failure() const override { return failure_.get(); }
  std::string describe() const override {
    return std::string("cpu worker, handler ") + worker::handler_name<Handler>() +
           (options_.ns_per_packet != 0 ? ", " + std::to_string(options_.ns_per_packet) + " ns per packet" : "");
  }
  bool stuck() const override { return stuck_.load(); }

 private:
  void serve(CommList list) {
    try {
      for (std::uint32_t k = 0;; ++k) {
        CommItem& item = list.item(k);
        Backoff backoff;
        std::uint32_t s;
        while ((s = comm_status(item)) != kCommReady && s != kCommError) backoff.idle();
        if (s == kCommError) break;
        CommPacket* packets = list.packets(k);
        for (std::uint32_t i = 0; i < item.num_packets; ++i) {
          CommPacket& p = packets[i];
          auto* data = reinterpret_cast<std::uint8_t*>(p.addr);
          const std::size_t n = handler_(ByteView{data, p.size}, MutableByteView{data, p.room});
          p.size = static_cast<std::uint32_t>(n <= p.room ? n : p.room);
          if (options_.ns_per_packet != 0) detail::spin_for_ns(options_.ns_per_packet);
        }
        set_comm_status(item, kCommDone);
      }
    } catch (const std::exception& e) {  // handlers must not throw; one that does ends this pipeline's worker
      failure_.set(std::string("the packet handler threw: ") + e.what());
    }
    exited_.fetch_add(1, std::memory_order_release);
  }

  PacketWorkerOptions options_;
  Handler handler_;
  std::vector<CommList> lists_;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> exited_{0};
  std::atomic<bool> stuck_{false};
  FirstFailure failure_;
};

template <typename Handler>
std::unique_ptr<PacketWorker> make_cpu_packet_worker(const PacketWorkerOptions& options, Handler handler) {
  return std::make_unique<CpuPacketWorker<Handler>>(options, handler);
}

// The worker for options.launch with the MacSwap handler: the CPU worker, or a
// GPU worker where this build has CUDA. Null for no launch method (the RX core
// hands bursts straight to TX). Throws ferry::Error for a GPU method without CUDA.
std::unique_ptr<PacketWorker> make_macswap_worker(const PacketWorkerOptions& options);

}  // namespace ferry::packet
