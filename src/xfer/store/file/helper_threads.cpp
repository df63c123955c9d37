#include "xfer/store/file/helper_threads.h"

namespace ferry::xfer::store {

HelperThreads::HelperThreads(unsigned helpers) {
  slots_.reserve(helpers);
  threads_.reserve(helpers);
  try {
    for (unsigned h = 0; h < helpers; ++h) {
      slots_.push_back(std::make_unique<Slot>());
      Slot& slot = *slots_.back();
      threads_.emplace_back([this, &slot] { loop(slot); });
      std::lock_guard lock(mu_);
      ++idle_;
    }
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
    for (auto& slot : slots_) slot->wake.notify_one();
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
}

unsigned HelperThreads::busy() const {
  std::lock_guard lock(mu_);
  return helpers() - idle_;
}

bool HelperThreads::try_run(unsigned parts, const std::function<void(unsigned)>& fn) {
  if (parts == 0 || parts > helpers() + 1) return false;
  Call call;
  call.fn = &fn;
  call.running = parts - 1;
  if (parts > 1) {
    std::lock_guard lock(mu_);
    if (idle_ < parts - 1) return false;
    unsigned part = 1;
    for (auto& slot : slots_) {
      if (part == parts) break;
      if (slot->call != nullptr) continue;
      slot->call = &call;
      slot->part = part++;
      slot->wake.notify_one();
    }
    idle_ -= parts - 1;
  }
  std::exception_ptr mine;
  try {
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  call.done.wait(lock, [&] { return call.running == 0; });
  if (mine) std::rethrow_exception(mine);
  if (call.error) std::rethrow_exception(call.error);
  return true;
}

void HelperThreads::loop(Slot& slot) {
  std::unique_lock lock(mu_);
  for (;;) {
    slot.wake.wait(lock, [&] { return stop_ || slot.call != nullptr; });
    if (slot.call == nullptr) return;  // stopping, with nothing given
    Call& call = *slot.call;
    const unsigned part = slot.part;
    lock.unlock();
    std::exception_ptr failed;
    try {
      (*call.fn)(part);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed && !call.error) call.error = failed;
    slot.call = nullptr;
    ++idle_;
    if (--call.running == 0) call.done.notify_one();
  }
}

}  // namespace ferry::xfer::store
