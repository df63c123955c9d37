#pragma once
// The life of a hosted service (server, orchestrator, agent): its control loop
// runs on a thread of its own; stop() wakes the loop through an eventfd that
// the loop polls beside its sockets; wait() returns the loop's exit code. An
// exception that escapes the loop becomes the sticky first error and exit
// code 1, and so does any error the service reports with fail().

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace ferry {

class ServiceThread {
 public:
  ServiceThread();
  ~ServiceThread();  // stops and joins
  ServiceThread(const ServiceThread&) = delete;
  ServiceThread& operator=(const ServiceThread&) = delete;

  // Runs loop() on the service's thread. Throws ferry::Error if already started.
  void start(std::function<int()> loop);
  // Asks the loop to finish (it sees stop_fd() readable); any thread, idempotent.
  void request_stop() noexcept;
  // Readable once stop was requested; the loop polls it.
  int stop_fd() const noexcept { return stop_fd_; }
  bool stop_requested() const noexcept;

  // Waits for the loop to return; its exit code (1 after an error), or 0 if
  // it never started. Any number of threads may wait.
  int wait();
  // Waits up to `timeout`; the exit code once the loop has returned.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);

  // Records the first error (later ones are dropped); any thread.
  void fail(const std::string& why);
  std::string first_error() const;

 private:
  int stop_fd_ = -1;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  std::optional<int> exit_code_;  // set when the loop returns
  std::string first_error_;
};

}  // namespace ferry
