#pragma once
// Registrations that touch an application's memory (a probe of its pages, a
// pread of its shared file) can wait as long as the application likes: pages
// behind a hung FUSE or NFS mapping, a file whose server went away. The event
// loop never waits on them. Each such open runs on a thread of its own, and
// the session answers when it finishes or, once its deadline passes, with an
// error (session.cpp). A thread that never comes back is abandoned to the
// kernel; at most max_threads are out at once, so a peer that hangs them all
// gets a clear refusal, and the agent goes on serving everything else.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "xfer/agent/region.h"

namespace ferry::xfer::agent {

class RegionOpener {
 public:
  // One open's outcome, shared by the session and the thread doing it.
  struct Ticket {
    std::mutex mu;
    bool done = false;
    std::shared_ptr<ImportedRegion> region;  // set when it opened
    std::string error;                       // why not, otherwise
  };

  explicit RegionOpener(std::size_t max_threads) : max_(max_threads) {}
  // Runs open() on a new thread and calls on_done() there once the ticket has
  // its outcome (an Error thrown by open() becomes the ticket's error). Both
  // must own what they use: the thread may outlive the opener and the
  // session. Null, and nothing run, when max_threads opens are out already.
  std::shared_ptr<Ticket> start(std::function<std::shared_ptr<ImportedRegion>()> open,
                                std::function<void()> on_done);
  // Opens still running, hung ones included.
  std::size_t out() const noexcept { return out_->load(std::memory_order_relaxed); }
  std::size_t max_threads() const noexcept { return max_; }

 private:
  const std::size_t max_;
  // Counted down by the threads, which may outlive this object.
  std::shared_ptr<std::atomic<std::size_t>> out_ = std::make_shared<std::atomic<std::size_t>>(0);
};

// Lets threads that may outlive the session loop ask it to look at a session:
// after detach(), wake() does nothing.
class LoopWaker {
 public:
  void attach(std::function<void(std::uint64_t session)> fn);
  void detach() noexcept;
  void wake(std::uint64_t session);

 private:
  std::mutex mu_;
  std::function<void(std::uint64_t)> fn_;
};

}  // namespace ferry::xfer::agent
