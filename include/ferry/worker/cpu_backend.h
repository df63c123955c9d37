#pragma once
// The CPU backend: worker threads run a handler of the caller's type, one
// thread per channel or, with WorkerOptions::threads, fewer threads that each
// serve several channels in turn.
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
  // Serves these channels until the arena's stop flag is set; runs on its own thread.
  virtual void serve(const std::vector<std::uint32_t>& channels) = 0;
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

  struct Lane {
    std::uint32_t index;
    ChannelHeader* header;
    RingConsumer requests;
    RingProducer responses;
    std::uint64_t handled = 0;
  };

  void serve(const std::vector<std::uint32_t>& channels) override {
    ArenaHeader* header = arena()->header();
    std::vector<Lane> lanes;
    for (std::uint32_t c : channels) {
      const Channel ch = arena()->channel(c);
      lanes.push_back(Lane{c, ch.header, RingConsumer(ch.requests), RingProducer(ch.responses)});
    }
    Backoff backoff;
    while (!arena_control::stop_requested(*header)) {
      bool any = false;
      for (Lane& lane : lanes) {
        const int n = serve_burst(lane);
        if (n < 0) {
          (void)arena_control::report_error(*header, kCreditRuleBroken);
          return;
        }
        any |= n > 0;
      }
      if (any)
        backoff.reset();
      else
        backoff.idle();
    }
  }

  // Answers up to kPublishEvery requests of one channel, then publishes the
  // request tail and the progress counter. Returns how many, or -1 when the
  // server broke the credit rule.
  int serve_burst(Lane& lane) {
    SlotMessage msg;
    std::uint32_t n = 0;
    while (n < kPublishEvery && lane.requests.try_peek(&msg)) {
      MutableByteView out = lane.responses.try_claim();
      if (out.data == nullptr) {
        // The server keeps no more requests in flight than the response ring
        // holds, so a full response ring means the protocol was broken.
        fail("channel " + std::to_string(lane.index) +
             ": response ring full with a request pending (server broke the credit rule)");
        return -1;
      }
      const std::size_t len = handler_(msg.payload, out);
      lane.responses.publish(static_cast<std::uint32_t>(len), msg.cookie);
      lane.requests.advance();
      ++n;
    }
    if (n > 0) {
      lane.handled += n;
      lane.requests.release();
      arena_control::publish_handled(*lane.header, lane.handled);
    }
    return static_cast<int>(n);
  }

  Handler handler_;
};

// A CPU backend serving `handler` (any handler type, see handlers.h).
template <typename Handler>
std::unique_ptr<Backend> make_cpu_backend(const WorkerOptions& options, Handler handler) {
  return std::make_unique<CpuBackend<Handler>>(options, handler);
}

}  // namespace ferry::worker
