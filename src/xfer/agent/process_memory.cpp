#include "xfer/agent/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ferry/core/status.h"
#include "xfer/agent/owner_fd.h"

namespace ferry::xfer::agent {
namespace {

// What an errno from opening /proc/<pid>/mem means for the application.
std::string why_not_opened(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
      return "the agent may not reach this process's memory (it must run as the same user, and where "
             "kernel.yama.ptrace_scope is 1 the process must allow the agent with prctl(PR_SET_PTRACER), "
             "as the client library does; scope 2 or 3 forbids it: use ferry::xfer::Buffer memory)";
    case ENOENT:
    case ESRCH: return "the process has exited";
    default: return std::strerror(err);
  }
}

std::string hex(const void* p) {
  char at[32];
  std::snprintf(at, sizeof(at), "%#llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return at;
}

}  // namespace

std::unique_ptr<ProcessMemory> ProcessMemory::open(pid_t pid, uid_t uid, std::uint64_t addr, std::uint64_t len) {
  if (len == 0 || addr + len < addr) throw Error("register: an empty or wrapping range");
  const int pidfd = open_owner_process(pid, uid, "register");
  const int mem_fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  const int err = errno;
  if (mem_fd < 0) {
    ::close(pidfd);
    throw Error("register: process " + std::to_string(pid) + ": " + why_not_opened(err));
  }
  std::unique_ptr<ProcessMemory> m(new ProcessMemory(pid, pidfd, mem_fd));
  // The checks before the open looked at whatever ran under the pid then; a
  // setuid exec in between would have given the open a privileged address
  // space. Looked at again now that it is held: any such exec has happened
  // (or the open would hold the old space, which then reads as gone).
  if (!owner_unrestricted(pid, uid) || !process_alive(pidfd))
    throw Error("register: process " + std::to_string(pid) + " changed its uid, privileges or program, or exited, "
                "while registering");
  std::uint8_t probe = 0;
  Fault fault;
  auto* first = reinterpret_cast<std::uint8_t*>(addr);
  if (m->read(first, &probe, 1, fault) != XferStatus::Ok || m->read(first + len - 1, &probe, 1, fault) != XferStatus::Ok)
    throw Error("register: " + fault.detail());
  return m;
}

ProcessMemory::~ProcessMemory() {
  ::close(mem_fd_);
  ::close(pidfd_);
}

std::string ProcessMemory::describe() const { return "process " + std::to_string(pid_) + "'s memory, /proc/pid/mem"; }

std::string ProcessMemory::vanished_reason() const {
  switch (gone_.load(std::memory_order_relaxed)) {
    case Gone::Exited: return "process " + std::to_string(pid_) + " has exited";
    case Gone::Execed:
      return "process " + std::to_string(pid_) +
             " has run another program (exec) since it registered this memory, which is gone with its old "
             "address space";
    case Gone::No: break;
  }
  return {};
}

XferStatus ProcessMemory::read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len,
                               Fault& fault) const noexcept {
  return copy(false, const_cast<std::uint8_t*>(remote), local, len, fault);
}

XferStatus ProcessMemory::write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len,
                                Fault& fault) const noexcept {
  return copy(true, remote, const_cast<std::uint8_t*>(local), len, fault);
}

XferStatus ProcessMemory::copy(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len,
                               Fault& fault) const noexcept {
  if (gone()) return fault.raise(XferStatus::IoError, gone_reason());
  // The kernel may copy less than asked (a page it could not fault in after
  // others it could): go on from where it stopped, and let the next call name
  // the page that failed.
  std::size_t done = 0;
  while (done < len) {
    const auto at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(remote + done));
    const ssize_t n = to_remote ? ::pwrite(mem_fd_, local + done, len - done, at)
                                : ::pread(mem_fd_, local + done, len - done, at);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // No byte at all: the address space the file holds has no users left.
      // The process exited, or exec'd and has another one now.
      gone_.store(process_alive(pidfd_) ? Gone::Execed : Gone::Exited, std::memory_order_relaxed);
      return fault.raise(XferStatus::IoError, gone_reason());
    }
    if (n < 0) {
      const int err = errno;
      const std::string cause =
          err == EIO || err == EFAULT
              ? "the pages are not mapped in the process (freed, or never allocated), or cannot be faulted in "
                "(guarded by a userfaultfd that does not serve the fault)"
              : std::strerror(err);
      return fault.raise(XferStatus::IoError, std::string(to_remote ? "writing " : "reading ") + std::to_string(len) +
                                                  " bytes at " + hex(remote + done) + " in process " +
                                                  std::to_string(pid_) + ": " + cause);
    }
    done += static_cast<std::size_t>(n);
  }
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::agent
