#include "infer/model/worker_pool.h"

namespace ferry::infer {

WorkerPool::WorkerPool(std::size_t threads) {
  for (std::size_t w = 1; w < threads; ++w) workers_.emplace_back([this, w] { work(w); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkerPool::run(std::size_t count, const std::function<void(std::size_t, std::size_t)>& task) {
  if (count == 0) return;
  if (workers_.empty() || count == 1) {
    for (std::size_t i = 0; i < count; ++i) task(i, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    count_ = count;
    next_ = 0;
    running_ = workers_.size();
    ++round_;
  }
  start_.notify_all();
  drain(0);
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return running_ == 0; });
  task_ = nullptr;
}

// Takes indices until none is left. Tasks are coarse (a block of rows, a
// sequence's heads), so one lock per index costs little.
void WorkerPool::drain(std::size_t worker) {
  for (;;) {
    std::size_t i;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= count_) return;
      i = next_++;
    }
    (*task_)(i, worker);
  }
}

void WorkerPool::work(std::size_t worker) {
  std::size_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || round_ != seen; });
      if (stopping_) return;
      seen = round_;
    }
    drain(worker);
    std::lock_guard lock(mutex_);
    if (--running_ == 0) finished_.notify_one();
  }
}

}  // namespace ferry::infer
