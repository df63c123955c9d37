#include "xfer/agent/owner_fd.h"

#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "ferry/core/status.h"

namespace ferry::xfer::agent {
namespace {

// glibc 2.36 has no wrappers for these on every target; the system calls are in
// Linux since 5.3 and 5.6.
int pidfd_open_(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int pidfd_getfd_(int pidfd, int fd) { return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0)); }
bool pidfd_alive(int pidfd) { return syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0; }

// The id all four fields of the "Uid:" or "Gid:" line of /proc/<pid>/status
// share, if they do.
std::optional<unsigned long> sole_id(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream fields(line.substr(std::strlen(field)));
    unsigned long id = 0, first = 0;
    int n = 0;
    while (fields >> id) {
      if (n++ == 0) first = id;
      if (id != first) return std::nullopt;
    }
    if (n != 4) return std::nullopt;
    return first;
  }
  return std::nullopt;
}

bool runs_wholly_as(pid_t pid, uid_t uid) {
  const auto id = sole_id(pid, "Uid:");
  return id && *id == uid;
}

}  // namespace

bool process_alive(int pidfd) noexcept { return pidfd_alive(pidfd); }

bool agent_traces_anyone() noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return true;  // unknown: assume the worst
  return (data[CAP_SYS_PTRACE / 32].effective & (1u << (CAP_SYS_PTRACE % 32))) != 0;
}

bool owner_unrestricted(pid_t pid, uid_t uid) {
  // The kernel gives a non-dumpable process's /proc directory to root (the
  // same rule that keeps its user from ptracing it), so its owner tells
  // whether the process is still as traceable as when it ran as `uid` only.
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0 || st.st_uid != uid) return false;
  return runs_wholly_as(pid, uid);
}

int open_owner_process(pid_t pid, uid_t uid, const char* context) {
  if (pid <= 0) throw Error(std::string(context) + ": the memory's owner process is missing");
  const int pidfd = pidfd_open_(pid);
  if (pidfd < 0)
    throw Error(std::string(context) + ": no process " + std::to_string(pid) + " on the agent's host (" +
                std::strerror(errno) + "); a client must run on the agent's machine to share memory");
  // The status file is read by pid, so the pidfd must still be that process
  // afterwards: a pid reused in between would show as a dead pidfd.
  if (!runs_wholly_as(pid, uid) || !pidfd_alive(pidfd)) {
    ::close(pidfd);
    throw Error(std::string(context) + ": process " + std::to_string(pid) + " does not run as uid " +
                std::to_string(uid) + ", the owner of this connection");
  }
  if (!owner_unrestricted(pid, uid) || !pidfd_alive(pidfd)) {
    ::close(pidfd);
    throw Error(std::string(context) + ": process " + std::to_string(pid) +
                " is not dumpable (it gained privileges by a setuid or file-capability exec, or made itself "
                "non-dumpable), so its user could not trace it and neither may the agent");
  }
  return pidfd;
}

int take_owner_fd(pid_t pid, int fd, uid_t uid) {
  if (pid <= 0 || fd < 0) throw Error("register over TCP: the memory's owner process and descriptor are missing");
  const int pidfd = open_owner_process(pid, uid, "register over TCP");
  const std::string who = "process " + std::to_string(pid);
  const int got = pidfd_getfd_(pidfd, fd);
  const int err = errno;
  if (got < 0) {
    ::close(pidfd);
    if (err == EPERM)
      throw Error("register over TCP: the agent may not take descriptors from " + who +
                  " (ptrace permission; the client allows the agent with PR_SET_PTRACER, or "
                  "kernel.yama.ptrace_scope forbids it): use the agent's unix endpoint");
    throw Error("register over TCP: descriptor " + std::to_string(fd) + " of " + who + ": " + std::strerror(err));
  }
  // Checked again: the descriptor came from a process that still runs wholly as uid.
  const bool still = runs_wholly_as(pid, uid) && pidfd_alive(pidfd);
  ::close(pidfd);
  if (!still) {
    ::close(got);
    throw Error("register over TCP: " + who + " changed its uid or exited while registering");
  }
  return got;
}

}  // namespace ferry::xfer::agent
