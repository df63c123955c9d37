#pragma once
// A stand-in embedding model for the watchdog's tests: its calls block until
// the test lets them go (a GPU call that never returns), then return, throw,
// or leave the model reporting a fault. Row i of a batch is kHidden copies of
// the sum of sequence i's ids.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "ferry/core/status.h"
#include "ferry/infer/model.h"

namespace ferry::infer::test {

class GatedModel final : public EmbeddingModel {
 public:
  static constexpr std::size_t kHidden = 4;

  GatedModel() {
    info_.name = "gated";
    info_.hidden = kHidden;
    info_.max_positions = 512;
    info_.vocab = 30522;
    info_.precision = "f32";
    info_.device = "cpu";
  }
  const ModelInfo& info() const noexcept override { return info_; }
  void embed(const TokenBatch& batch, float* out) override {
    std::unique_lock lock(mutex_);
    ++calls_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !held_; });
    if (!fault_after_.empty()) {
      fault_ = fault_after_;
      throw Error("CUDA error: " + fault_);
    }
    lock.unlock();
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_.load()));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      float sum = 0;
      for (auto id : batch.sequence(i)) sum += static_cast<float>(id);
      for (std::size_t c = 0; c < kHidden; ++c) out[i * kHidden + c] = sum;
    }
  }
  void embed_tokens(const TokenBatch& batch, float* out) override { embed(batch, out); }
  std::string fault() const override {
    std::lock_guard lock(mutex_);
    return fault_;
  }
  void hold() {
    std::lock_guard lock(mutex_);
    held_ = true;
  }
  // Lets the held calls go; with a fault, they throw and the model reports it from then on.
  void release(std::string fault = {}) {
    std::lock_guard lock(mutex_);
    held_ = false;
    fault_after_ = std::move(fault);
    cv_.notify_all();
  }
  void wait_for_calls(int n) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return calls_ >= n; });
  }
  int calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  std::atomic<long> sleep_us_{0};  // each call's time, once let go

 private:
  ModelInfo info_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool held_ = false;
  int calls_ = 0;
  std::string fault_after_, fault_;
};

}  // namespace ferry::infer::test
