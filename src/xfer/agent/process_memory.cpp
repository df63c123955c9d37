#include "xfer/agent/process_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ferry/core/status.h"
#include "xfer/agent/owner_fd.h"

namespace ferry::xfer::agent {
namespace {

// What an errno from process_vm_readv/writev means for the application.
std::string why(int err) {
  switch (err) {
    case EPERM:
      return "the agent may not reach this process's memory (it must run as the same user, and where "
             "kernel.yama.ptrace_scope is 1 the process must allow the agent with prctl(PR_SET_PTRACER), "
             "as the client library does; scope 2 or 3 forbids it: use ferry::xfer::Buffer memory)";
    case EFAULT: return "the range is not mapped in the process (freed, or never allocated)";
    case ESRCH: return "the process has exited";
    case ENOSYS: return "this kernel has no process_vm_readv (CONFIG_CROSS_MEMORY_ATTACH)";
    default: return std::strerror(err);
  }
}

}  // namespace

std::unique_ptr<ProcessMemory> ProcessMemory::open(pid_t pid, uid_t uid, std::uint64_t addr, std::uint64_t len) {
  const int pidfd = open_owner_process(pid, uid, "register");
  std::unique_ptr<ProcessMemory> m(new ProcessMemory(pid, pidfd));
  if (len == 0 || addr + len < addr) throw Error("register: an empty or wrapping range");
  std::uint8_t probe = 0;
  Fault fault;
  auto* first = reinterpret_cast<std::uint8_t*>(addr);
  if (m->read(first, &probe, 1, fault) != XferStatus::Ok || m->read(first + len - 1, &probe, 1, fault) != XferStatus::Ok)
    throw Error("register: " + fault.detail());
  return m;
}

ProcessMemory::~ProcessMemory() { ::close(pidfd_); }

std::string ProcessMemory::describe() const {
  return "process " + std::to_string(pid_) + "'s memory, cross-memory attach";
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
  if (!process_alive(pidfd_))
    return fault.raise(XferStatus::IoError, "process " + std::to_string(pid_) + ": " + why(ESRCH));
  // The kernel may copy less than asked (a partial fault, or a chunk boundary):
  // go on from where it stopped.
  std::size_t done = 0;
  while (done < len) {
    iovec here{local + done, len - done};
    iovec there{remote + done, len - done};
    const ssize_t n = to_remote ? process_vm_writev(pid_, &here, 1, &there, 1, 0)
                                : process_vm_readv(pid_, &here, 1, &there, 1, 0);
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      char at[32];
      std::snprintf(at, sizeof(at), "%#llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(remote)));
      return fault.raise(XferStatus::IoError, std::string(to_remote ? "writing " : "reading ") + std::to_string(len) +
                                                  " bytes at " + at + " in process " + std::to_string(pid_) + ": " +
                                                  why(err));
    }
    done += static_cast<std::size_t>(n);
  }
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::agent
