#include "core/signal_fd.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>

#include "ferry/core/status.h"

namespace ferry {

SignalFd::SignalFd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) throw Error("cannot block SIGINT/SIGTERM");
  signal(SIGPIPE, SIG_IGN);  // a vanished peer is an error return, not a signal
  fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) throw_errno("signalfd");
}

SignalFd::~SignalFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string SignalFd::read_name() {
  signalfd_siginfo info{};
  if (read(fd_, &info, sizeof(info)) != sizeof(info)) return "signal";
  const char* name = sigabbrev_np(static_cast<int>(info.ssi_signo));
  return name != nullptr ? std::string("SIG") + name : "signal";
}

}  // namespace ferry
