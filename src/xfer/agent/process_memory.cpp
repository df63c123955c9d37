#include "xfer/agent/process_memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "ferry/core/status.h"
#include "xfer/agent/owner_fd.h"

namespace ferry::xfer::agent {
namespace {

// What an errno from the kernel's ptrace-style check means for the application.
std::string not_allowed() {
  return "the agent may not reach this process's memory (it must run as the same user, and where "
         "kernel.yama.ptrace_scope is 1 the process must allow the agent with prctl(PR_SET_PTRACER), "
         "as the client library does; scope 2 or 3 forbids it: use ferry::xfer::Buffer memory)";
}

std::string why(int err) {
  switch (err) {
    case EACCES:
    case EPERM: return not_allowed();
    case EFAULT:
    case EIO: return "the pages are not mapped in the process (freed, or never allocated), or cannot be faulted in";
    case ENOENT:
    case ESRCH: return "the process has exited";
    case ENOSYS: return "this kernel has no process_vm_readv (CONFIG_CROSS_MEMORY_ATTACH)";
    default: return std::strerror(err);
  }
}

std::string hex(const void* p) {
  char at[32];
  std::snprintf(at, sizeof(at), "%#llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return at;
}

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::unique_ptr<ProcessMemory> ProcessMemory::open(pid_t pid, uid_t uid, std::uint64_t addr, std::uint64_t len) {
  if (len == 0 || addr + len < addr) throw Error("register: an empty or wrapping range");
  const int pidfd = open_owner_process(pid, uid, "register");
  const int mem_fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  const int err = errno;
  if (mem_fd < 0) {
    ::close(pidfd);
    throw Error("register: process " + std::to_string(pid) + ": " + why(err));
  }
  std::unique_ptr<ProcessMemory> m(new ProcessMemory(pid, pidfd, mem_fd));
  // The checks before the open looked at whatever ran under the pid then; a
  // setuid exec in between would have given the open a privileged address
  // space. Looked at again now that it is held.
  if (!owner_unrestricted(pid, uid) || !process_alive(pidfd))
    throw Error("register: process " + std::to_string(pid) +
                " changed its uid, privileges or program, or exited, while registering");
  // An agent that may trace anyone gets no check from the kernel, unless the
  // memory is root's (whose programs gain nothing by an exec). It does not
  // take the owner's uid on a thread to get one: a thread whose real uid is
  // the user's may be signalled by that user (SIGKILL or SIGSTOP for the whole
  // agent) for as long as its copy waits on the user's pages.
  if (agent_traces_anyone() && uid != 0) m->reach_ = Reach::Bound;
  // Probed through the file: a fault there never waits on a userfaultfd.
  for (const std::uint64_t at : {addr, addr + len - 1}) {
    std::uint8_t probe = 0;
    const ssize_t n = ::pread(mem_fd, &probe, 1, static_cast<off_t>(at));
    if (n != 1)
      throw Error("register: reading " + hex(reinterpret_cast<void*>(at)) + " in process " + std::to_string(pid) +
                  ": " + (n == 0 ? std::string("the process has exited or run another program")
                                 : why(errno) + " (guarded by a userfaultfd that does not serve the fault?)"));
  }
  // And by the way copies will go, which the kernel may refuse (Yama).
  if (m->reach_ != Reach::Bound) {
    std::uint8_t probe = 0;
    if (const ssize_t n = m->move(false, reinterpret_cast<std::uint8_t*>(addr), &probe, 1); n != 1)
      throw Error("register: process " + std::to_string(pid) + ": " + why(n < 0 ? static_cast<int>(-n) : EFAULT));
  }
  m->checked_ns_.store(now_ns(), std::memory_order_relaxed);
  return m;
}

ProcessMemory::~ProcessMemory() {
  ::close(mem_fd_);
  ::close(pidfd_);
}

std::string ProcessMemory::describe() const {
  const char* how = reach_ == Reach::Bound ? "/proc/pid/mem" : "cross-memory attach";
  return "process " + std::to_string(pid_) + "'s memory, " + how;
}

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

bool ProcessMemory::still_registered(const std::uint8_t* at, bool force) const noexcept {
  const std::int64_t now = now_ns();
  if (!force && now - checked_ns_.load(std::memory_order_relaxed) < 1000000) return true;
  checked_ns_.store(now, std::memory_order_relaxed);
  std::uint8_t probe;
  ssize_t n;
  do {
    n = ::pread(mem_fd_, &probe, 1, static_cast<off_t>(reinterpret_cast<std::uintptr_t>(at)));
  } while (n < 0 && errno == EINTR);
  if (n != 0) return true;  // a page it cannot read is the copy's to report
  // No user left of the address space it holds: exited, or exec'd.
  gone_.store(process_alive(pidfd_) ? Gone::Execed : Gone::Exited, std::memory_order_relaxed);
  return false;
}

ssize_t ProcessMemory::move(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len) const noexcept {
  ssize_t n;
  if (reach_ == Reach::Bound) {
    const auto at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(remote));
    n = to_remote ? ::pwrite(mem_fd_, local, len, at) : ::pread(mem_fd_, local, len, at);
  } else {
    iovec here{local, len};
    iovec there{remote, len};
    n = to_remote ? process_vm_writev(pid_, &here, 1, &there, 1, 0) : process_vm_readv(pid_, &here, 1, &there, 1, 0);
  }
  return n < 0 ? -errno : n;
}

XferStatus ProcessMemory::copy(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len,
                               Fault& fault) const noexcept {
  if (gone() || !still_registered(remote, false)) return fault.raise(XferStatus::IoError, gone_reason());
  // The kernel may copy less than asked (a partial fault, a chunk boundary):
  // go on from where it stopped.
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = move(to_remote, remote + done, local + done, len - done);
    if (n == -EINTR) continue;
    if (n <= 0) {
      // Refused or empty: an exec (or exit) since the last look is the likelier story.
      if (!still_registered(remote, true)) return fault.raise(XferStatus::IoError, gone_reason());
      return fault.raise(XferStatus::IoError, std::string(to_remote ? "writing " : "reading ") + std::to_string(len) +
                                                  " bytes at " + hex(remote + done) + " in process " +
                                                  std::to_string(pid_) + ": " + why(n < 0 ? static_cast<int>(-n) : EFAULT));
    }
    done += static_cast<std::size_t>(n);
  }
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::agent
