#pragma once
// The CPU backend: one thread per channel runs the handler.

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ferry/worker/backend.h"

namespace ferry::worker {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const WorkerOptions& options) : options_(options) {}
  ~CpuBackend() override { stop(); }

  void prepare(Arena& arena) override { arena_ = &arena; }
  void start() override;
  void stop() override;
  std::string failure() const override;
  std::uint64_t handled() const override;
  std::string describe() const override;
  bool stuck() const override { return stuck_; }

 private:
  template <typename Handler>
  void serve(std::uint32_t channel_index, Handler handler);

  WorkerOptions options_;
  Arena* arena_ = nullptr;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> exited_{0};  // worker threads that have returned
  bool stuck_ = false;                  // stop() left threads behind
  void fail(const std::string& why);

  mutable std::mutex failure_mutex_;  // control path only: taken once per failure
  std::string failure_;               // the first failure; empty while healthy
};

}  // namespace ferry::worker
