#pragma once
// The GPU packet workers, one per launch method of the DPDK gpudev article,
// over the communication lists of ferry/core/comm_list.h:
//
//   persistent  one kernel, a block per list, polls each item and handles it;
//   burst       a dispatcher thread sees an item READY and launches a kernel for it;
//   graph       each graph launch pre-posts `graph_items` kernels that wait for
//               their items on the GPU (l2fwd-nv's graphs of 8);
//   memops      each graph launch pre-posts `graph_items` stream waits, each
//               followed by its kernel: the GPU front end waits, no SM spins.
//
// In every method the kernel marks its item DONE itself, so the TX core sees
// the burst the moment the GPU is done. Teardown marks every item ERROR, which
// releases every pre-posted wait and ends the persistent kernel.
//
// Include this in a .cu file and write FERRY_CUDA_PACKET_HANDLER(MyHandler)
// once; host code calls make_cuda_packet_worker (cuda_packet_worker.h).

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/detail/backoff.h"
#include "ferry/core/detail/first_failure.h"
#include "ferry/packet/cuda/packet_kernels.cuh"
#include "ferry/packet/cuda_packet_worker.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "ferry/worker/cuda/driver_api.h"
#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/cuda/launch_limits.h"
#include "ferry/worker/cuda/stream_drain.h"

namespace ferry::packet::cuda {

// Memory for a GPU worker, and the driver's entry points; compiled once, in ferry_packet.
WorkerMemory allocate_gpu_memory(std::size_t bytes, MemoryKind kind);

// The streams, events, graphs, stream waits, residency check and hardware
// queues are the request path's too (ferry/worker/cuda/cuda_handles.h,
// driver_api.h, launch_limits.h); what is here is what differs: the dispatch
// loops over comm lists, and kernels that handle each packet in place.
//
// Graph and memops keep work waiting on the GPU in every list's streams at
// once: a kernel spinning on its item, or a stream wait. A list with no
// traffic (or paused at the warm-up's end) could then stall another list's
// ready item for good if their streams shared a hardware queue. So a GPU
// worker asks for the most queues before the process's context exists
// (worker::cuda::ask_for_hardware_queues), and graph and memops refuse more
// waiting streams than there are queues.

template <typename Handler>
class GpuPacketWorker final : public PacketWorker {
  // Graph launches (of graph_items items each) a list may have queued at once.
  static constexpr std::uint32_t kGroupsAhead = 2;

 public:
  GpuPacketWorker(const PacketWorkerOptions& options, Handler handler)
      : options_(options), handler_(handler), gpu_(options.gpu) {
    if (!options_.launch || !worker::runs_on_gpu(*options_.launch))
      throw Error(std::string("the GPU worker has no launch method ") + to_string(options_.launch));
    if (options_.graph_items == 0) throw Error("PacketWorkerOptions::graph_items must be at least 1");
    if (options_.gpu_lanes == 0 || options_.gpu_lanes > 64)
      throw Error("PacketWorkerOptions::gpu_lanes must be in 1..64");
  }

  // stop() should have run: the lists may be gone by now, so nothing here touches them.
  ~GpuPacketWorker() override {
    lists_.clear();
    stop(std::chrono::milliseconds(5000));
    if (stuck_) {  // the GPU may still use them: process exit reclaims them
      for (auto& per_list : graphs_) worker::cuda::release_all(per_list);
      for (auto& per_list : events_) worker::cuda::release_all(per_list);
      worker::cuda::release_all(fork_);
      for (auto& per_list : join_) worker::cuda::release_all(per_list);
      worker::cuda::release_all(branches_);
      worker::cuda::release_all(streams_);
      return;
    }
    if (list_array_d_ != nullptr) cudaFree(list_array_d_);
  }

  WorkerMemory allocate(std::size_t bytes, MemoryKind kind) override {
    FERRY_CUDA_CHECK(cudaSetDevice(gpu_.device()));  // the caller's thread may have another current device
    return allocate_gpu_memory(bytes, kind);
  }

  void start(const std::vector<CommList>& lists) override {
    FERRY_CUDA_CHECK(cudaSetDevice(gpu_.device()));
    for (const CommList& l : lists) {
      void* base_d = nullptr;
      FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&base_d, l.base(), 0));
      lists_.push_back(l);
      lists_d_.push_back(l.at(base_d));
      // Lane j owns items j, j + lanes, ...: only a whole number of lanes per
      // list keeps each item with one lane from one turn to the next.
      if (l.capacity() % options_.gpu_lanes != 0)
        throw Error("PacketWorkerOptions::gpu_lanes " + std::to_string(options_.gpu_lanes) +
                    " does not divide the list's " + std::to_string(l.capacity()) +
                    " items: give a power of two up to L2fwdOptions::items");
    }
    // Lane j of list p works in stream p * lanes + j.
    for (std::size_t i = 0; i < lists_.size() * options_.gpu_lanes; ++i)
      streams_.push_back(worker::cuda::Stream::non_blocking());
    switch (*options_.launch) {
      case worker::LaunchMethod::Persistent: start_persistent(); break;
      case worker::LaunchMethod::Burst:
        running_.store(true);
        dispatcher_ = std::thread([this] { burst_loop(); });
        break;
      case worker::LaunchMethod::Graph:
      case worker::LaunchMethod::Memops:
        prepare_groups();
        running_.store(true);
        dispatcher_ = std::thread([this] { group_loop(); });
        break;
      default: break;
    }
  }

  void stop(std::chrono::milliseconds timeout) override {
    if (stopped_) return;
    running_.store(false);
    if (dispatcher_.joinable()) dispatcher_.join();
    // Nothing more is posted: ERROR again, over any DONE a kernel wrote since.
    detail::mark_error(lists_);
    std::vector<cudaStream_t> all;
    for (const auto& s : streams_) all.push_back(s.get());
    for (const auto& s : branches_) all.push_back(s.get());
    const worker::cuda::StreamDrain d =
        worker::cuda::drain_streams(all, std::chrono::steady_clock::now() + timeout);
    if (d.timed_out) {
      set_failure("the GPU worker did not finish within " + std::to_string(timeout.count()) +
                  " ms of teardown");
      stuck_ = true;
      return;
    }
    if (!d.error.empty()) set_failure("the GPU worker failed: " + d.error);
    stopped_ = true;
  }

  std::string failure() const override {
    // A kernel that faulted leaves a sticky error that any stream query returns.
    if (!streams_.empty() && !stuck_) {
      const cudaError_t st = cudaStreamQuery(streams_[0].get());
      if (st != cudaSuccess && st != cudaErrorNotReady)
        failure_.set(std::string("the GPU worker failed: ") + cudaGetErrorString(st));
    }
    return failure_.get();
  }
  std::string describe() const override {
    std::string d = std::string("cuda ") + to_string(options_.launch) + " on " + gpu_.describe() +
                    ", handler " + worker::handler_name<Handler>();
    d += ", " + std::to_string(options_.gpu_lanes) + " items at once per list";
    if (*options_.launch == worker::LaunchMethod::Graph || *options_.launch == worker::LaunchMethod::Memops)
      d += ", " + std::to_string(options_.graph_items) + " items per graph launch" +
           (*options_.launch == worker::LaunchMethod::Memops && !memops_captured_
                ? " (waits posted directly: capture refused)"
                : "");
    if (options_.ns_per_packet != 0) d += ", " + std::to_string(options_.ns_per_packet) + " ns per packet";
    return d;
  }
  bool stuck() const override { return stuck_; }

 private:
  // Kernels that wait on the GPU for their items (persistent and graph) must all
  // be resident at once: one that is not would never run, and its items never
  // be handled.
  template <typename Kernel>
  void check_resident(Kernel kernel, std::size_t blocks) const {
    worker::cuda::check_resident(kernel, blocks, kItemThreads, gpu_.device(),
                                 "blocks (L2fwdOptions::pipelines x PacketWorkerOptions::gpu_lanes)",
                                 "give fewer lanes or pipelines");
  }

  void start_persistent() {
    check_resident(persistent_packet_kernel<Handler>, lists_d_.size() * options_.gpu_lanes);
    FERRY_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&list_array_d_), sizeof(CommList) * lists_d_.size()));
    FERRY_CUDA_CHECK(cudaMemcpy(list_array_d_, lists_d_.data(), sizeof(CommList) * lists_d_.size(),
                                cudaMemcpyHostToDevice));
    persistent_packet_kernel<<<static_cast<unsigned>(lists_d_.size() * options_.gpu_lanes), kItemThreads, 0,
                               streams_[0].get()>>>(list_array_d_, options_.gpu_lanes, options_.ns_per_packet,
                                                    handler_);
    FERRY_CUDA_CHECK(cudaGetLastError());
  }

  void burst_loop() {
    cudaSetDevice(gpu_.device());
    std::vector<std::uint32_t> next(lists_.size(), 0);
    std::vector<bool> ended(lists_.size(), false);
    Backoff backoff(2000, 100, 20'000);
    try {
      while (running_.load(std::memory_order_relaxed)) {
        bool progress = false, all_ended = true;
        for (std::size_t p = 0; p < lists_.size(); ++p) {
          if (ended[p]) continue;
          all_ended = false;
          // C1 on the host: the kernel's reads of the item follow the launch.
          const CommItem& item = lists_[p].item(next[p]);
          const std::uint32_t s = comm_status(item);
          if (s == kCommError) ended[p] = true;
          // A READY of the item's last turn, whose kernel has not run yet, is not
          // this turn's. RX writes the sequence before READY; read it, then
          // the status again, so that both are this turn's.
          if (s != kCommReady) continue;
          const std::uint32_t seq = std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(item.sequence)).load(std::memory_order_relaxed);
          if (seq != next[p] || comm_status(item) != kCommReady) continue;
          cudaStream_t stream = streams_[p * options_.gpu_lanes + next[p] % options_.gpu_lanes].get();
          burst_packet_kernel<<<1, kItemThreads, 0, stream>>>(lists_d_[p], next[p]++, options_.ns_per_packet,
                                                              handler_);
          FERRY_CUDA_CHECK(cudaGetLastError());
          progress = true;
        }
        if (all_ended) break;
        if (progress) backoff.reset(); else backoff.idle();
      }
    } catch (const std::exception& e) {
      set_failure(e.what());
    }
  }

  // One graph per group of graph_items consecutive items of each list, captured
  // once: a list of n items has n / graph_items of them, launched in turn.
  void prepare_groups() {
    const std::uint32_t g_items = options_.graph_items;
    // Each list's branches wait at once, and its main stream holds the next group.
    const std::size_t waiting_streams = lists_.size() * (std::min(options_.gpu_lanes, g_items) + 1);
    if (waiting_streams > static_cast<std::size_t>(hardware_queues_))
      throw Error(
          std::to_string(waiting_streams) +
          " streams (L2fwdOptions::pipelines x (PacketWorkerOptions::gpu_lanes + 1)) would wait on the GPU "
          "at "
          "once, and CUDA_DEVICE_MAX_CONNECTIONS gives " +
          std::to_string(hardware_queues_) +
          " hardware queues: a wait would hold back other pipelines' work. Give fewer lanes or pipelines");
    if (*options_.launch == worker::LaunchMethod::Graph)
      check_resident(waiting_packet_kernel<Handler>, lists_.size() * std::min(options_.gpu_lanes, g_items));
    for (const CommList& l : lists_)
      if (l.capacity() % g_items != 0 || l.capacity() < kGroupsAhead * g_items)
        throw Error("a list of " + std::to_string(l.capacity()) + " items cannot be pre-posted " +
                    std::to_string(g_items) + " items at a time: give it a multiple of " +
                    std::to_string(g_items) + ", at least " + std::to_string(kGroupsAhead * g_items));
    if (*options_.launch == worker::LaunchMethod::Memops) {
      memops_ = &worker::cuda::StreamMemops::get();
      memops_captured_ = true;
    }
    const worker::cuda::Stream capture = worker::cuda::Stream::non_blocking();
    for (std::size_t p = 0; p < lists_.size(); ++p) {
      fork_.push_back(worker::cuda::Event::without_timing());
      join_.emplace_back();
      for (std::uint32_t b = 0; b < options_.gpu_lanes; ++b) {
        join_[p].push_back(worker::cuda::Event::without_timing());
        branches_.push_back(worker::cuda::Stream::non_blocking());
      }
    }
    graphs_.resize(lists_.size());
    events_.resize(lists_.size());
    for (std::size_t p = 0; p < lists_.size(); ++p) {
      for (std::uint32_t e = 0; e < kGroupsAhead; ++e)
        events_[p].push_back(worker::cuda::Event::without_timing());
      const std::uint32_t groups = lists_[p].capacity() / g_items;
      graphs_[p].resize(groups);
      for (std::uint32_t g = 0;
           g < groups && (*options_.launch == worker::LaunchMethod::Graph || memops_captured_); ++g) {
        std::optional<worker::cuda::GraphExec> exec =
            worker::cuda::try_capture_graph(capture.get(), [&](cudaStream_t s) { post_group(s, p, g); });
        if (!exec) {
          if (*options_.launch == worker::LaunchMethod::Graph)
            throw Error("capturing the graph mode's kernels failed");
          memops_captured_ = false;  // this driver does not capture stream waits: post them directly
          break;
        }
        graphs_[p][g] = std::move(*exec);
      }
    }
  }

  // Group g of list p into `stream`: its items' kernels (each after its wait in
  // memops), on up to gpu_lanes parallel branches that fork from `stream` and
  // join it again, so that the items of a group are handled at once.
  void post_group(cudaStream_t stream, std::size_t p, std::uint32_t g) {
    const CommList& l = lists_d_[p];
    const std::uint32_t lanes = std::min(options_.gpu_lanes, options_.graph_items);
    FERRY_CUDA_CHECK(cudaEventRecord(fork_[p].get(), stream));
    for (std::uint32_t b = 0; b < lanes; ++b)
      FERRY_CUDA_CHECK(cudaStreamWaitEvent(branch(p, b), fork_[p].get(), 0));
    for (std::uint32_t j = 0; j < options_.graph_items; ++j) {
      const std::uint32_t k = g * options_.graph_items + j;
      cudaStream_t s = branch(p, j % lanes);
      if (*options_.launch == worker::LaunchMethod::Graph) {
        waiting_packet_kernel<<<1, kItemThreads, 0, s>>>(l, k, options_.ns_per_packet, handler_);
      } else {
        // Wakes for READY (1) or ERROR (3), never for DONE (2) left from the item's last turn.
        const auto status_d = reinterpret_cast<CUdeviceptr>(&l.item(k).status);
        memops_->wait(s, status_d, 1, CU_STREAM_WAIT_VALUE_AND);
        released_packet_kernel<<<1, kItemThreads, 0, s>>>(l, k, options_.ns_per_packet, handler_);
      }
      FERRY_CUDA_CHECK(cudaGetLastError());
    }
    for (std::uint32_t b = 0; b < lanes; ++b) {
      FERRY_CUDA_CHECK(cudaEventRecord(join_[p][b].get(), branch(p, b)));
      FERRY_CUDA_CHECK(cudaStreamWaitEvent(stream, join_[p][b].get(), 0));
    }
  }

  // The branch streams of list p: its lanes' streams but the first, which the
  // group is launched into; branch 0 is a stream of its own per list.
  cudaStream_t branch(std::size_t p, std::uint32_t b) const {
    return branches_[p * options_.gpu_lanes + b].get();
  }

  void group_loop() {
    cudaSetDevice(gpu_.device());
    const std::size_t lists = lists_.size();
    std::vector<std::uint64_t> posted(lists, 0), finished(lists, 0);
    Backoff backoff(2000, 100, 20'000);
    try {
      while (running_.load(std::memory_order_relaxed)) {
        bool progress = false;
        for (std::size_t p = 0; p < lists; ++p) {
          while (finished[p] < posted[p]) {
            const cudaError_t st = cudaEventQuery(events_[p][finished[p] % kGroupsAhead].get());
            if (st == cudaErrorNotReady) break;
            FERRY_CUDA_CHECK(st);
            ++finished[p];
          }
          while (posted[p] - finished[p] < kGroupsAhead) {
            const auto g = static_cast<std::uint32_t>(posted[p] % graphs_[p].size());
            cudaStream_t stream = streams_[p * options_.gpu_lanes].get();
            if (graphs_[p][g])
              FERRY_CUDA_CHECK(cudaGraphLaunch(graphs_[p][g].get(), stream));
            else
              post_group(stream, p, g);
            FERRY_CUDA_CHECK(cudaEventRecord(events_[p][posted[p] % kGroupsAhead].get(), stream));
            ++posted[p];
            progress = true;
          }
        }
        if (progress) backoff.reset(); else backoff.idle();
      }
    } catch (const std::exception& e) {
      set_failure(e.what());
    }
  }

  void set_failure(const std::string& why) { failure_.set(why); }

  PacketWorkerOptions options_;
  Handler handler_;
  int hardware_queues_ = worker::cuda::ask_for_hardware_queues();  // before gpu_ makes the context
  worker::cuda::GpuContext gpu_;
  std::vector<CommList> lists_;    // host views
  std::vector<CommList> lists_d_;  // the same lists at the GPU's addresses
  CommList* list_array_d_ = nullptr;  // persistent: the lists, in device memory
  // The handles below are released, not destroyed, when the worker is stuck.
  std::vector<worker::cuda::Stream> streams_;   // gpu_lanes per list
  std::vector<worker::cuda::Stream> branches_;  // graph and memops: gpu_lanes per list
  std::vector<worker::cuda::Event> fork_;       // per list
  std::vector<std::vector<worker::cuda::Event>> join_;
  std::vector<std::vector<worker::cuda::GraphExec>> graphs_;  // empty where memops posts directly
  std::vector<std::vector<worker::cuda::Event>> events_;
  const worker::cuda::StreamMemops* memops_ = nullptr;
  bool memops_captured_ = false;
  std::atomic<bool> running_{false};
  std::thread dispatcher_;
  bool stuck_ = false;
  bool stopped_ = false;  // every stream drained
  mutable FirstFailure failure_;
};

}  // namespace ferry::packet::cuda

namespace ferry::packet {

template <typename Handler>
std::unique_ptr<PacketWorker> make_cuda_packet_worker(const PacketWorkerOptions& options, Handler handler) {
  return std::make_unique<cuda::GpuPacketWorker<Handler>>(options, handler);
}

}  // namespace ferry::packet

// Instantiates every GPU packet worker for Handler. Write it at global namespace scope.
#define FERRY_CUDA_PACKET_HANDLER(Handler)                                                                \
  template std::unique_ptr<::ferry::packet::PacketWorker> ferry::packet::make_cuda_packet_worker<Handler>( \
      const ::ferry::packet::PacketWorkerOptions&, Handler)
