#include "core/service_thread.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <exception>

#include "ferry/core/status.h"

namespace ferry {

ServiceThread::ServiceThread() {
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) throw_errno("eventfd for a service's stop");
}

ServiceThread::~ServiceThread() {
  request_stop();
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
}

void ServiceThread::start(std::function<int()> loop) {
  std::lock_guard lk(mu_);
  if (thread_.joinable()) throw Error("the service was started twice");
  thread_ = std::thread([this, loop = std::move(loop)] {
    int code = 1;
    try {
      code = loop();
    } catch (const std::exception& e) {
      fail(e.what());
    }
    std::lock_guard lk(mu_);
    if (!first_error_.empty()) code = code == 0 ? 1 : code;
    exit_code_ = code;
    done_cv_.notify_all();
  });
}

void ServiceThread::request_stop() noexcept {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
}

bool ServiceThread::stop_requested() const noexcept {
  pollfd p{stop_fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

int ServiceThread::wait() {
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [this] { return exit_code_.has_value() || !thread_.joinable(); });
  return exit_code_.value_or(0);
}

std::optional<int> ServiceThread::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  done_cv_.wait_for(lk, timeout, [this] { return exit_code_.has_value(); });
  return exit_code_;
}

void ServiceThread::fail(const std::string& why) {
  std::lock_guard lk(mu_);
  if (first_error_.empty()) first_error_ = why;
}

std::string ServiceThread::first_error() const {
  std::lock_guard lk(mu_);
  return first_error_;
}

}  // namespace ferry
