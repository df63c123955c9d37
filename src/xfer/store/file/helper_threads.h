#pragma once
// A few persistent threads that lend themselves to callers, so a call can
// split its work: try_run(parts, fn) runs fn(0) on the caller's thread and
// fn(1) .. fn(parts - 1) on idle helpers, and returns when every part is done.
// Several callers may hold helpers at once, each its own.
// Why persistent: a thread made per call costs tens of microseconds, and a file
// tier get of 16 MiB from the page cache takes about three milliseconds.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ferry::xfer::store {

class HelperThreads {
 public:
  explicit HelperThreads(unsigned helpers);
  ~HelperThreads();  // joins the helpers
  HelperThreads(const HelperThreads&) = delete;
  HelperThreads& operator=(const HelperThreads&) = delete;

  unsigned helpers() const { return static_cast<unsigned>(threads_.size()); }
  // Helpers lent out now (a hint: it may change at once).
  unsigned busy() const;

  // Returns false, having called nothing, when fewer than parts - 1 helpers
  // are idle (parts more than helpers() + 1, or 0, never runs). An exception
  // from any part is rethrown here (the first one), after every part has
  // finished.
  bool try_run(unsigned parts, const std::function<void(unsigned)>& fn);

 private:
  // One try_run's parts on helpers.
  struct Call {
    const std::function<void(unsigned)>* fn = nullptr;
    unsigned running = 0;  // its helpers' parts not yet finished
    std::exception_ptr error;
    std::condition_variable done;
  };
  // A helper's state, under mu_: the call and part it was given, if any.
  struct Slot {
    Call* call = nullptr;
    unsigned part = 0;
    std::condition_variable wake;
  };

  void loop(Slot& slot);
  void stop_and_join() noexcept;

  mutable std::mutex mu_;  // guards the slots, idle_ and stop_
  std::vector<std::unique_ptr<Slot>> slots_;
  unsigned idle_ = 0;
  bool stop_ = false;

  std::vector<std::thread> threads_;
};

}  // namespace ferry::xfer::store
