#include "worker/cpu_backend.h"

#include <atomic>
#include <chrono>

#include "core/log.h"
#include "ferry/core/backoff.h"
#include "ferry/core/net.h"

namespace ferry::worker {
namespace {

// How many requests a worker answers before it publishes the request tail and
// its progress counter: fewer shared-memory stores, same latency (it also
// publishes whenever the ring runs empty).
constexpr std::uint32_t kPublishEvery = 32;

bool stop_requested(const ArenaHeader* h) {
  // Pairs with the orchestrator's release store of stop; nothing else is read
  // through it, so relaxed would do, but acquire documents the hand-off.
  return std::atomic_ref<const std::uint32_t>(h->stop).load(std::memory_order_acquire) != 0;
}

}  // namespace

template <typename Handler>
void CpuBackend::serve(std::uint32_t channel_index, Handler handler) {
  ArenaHeader* header = arena_->header();
  const Channel ch = arena_->channel(channel_index);
  RingConsumer requests(ch.requests);
  RingProducer responses(ch.responses);
  std::uint64_t handled = 0;
  std::uint32_t unpublished = 0;
  Backoff backoff;

  auto publish_progress = [&] {
    requests.release();
    std::atomic_ref<std::uint64_t>(ch.header->handled).store(handled, std::memory_order_relaxed);
    unpublished = 0;
  };

  while (!stop_requested(header)) {
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
      std::string why = "channel " + std::to_string(channel_index) +
                        ": response ring full with a request pending (server broke the credit rule)";
      fail(why);
      std::atomic_ref<std::uint32_t>(header->worker_error).store(1, std::memory_order_release);
      return;
    }
    const std::size_t len = handler(msg.payload, out);
    responses.publish(static_cast<std::uint32_t>(len), msg.cookie);
    requests.advance();
    ++handled;
    if (++unpublished == kPublishEvery) publish_progress();
  }
  publish_progress();
}

void CpuBackend::start() {
  if (arena_ == nullptr) throw Error("CPU backend started before prepare()");
  const std::uint32_t n = arena_->num_channels();
  for (std::uint32_t i = 0; i < n; ++i) {
    threads_.emplace_back([this, i] {
      if (!options_.cpus.empty()) {
        try {
          net::pin_current_thread(options_.cpus[i % options_.cpus.size()]);
        } catch (const Error& e) {
          log::sdk().warn("worker {}: {}; running unpinned", i, e.what());
        }
      }
      visit_handler(options_.handler, [&](auto handler) { serve(i, handler); });
      ++exited_;  // stop() waits for this, not for join(): a handler that never returns must not hang it
    });
  }
}

void CpuBackend::stop() {
  if (arena_ != nullptr && !threads_.empty()) {
    // Pairs with stop_requested()'s acquire in every worker.
    std::atomic_ref<std::uint32_t>(arena_->header()->stop).store(1, std::memory_order_release);
  }
  // Bounded: a thread stuck in a handler (a hang) is left behind with a logged
  // failure, and the process exits around it, as it would around a hung kernel.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (exited_.load() < threads_.size() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (exited_.load() < threads_.size()) {
    fail(std::to_string(threads_.size() - exited_.load()) + " worker thread(s) did not stop within 5 s of the stop flag");
    for (auto& t : threads_) t.detach();
    stuck_ = true;
  } else {
    for (auto& t : threads_) t.join();
  }
  threads_.clear();
  exited_ = 0;
}

void CpuBackend::fail(const std::string& why) {
  std::lock_guard lock(failure_mutex_);
  if (failure_.empty()) failure_ = why;
}

std::string CpuBackend::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

std::uint64_t CpuBackend::handled() const {
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < arena_->num_channels(); ++i)
    total += std::atomic_ref<std::uint64_t>(arena_->channel(i).header->handled)
                 .load(std::memory_order_relaxed);
  return total;
}

std::string CpuBackend::describe() const {
  return std::string("cpu backend, ") + std::to_string(arena_ ? arena_->num_channels() : 0) +
         " worker thread(s), handler " + to_string(options_.handler);
}

}  // namespace ferry::worker
