#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "ferry/core/arena_control.h"
#include "core/net.h"
#include "ferry/worker/cpu_backend.h"

namespace ferry::worker {

CpuWorkers::~CpuWorkers() { stop(); }

void CpuWorkers::start() {
  if (arena_ == nullptr) throw Error("CPU backend started before prepare()");
  const std::uint32_t channels = arena_->num_channels();
  const std::uint32_t n = options_.threads == 0 ? channels : std::min(options_.threads, channels);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::vector<std::uint32_t> mine;
    for (std::uint32_t c = i; c < channels; c += n) mine.push_back(c);
    threads_.emplace_back([this, i, mine] {
      if (!options_.cpus.empty()) {
        try {
          net::pin_current_thread(options_.cpus[i % options_.cpus.size()]);
        } catch (const Error& e) {
          log::sdk().warn("worker {}: {}; running unpinned", i, e.what());
        }
      }
      serve(mine);
      ++exited_;  // stop() waits for this, not for join(): a handler that never returns must not hang it
    });
  }
}

void CpuWorkers::stop() {
  if (arena_ != nullptr && !threads_.empty()) arena_control::request_stop(*arena_->header());
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

void CpuWorkers::fail(const std::string& why) {
  std::lock_guard lock(failure_mutex_);
  if (failure_.empty()) failure_ = why;
}

std::string CpuWorkers::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

std::uint64_t CpuWorkers::handled() const { return arena_control::total_handled(*arena_); }

std::string CpuWorkers::describe() const {
  const std::uint32_t channels = arena_ ? arena_->num_channels() : 0;
  const std::uint32_t n = options_.threads == 0 ? channels : std::min(options_.threads, channels);
  return std::string("cpu backend, ") + std::to_string(n) + " worker thread(s) for " + std::to_string(channels) +
         " channel(s), handler " + handler_name_;
}

}  // namespace ferry::worker
