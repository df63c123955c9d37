#pragma once
// A few persistent threads that lend themselves to one caller at a time, so a
// call can split its work: try_run(parts, fn) runs fn(0) on the caller's thread
// and fn(1) .. fn(parts - 1) on helpers, and returns when every part is done.
// Why persistent: a thread made per call costs tens of microseconds, and a file
// tier get of 16 MiB from the page cache takes about three milliseconds.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
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

  // Returns false, having called nothing, when another caller holds the
  // helpers or parts is more than helpers() + 1. An exception from any part is
  // rethrown here (the first one), after every part has finished.
  bool try_run(unsigned parts, const std::function<void(unsigned)>& fn);

 private:
  void loop(unsigned helper);
  void stop_and_join() noexcept;

  std::mutex in_use_;  // held by the caller whose parts run

  std::mutex mu_;  // guards what follows
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(unsigned)>* fn_ = nullptr;
  std::uint64_t round_ = 0;  // bumped per try_run: tells helpers there is work
  unsigned parts_ = 0;
  unsigned running_ = 0;  // helpers' parts not yet finished
  std::exception_ptr error_;
  bool stop_ = false;

  std::vector<std::thread> threads_;
};

}  // namespace ferry::xfer::store
