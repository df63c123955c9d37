#pragma once
// The CPU backend: one thread per channel runs a handler of the caller's type.
//
//   struct Upper { FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const; };
//   auto backend = ferry::worker::make_cpu_backend(options, Upper{});
//
// CpuWorkers (compiled into ferry::worker) owns the threads, their pinning,
// stopping and the sticky first failure; the per-message loop below is a
// template, so the handler is inlined into it.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/arena.h"
#include "ferry/core/arena_control.h"
#include "ferry/core/detail/backoff.h"
#include "ferry/core/slot_ring.h"
#include "ferry/worker/backend.h"
#include "ferry/worker/handlers.h"

namespace ferry::worker {

class CpuWorkers : public Backend {
 public:
  explicit CpuWorkers(const WorkerOptions& options, const char* handler_name)
      : options_(options), handler_name_(handler_name) {}
  ~CpuWorkers() override;

  void prepare(Arena& arena) override { arena_ = &arena; }
  void start() override;
  void stop() override;
  std::string failure() const override;
  std::uint64_t handled() const override;
  std::string describe() const override;
  bool stuck() const override { return stuck_; }

 protected:
  // Serves one channel until the arena's stop flag is set; runs on its own thread.
  virtual void serve(std::uint32_t channel_index) = 0;
  // Records the first failure; later ones are dropped.
  void fail(const std::string& why);
  Arena* arena() const { return arena_; }

 private:
  WorkerOptions options_;
  const char* handler_name_;
  Arena* arena_ = nullptr;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> exited_{0};  // worker threads that have returned
  bool stuck_ = false;                  // stop() left threads behind
  mutable std::mutex failure_mutex_;    // control path only: taken once per failure
  std::string failure_;                 // the first failure; empty while healthy
};

template <typename Handler>
class CpuBackend final : public CpuWorkers {
 public:
  CpuBackend(const WorkerOptions& options, Handler handler)
      : CpuWorkers(options, handler_name<Handler>()), handler_(handler) {}
  // Joins the threads here, while serve() can still be called through this type.
  ~CpuBackend() override { stop(); }

 private:
  // How many requests a worker answers before it publishes the request tail and
  // its progress counter: fewer shared-memory stores, same latency (it also
  // publishes whenever the ring runs empty).
  static constexpr std::uint32_t kPublishEvery = 32;
  // The worker error a CPU worker reports (ArenaHeader::worker_error).
  static constexpr std::uint32_t kCreditRuleBroken = 1;

  void serve(std::uint32_t channel_index) override {
    ArenaHeader* header = arena()->header();
    const Channel ch = arena()->channel(channel_index);
    RingConsumer requests(ch.requests);
    RingProducer responses(ch.responses);
    std::uint64_t handled = 0;
    std::uint32_t unpublished = 0;
    Backoff backoff;

    auto publish_progress = [&] {
      requests.release();
      arena_control::publish_handled(*ch.header, handled);
      unpublished = 0;
    };

    while (!arena_control::stop_requested(*header)) {
      SlotMessage msg;
      if (!requests.try_peek(&msg)) {
        if (unpublished != 0) publish_progress();
        backoff.idle();
        continue;
      }
      backoff.reset();
      MutableByteView out = responses.try_claim();
      if (out.data == nullptr) {
        // The server keeps no more requests in flight than the response ring
        // holds, so a full response ring means the protocol was broken.
        fail("channel " + std::to_string(channel_index) +
             ": response ring full with a request pending (server broke the credit rule)");
        (void)arena_control::report_error(*header, kCreditRuleBroken);
        return;
      }
      const std::size_t len = handler_(msg.payload, out);
      responses.publish(static_cast<std::uint32_t>(len), msg.cookie);
      requests.advance();
      ++handled;
      if (++unpublished == kPublishEvery) publish_progress();
    }
    publish_progress();
  }

  Handler handler_;
};

// A CPU backend serving `handler` (any handler type, see handlers.h).
template <typename Handler>
std::unique_ptr<Backend> make_cpu_backend(const WorkerOptions& options, Handler handler) {
  return std::make_unique<CpuBackend<Handler>>(options, handler);
}

}  // namespace ferry::worker
