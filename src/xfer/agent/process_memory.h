#pragma once
// An application's plain host memory (a NumPy array, a framework's pinned
// pool: memory Ferry did not allocate), reached from the agent by copy calls
// into the process (docs/xfer.md, "Memory the agent reaches"; the trust model:
// docs/security.md).
//
// How, by what the kernel would check:
//   Direct    process_vm_readv/writev(2) as the agent. An agent that cannot
//             trace everyone gets the kernel's ptrace check on every copy, made
//             against the process as it is then: the same uid and, under
//             Yama's ptrace_scope 1, an application that named the agent with
//             prctl(PR_SET_PTRACER) (the client library does). A program the
//             application exec'd that gained privileges fails that check.
//   Bound     pread/pwrite on /proc/<pid>/mem, opened at registration: it holds
//             the address space of that moment, and one the process left by an
//             exec reads as gone. For an agent that may trace anyone (root, or
//             CAP_SYS_PTRACE), which the kernel would wave through, serving
//             memory that is not root's; slower than Direct
//             (docs/bench/xfer.md).
//
// Every reach also keeps /proc/<pid>/mem open from registration, to tell that
// the process has exec'd (its registered address space reads as gone), at most
// once a millisecond, and to probe the range at registration: faults through it
// never wait on a userfaultfd, where process_vm_readv would sleep until served.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/xfer/fault.h"
#include "xfer/agent/remote_memory.h"

namespace ferry::xfer::agent {

class ProcessMemory final : public RemoteMemory {
 public:
  enum class Reach { Direct, Bound };

  // [addr, addr + len) in process pid, which must run wholly as uid and be
  // traceable by it (owner_fd.h), before and after its memory is opened. Reads
  // its first and last byte to prove that the agent may. Throws ferry::Error
  // with a reason the application gets back. May wait on the process's pages
  // (a hung FUSE or NFS mapping): never call it on the event loop.
  static std::unique_ptr<ProcessMemory> open(pid_t pid, uid_t uid, std::uint64_t addr, std::uint64_t len);
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  // Copies len bytes at `remote` (an address in the application, inside the
  // region) into `local`, or the other way. IoError, raised naming the
  // process and the cause, when the memory is gone() (the process exited or
  // ran another program), the kernel refuses it, or the pages are not mapped.
  XferStatus read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  XferStatus write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  std::string describe() const override;

  pid_t pid() const noexcept { return pid_; }
  Reach reach() const noexcept { return reach_; }

 protected:
  bool vanished() const noexcept override { return gone_.load(std::memory_order_relaxed) != Gone::No; }
  std::string vanished_reason() const override;

 private:
  enum class Gone : int { No, Exited, Execed };
  ProcessMemory(pid_t pid, int pidfd, int mem_fd) : pid_(pid), pidfd_(pidfd), mem_fd_(mem_fd) {}
  XferStatus copy(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept;
  // process_vm_readv/writev, or pread/pwrite on mem_fd_: bytes moved, or -errno.
  ssize_t move(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len) const noexcept;
  // Whether the registered address space still has users, asked at most once
  // a millisecond (`force`: now); records why not.
  bool still_registered(const std::uint8_t* at, bool force) const noexcept;

  pid_t pid_;
  int pidfd_;
  int mem_fd_;  // /proc/<pid>/mem as it was at registration
  Reach reach_ = Reach::Direct;
  // Set, once, by the first copy that found the address space gone.
  mutable std::atomic<Gone> gone_{Gone::No};
  mutable std::atomic<std::int64_t> checked_ns_{0};
};

}  // namespace ferry::xfer::agent
