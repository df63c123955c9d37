#pragma once
// A fixed set of threads that run one loop's iterations together: the CPU
// model's own parallelism. OpenBLAS's pool parallelises only one product at
// a time and not at all below its size threshold, and the model's other work
// (LayerNorm, GELU, attention over many short sequences) is as large as the
// products for short inputs: splitting the token rows over threads scales both.

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry::infer {

class WorkerPool {
 public:
  // threads: the caller's thread included; 1 runs everything on the caller.
  explicit WorkerPool(std::size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::size_t size() const noexcept { return workers_.size() + 1; }

  // Calls task(i, worker) for every i in [0, count) across the threads and
  // returns when all are done; worker (< size()) names the thread, for its
  // own scratch. One caller at a time.
  void run(std::size_t count, const std::function<void(std::size_t, std::size_t)>& task);

 private:
  void work(std::size_t worker);
  void drain(std::size_t worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  const std::function<void(std::size_t, std::size_t)>* task_ = nullptr;
  std::size_t count_ = 0;
  std::size_t next_ = 0;     // the next index to hand out (under mutex_)
  std::size_t running_ = 0;  // workers inside the current run
  std::size_t round_ = 0;
  bool stopping_ = false;
};

}  // namespace ferry::infer
