#pragma once
// The batched launch methods of the DPDK gpudev article, on Ferry's channels:
//
//   burst   a dispatcher thread gathers requests and launches one kernel per batch;
//   graph   as burst, but each launch replays a CUDA graph captured at start-up;
//   memops  each batch slot is pre-posted as cuStreamWaitValue32 + kernel +
//           cuStreamWriteValue32: the dispatcher only fills a descriptor and flips a flag.
//
// The kernel publishes each response itself (batch_kernel.cuh); the stream
// then writes the batch's done word (cuStreamWriteValue32) or records its
// event (mark_completion says which). A second thread, the completer, waits
// for each batch in order and then returns the requests' slots to the server
// (the request tail) and counts progress; in memops it also re-arms the
// batch's slot. Made for a handler type by
// handler_backend.cuh.
//
// The streams, events, graph capture and stream waits are the packet path's
// too (cuda_handles.h, driver_api.h); what is here is what differs: the
// dispatch and completion loops over the request rings, and kernels that read
// requests from one ring and publish responses in another.

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/arena_control.h"
#include "ferry/core/detail/backoff.h"
#include "ferry/core/detail/first_failure.h"
#include "ferry/worker/backend.h"
#include "ferry/worker/cuda/batch_kernel.cuh"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "ferry/worker/cuda/driver_api.h"
#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/cuda/stream_drain.h"
#include "ferry/worker/handlers.h"

namespace ferry::worker::cuda {

template <typename Handler>
class BatchedBackend final : public Backend {
  static constexpr std::uint32_t kSlots = 64;  // batches in flight at most

 public:
  BatchedBackend(const WorkerOptions& options, Handler handler)
      : options_(options), handler_(handler), gpu_(options.gpu) {
    if (options_.burst == 0 || options_.burst > 4096) throw Error("WorkerOptions::burst must be in 1..4096");
  }

  ~BatchedBackend() override {
    try {
      stop();
    } catch (...) {
    }
    // The events and graphs are destroyed with the object in any case.
    if (stream_busy_) {  // leaked on purpose: process exit reclaims them after the GPU lets go
      stream_.release();
      return;
    }
    if (descs_h_ != nullptr) cudaFreeHost(descs_h_);
    if (flags_h_ != nullptr) cudaFreeHost(flags_h_);
  }

  void prepare(Arena& arena) override {
    gpu_.register_arena(arena);
    stream_ = Stream::non_blocking();
    FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&descs_h_), sizeof(PostedBatch) * kSlots, cudaHostAllocMapped));
    FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&descs_d_), descs_h_, 0));
    blocks_ = (options_.burst + kMessagesPerBlock - 1) / kMessagesPerBlock;
    next_.assign(arena.num_channels(), 0);
    first_seen_.assign(arena.num_channels(), {});
    for (std::uint32_t c = 0; c < arena.num_channels(); ++c) next_[c] = arena.channel(c).requests.start_index();

    events_.clear();
    for (std::uint32_t s = 0; s < kSlots; ++s) events_.push_back(Event::without_timing());
    prepare_flags();
    if (options_.launch == LaunchMethod::Graph) capture_graphs();
    // Warm-up: an empty batch, so the first request does not pay module loading.
    launch_kernel_by_value({0, 0, 0, 0}, 1);
    if (options_.launch == LaunchMethod::Burst) launch_kernel_with_messages({0, 0, 0, 0});
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }

  void start() override {
    if (options_.launch == LaunchMethod::Memops)
      for (std::uint32_t s = 0; s < kSlots; ++s) post_memops_slot(s, 1);
    running_.store(true);
    dispatcher_ = std::thread([this] { dispatch_loop(); });
    completer_ = std::thread([this] { complete_loop(); });
  }

  void stop() override {
    if (!running_.exchange(false)) return;
    dispatcher_.join();
    completer_.join();
    if (options_.launch == LaunchMethod::Memops) release_posted_memops();
    const cudaStream_t stream = stream_.get();
    const StreamDrain d = drain_streams({&stream, 1}, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (d.timed_out) {
      set_failure("the GPU stream did not drain within 5 s of stopping");
      stream_busy_ = true;  // the GPU may still read the descriptors: never free them
    } else if (!d.error.empty()) {
      set_failure("the GPU stream failed: " + d.error);
    }
  }

  bool stuck() const override { return stream_busy_; }

  std::string failure() const override {
    if (failure_.failed()) return failure_.get();
    return worker_error_text(arena_control::first_error(*gpu_.arena()->header()));
  }

  std::uint64_t handled() const override { return handled_.load(std::memory_order_relaxed); }

  std::string describe() const override {
    return std::string("cuda ") + to_string(options_.launch) + " on " + gpu_.describe() + ", bursts of up to " +
           std::to_string(options_.burst) + " (or " + std::to_string(options_.burst_timeout_us) +
           " us), handler " + handler_name<Handler>();
  }

 private:
  void launch_kernel_by_value(const BatchDesc& d, unsigned blocks) {
    batch_kernel_by_value<<<blocks, kBatchThreads, 0, stream_.get()>>>(gpu_.channels_d(), d, gpu_.error_d(), handler_);
    FERRY_CUDA_CHECK(cudaGetLastError());
  }

  // A batch of one block's messages, launched with them (LaunchedBatch).
  void launch_kernel_with_messages(const BatchDesc& d) {
    LaunchedBatch b{};
    b.d = d;
    copy_messages(d, b.messages, kMessagesPerBlock);
    batch_kernel_launched<<<1, kBatchThreads, 0, stream_.get()>>>(gpu_.channels_d(), b, gpu_.error_d(),
                                                                  handler_);
    FERRY_CUDA_CHECK(cudaGetLastError());
  }

  // The batch's first messages (at most max), as the kernel takes them with it.
  void copy_messages(const BatchDesc& d, InlineMessage* out, std::uint32_t max) const {
    const Channel ch = gpu_.arena()->channel(d.channel);
    for (std::uint32_t i = 0; i < d.count && i < max; ++i)  // published: available() acquired their seqs
      copy_inline_message(out[i], *ch.requests.desc(d.first + i), ch.requests.data(d.first + i));
  }

  void capture_graphs() {
    const Stream capture = Stream::non_blocking();
    graphs_.clear();
    for (std::uint32_t s = 0; s < kSlots; ++s)
      graphs_.push_back(capture_graph(capture.get(), [&](cudaStream_t stream) {
        batch_kernel_by_ref<<<blocks_, kBatchThreads, 0, stream>>>(gpu_.channels_d(), descs_d_ + s, gpu_.error_d(),
                                                                    handler_);
      }));
  }

  void prepare_flags() {
    memops_ = &StreamMemops::get();
    // Per slot: go (memops: set by the dispatcher, waited on by the stream) and
    // done (written by the stream after the kernel, polled by the completer).
    FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags_h_), sizeof(std::uint32_t) * 2 * kSlots,
                                   cudaHostAllocMapped));
    std::memset(flags_h_, 0, sizeof(std::uint32_t) * 2 * kSlots);
    FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flags_d_), flags_h_, 0));
  }

  std::uint32_t* go_h(std::uint32_t s) const { return flags_h_ + s; }
  std::uint32_t* done_h(std::uint32_t s) const { return flags_h_ + kSlots + s; }
  CUdeviceptr go_d(std::uint32_t s) const { return reinterpret_cast<CUdeviceptr>(flags_d_ + s); }
  CUdeviceptr done_d(std::uint32_t s) const { return reinterpret_cast<CUdeviceptr>(flags_d_ + kSlots + s); }

  // After a batch's kernel, the stream sets its slot's done word to the slot's
  // use number (the write's default memory barrier makes the kernel's writes
  // visible first); the completer polls the word in host memory. Counting
  // uses, rather than setting and resetting a flag, saves the stream a write a
  // batch.
  void write_done(std::uint32_t s, std::uint32_t use) {
    memops_->write(stream_.get(), done_d(s), use, CU_STREAM_WRITE_VALUE_DEFAULT);
  }

  // How the completer learns that burst's or graph's batch n is done. One
  // launched onto an idle GPU (a lone request, the first of a burst) has the
  // stream write its done word: the completer polling an event instead, with
  // cudaEventQuery, delayed the next launch by 0.4-0.9 us. One queued behind
  // others records an event, since a done write after every batch cost bursts
  // of 32 over a quarter of their rate (docs/bench/launch.md has both).
  void mark_completion(std::uint32_t s, std::uint64_t n, bool gpu_was_idle) {
    done_by_word_[s] = gpu_was_idle;
    if (gpu_was_idle)
      write_done(s, slot_use(n));
    else
      FERRY_CUDA_CHECK(cudaEventRecord(events_[s].get(), stream_.get()));
  }

  // Pre-posts slot s for its use number `use` (1, 2, ...): wait for go == use,
  // run the kernel, then write done.
  void post_memops_slot(std::uint32_t s, std::uint32_t use) {
    const cudaStream_t stream = stream_.get();
    armed_use_[s] = use;
    memops_->wait(stream, go_d(s), use, CU_STREAM_WAIT_VALUE_EQ);
    batch_kernel_by_ref<<<blocks_, kBatchThreads, 0, stream>>>(gpu_.channels_d(), descs_d_ + s, gpu_.error_d(),
                                                               handler_);
    FERRY_CUDA_CHECK(cudaGetLastError());
    write_done(s, use);
  }

  // At stop, every pre-posted slot still waits for its flag: release each with
  // an empty batch so the stream drains.
  void release_posted_memops() {
    for (std::uint32_t s = 0; s < kSlots; ++s) {
      descs_h_[s].d = {0, 0, 0, 0};
      std::atomic_ref<std::uint32_t>(*go_h(s)).store(armed_use_[s], std::memory_order_release);
    }
  }

  // The batch and its first messages, for a kernel that reads them from slot s
  // (batch_kernel.cuh, PostedBatch).
  void post_batch(std::uint32_t s, const BatchDesc& d) {
    PostedBatch& p = descs_h_[s];
    p.d = d;
    copy_messages(d, p.messages, kInlineRequests);
  }

  // Batch number n (slot n mod kSlots).
  void launch(std::uint64_t n, const BatchDesc& d, bool gpu_was_idle) {
    const auto s = static_cast<std::uint32_t>(n % kSlots);
    switch (options_.launch) {
      case LaunchMethod::Burst:
        if (d.count <= kMessagesPerBlock)
          launch_kernel_with_messages(d);
        else
          launch_kernel_by_value(d, (d.count + kMessagesPerBlock - 1) / kMessagesPerBlock);
        mark_completion(s, n, gpu_was_idle);
        break;
      case LaunchMethod::Graph:
        post_batch(s, d);
        FERRY_CUDA_CHECK(cudaGraphLaunch(graphs_[s].get(), stream_.get()));
        mark_completion(s, n, gpu_was_idle);
        break;
      case LaunchMethod::Memops:
        post_batch(s, d);
        // Release orders the batch before the flag the stream waits on.
        std::atomic_ref<std::uint32_t>(*go_h(s)).store(slot_use(n), std::memory_order_release);
        break;
      default: break;
    }
  }

  // Which use of its slot batch n is: 1 for the first kSlots batches, then 2, ...
  static std::uint32_t slot_use(std::uint64_t n) { return static_cast<std::uint32_t>(n / kSlots + 1); }

  // Published requests waiting in channel c beyond what was dispatched, up to max.
  std::uint32_t available(std::uint32_t c, std::uint32_t max) const {
    const Channel ch = gpu_.arena()->channel(c);
    std::uint32_t m = 0;
    // A1: acquire pairs with the server's release of seq (R1).
    while (m < max && std::atomic_ref<std::uint32_t>(ch.requests.desc(next_[c] + m)->seq)
                              .load(std::memory_order_acquire) == next_[c] + m + 1)
      ++m;
    return m;
  }

  // Whether the GPU has finished every batch dispatched so far: the last one's
  // last response is published (the kernel publishes, so this is exact the moment
  // it is done, where the completer would see it only after its next poll).
  bool gpu_idle() const {
    if (!last_response_) return true;
    const Channel ch = gpu_.arena()->channel(last_response_->first);
    const std::uint32_t k = last_response_->second;
    // A later lap of the ring also means published: compare as a signed distance.
    const std::uint32_t seq =
        std::atomic_ref<std::uint32_t>(ch.responses.desc(k)->seq).load(std::memory_order_acquire);
    return static_cast<std::int32_t>(seq - (k + 1)) >= 0;
  }

  void dispatch_loop() {
    cudaSetDevice(gpu_.device());  // a new thread's current device is 0, not necessarily --gpu's
    Backoff backoff(2000, 100, 20'000);
    const auto timeout = std::chrono::microseconds(options_.burst_timeout_us);
    const std::uint32_t channels = gpu_.arena()->num_channels();
    const std::uint32_t max_batch = std::min<std::uint32_t>(options_.burst, gpu_.arena()->header()->ring_capacity);
    try {
      while (running_.load(std::memory_order_relaxed)) {
        bool progress = false;
        for (std::uint32_t c = 0; c < channels; ++c) {
          const std::uint32_t m = available(c, max_batch);
          if (m == 0) continue;
          const std::uint64_t in_flight = dispatched_.load(std::memory_order_relaxed) -
                                          completed_.load(std::memory_order_acquire);
          if (in_flight >= kSlots) break;
          const auto now = std::chrono::steady_clock::now();
          if (first_seen_[c] == std::chrono::steady_clock::time_point{}) first_seen_[c] = now;
          // An idle GPU gets the batch at once (lowest latency); a busy one gets
          // fuller batches (fewer launches).
          const bool idle = gpu_idle();
          if (m < max_batch && !idle && now - first_seen_[c] < timeout) continue;
          const std::uint64_t n = dispatched_.load(std::memory_order_relaxed);
          const auto s = static_cast<std::uint32_t>(n % kSlots);
          const BatchDesc d{c, next_[c], m, 0};
          batches_[s] = d;
          launch(n, d, idle);
          // Release hands batches_[s] to the completer (its acquire of dispatched_).
          dispatched_.store(n + 1, std::memory_order_release);
          next_[c] += m;
          last_response_ = {c, next_[c] - 1};
          first_seen_[c] = {};
          progress = true;
        }
        if (progress) backoff.reset(); else backoff.idle();
      }
    } catch (const Error& e) {
      set_failure(e.what());
    }
  }

  bool batch_complete(std::uint64_t n) {
    const auto s = static_cast<std::uint32_t>(n % kSlots);
    if (options_.launch == LaunchMethod::Memops || done_by_word_[s])
      // Acquire pairs with the stream's done write, which follows the kernel.
      return std::atomic_ref<std::uint32_t>(*done_h(s)).load(std::memory_order_acquire) == slot_use(n);
    const cudaError_t st = cudaEventQuery(events_[s].get());
    if (st == cudaErrorNotReady) return false;
    FERRY_CUDA_CHECK(st);
    return true;
  }

  // A done word never comes from a stream that failed (a kernel's fault): a
  // completer that has waited long enough to sleep asks the stream, so that
  // the failure is reported rather than waited on.
  void check_stream() const {
    const cudaError_t st = cudaStreamQuery(stream_.get());
    if (st != cudaErrorNotReady) FERRY_CUDA_CHECK(st);
  }

  void complete_loop() {
    cudaSetDevice(gpu_.device());  // memops re-arms its slots from here, and every method queries the stream
    Backoff backoff(2000, 100, 20'000);
    try {
      for (;;) {
        const std::uint64_t done = completed_.load(std::memory_order_relaxed);
        // running_ before dispatched_: a batch dispatched just before stop() is
        // then seen by the reload and published, never dropped.
        const bool running = running_.load(std::memory_order_acquire);
        if (done == dispatched_.load(std::memory_order_acquire)) {
          if (!running) break;
          backoff.idle();
          continue;
        }
        const auto s = static_cast<std::uint32_t>(done % kSlots);
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!batch_complete(done)) {
          // A batch still on the GPU at stop gets 5 s, so a hung kernel cannot hang stop().
          if (!running_.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() > give_up) {
            set_failure("a GPU batch did not complete within 5 s of stopping");
            return;
          }
          if (backoff.idle()) check_stream();
        }
        backoff.reset();
        // A kernel that flagged an error left its response unpublished: return no
        // more slots; the orchestrator reads the error through failure() and shuts down.
        if (arena_control::first_error(*gpu_.arena()->header()) != kNoError) {
          set_failure("a GPU batch reported an error; its requests' slots are no longer returned");
          return;
        }
        release_requests(batches_[s]);
        // Re-arm the memops slot after the release, so the re-posting (three driver
        // calls) delays no credit; the stream still has the other slots posted.
        if (options_.launch == LaunchMethod::Memops) post_memops_slot(s, slot_use(done) + 1);
        completed_.store(done + 1, std::memory_order_release);
      }
    } catch (const Error& e) {
      set_failure(e.what());
    }
  }

  // The kernel has published the batch's responses; its requests have been read.
  void release_requests(const BatchDesc& d) {
    const Channel ch = gpu_.arena()->channel(d.channel);
    // R2: these requests have been read; pairs with the server's acquire of tail.
    std::atomic_ref<std::uint32_t>(ch.requests.layout()->consumer.tail)
        .store(d.first + d.count, std::memory_order_release);
    const std::uint64_t total = handled_.fetch_add(d.count, std::memory_order_relaxed) + d.count;
    arena_control::publish_handled(*ch.header, total);
  }

  void set_failure(const std::string& why) { failure_.set(why); }

  WorkerOptions options_;
  Handler handler_;
  GpuContext gpu_;
  Stream stream_;            // released, not destroyed, when stream_busy_
  bool stream_busy_ = false;  // stop() timed out with work still on the stream
  unsigned blocks_ = 1;
  PostedBatch* descs_h_ = nullptr;
  PostedBatch* descs_d_ = nullptr;
  std::uint32_t armed_use_[kSlots] = {};  // memops: the use each slot's posted wait expects
  // burst and graph: whether slot s's batch signals its end by its done word
  // (or by its event); written by the dispatcher before dispatched_'s release.
  bool done_by_word_[kSlots] = {};
  std::vector<Event> events_;
  std::uint32_t* flags_h_ = nullptr;
  std::uint32_t* flags_d_ = nullptr;
  std::vector<GraphExec> graphs_;
  const StreamMemops* memops_ = nullptr;

  std::vector<std::uint32_t> next_;  // dispatcher only
  std::optional<std::pair<std::uint32_t, std::uint32_t>> last_response_;  // dispatcher only: channel, index
  std::vector<std::chrono::steady_clock::time_point> first_seen_;
  BatchDesc batches_[kSlots] = {};
  std::atomic<std::uint64_t> dispatched_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> handled_{0};
  std::atomic<bool> running_{false};
  std::thread dispatcher_;
  std::thread completer_;
  FirstFailure failure_;
};

}  // namespace ferry::worker::cuda
