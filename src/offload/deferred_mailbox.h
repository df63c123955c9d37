#pragma once
// Where deferred responses (Framing::Deferred) come back to their server
// thread: any thread completes one, the thread that owns the connection picks
// it up in its loop and builds it there. Internal to the server.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ferry/offload/framing.h"

namespace ferry::offload {

class DeferredMailbox;

// One deferred response of one connection (slot and generation name it, as
// the channel's cookies do).
class PendingResponse final : public Framing::Deferred, public std::enable_shared_from_this<PendingResponse> {
 public:
  PendingResponse(std::shared_ptr<DeferredMailbox> mailbox, std::uint32_t slot, std::uint32_t generation)
      : mailbox_(std::move(mailbox)), slot_(slot), generation_(generation) {}

  void complete(std::function<Framing::Response()> build) override;
  bool abandoned() const noexcept override { return abandoned_.load(std::memory_order_relaxed); }
  void abandon() noexcept { abandoned_.store(true, std::memory_order_relaxed); }

  std::uint32_t slot() const noexcept { return slot_; }
  std::uint32_t generation() const noexcept { return generation_; }

 private:
  std::shared_ptr<DeferredMailbox> mailbox_;
  std::uint32_t slot_;
  std::uint32_t generation_;
  std::atomic<bool> abandoned_{false};
  std::atomic<bool> completed_{false};
};

class DeferredMailbox {
 public:
  struct Done {
    std::shared_ptr<PendingResponse> pending;
    std::function<Framing::Response()> build;
  };

  // wake_fd: an eventfd the owning thread's epoll watches.
  explicit DeferredMailbox(int wake_fd) : wake_fd_(wake_fd) {}

  void post(Done done);
  // The owning thread: takes what arrived (cheap when nothing did). It must
  // read wake_fd before it takes, or a post in between would go unannounced.
  bool has_mail() const noexcept { return has_mail_.load(std::memory_order_acquire); }
  std::vector<Done> take();
  // The owner is going away: later posts are dropped, and the wake fd is not touched.
  void close();

 private:
  std::mutex mutex_;
  std::vector<Done> items_;
  std::atomic<bool> has_mail_{false};
  bool closed_ = false;
  int wake_fd_;
};

}  // namespace ferry::offload
