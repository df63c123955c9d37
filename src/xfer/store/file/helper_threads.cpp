#include "xfer/store/file/helper_threads.h"

namespace ferry::xfer::store {

HelperThreads::HelperThreads(unsigned helpers) {
  threads_.reserve(helpers);
  try {
    for (unsigned h = 0; h < helpers; ++h) threads_.emplace_back([this, h] { loop(h); });
  } catch (...) {
    stop_and_join();  // the ones already started (std::thread may throw when out of threads)
    throw;
  }
}

HelperThreads::~HelperThreads() { stop_and_join(); }

void HelperThreads::stop_and_join() noexcept {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

bool HelperThreads::try_run(unsigned parts, const std::function<void(unsigned)>& fn) {
  if (parts == 0 || parts > helpers() + 1) return false;
  std::unique_lock hold(in_use_, std::try_to_lock);
  if (!hold.owns_lock()) return false;
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    parts_ = parts;
    running_ = parts - 1;
    error_ = nullptr;
    ++round_;
  }
  if (parts > 1) start_cv_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return running_ == 0; });
  fn_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return true;
}

void HelperThreads::loop(unsigned helper) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mu_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || round_ != seen; });
    if (stop_) return;
    seen = round_;
    const unsigned part = helper + 1;
    if (part >= parts_) continue;  // this round needs fewer helpers
    const auto* fn = fn_;
    lock.unlock();
    std::exception_ptr failed;
    try {
      (*fn)(part);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed && !error_) error_ = failed;
    if (--running_ == 0) done_cv_.notify_one();
  }
}

}  // namespace ferry::xfer::store
