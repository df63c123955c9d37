#pragma once
// SIGINT/SIGTERM as a file descriptor, so a role's main loop can poll() for
// Ctrl-C beside its sockets. Construct it before starting threads: the signals
// are blocked in the constructing thread and every thread it creates later.

#include <string>

namespace ferry {

class SignalFd {
 public:
  SignalFd();
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const noexcept { return fd_; }
  // Consumes one pending signal and returns its name ("SIGINT", "SIGTERM").
  std::string read_name();

 private:
  int fd_ = -1;
};

}  // namespace ferry
