#pragma once
// An application's plain host memory (a NumPy array, a framework's pinned
// pool: memory Ferry did not allocate), reached from the agent through the
// process's /proc/<pid>/mem, opened once at registration: pread(2) and
// pwrite(2) there copy straight between the application's pages and the
// agent's staging or pool (docs/xfer.md, "Memory the agent reaches").
//
// Why that file and not process_vm_readv(2), which looks the process up by pid
// at every copy:
//   - The open file holds the address space the process had when it was
//     opened. A process that later runs another program (exec) has a new one,
//     and the old one reads as gone: the agent can never reach the image of a
//     setuid program its application exec'd, nor the memory of whoever reuses
//     the pid. This holds however the copy and the exec interleave, so a
//     privileged agent needs no check before each copy that could race one.
//   - Its faults never wait on a userfaultfd: the kernel fails them at once,
//     where process_vm_readv would sleep until the page is served.
// The kernel checks at open, as for ptrace: the same uid and, under Yama's
// ptrace_scope 1, an application that named the agent with
// prctl(PR_SET_PTRACER), which the client library does when it registers such
// memory.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "xfer/agent/remote_memory.h"
#include "xfer/base/fault.h"

namespace ferry::xfer::agent {

class ProcessMemory final : public RemoteMemory {
 public:
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
  // process and the cause, when the process has exited or run another
  // program (the memory is then gone() for good), or the pages are not mapped
  // or cannot be faulted in (a userfaultfd that serves no fault).
  XferStatus read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  XferStatus write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  std::string describe() const override;

  pid_t pid() const noexcept { return pid_; }

 protected:
  bool vanished() const noexcept override { return gone_.load(std::memory_order_relaxed) != Gone::No; }
  std::string vanished_reason() const override;

 private:
  enum class Gone : int { No, Exited, Execed };
  ProcessMemory(pid_t pid, int pidfd, int mem_fd) : pid_(pid), pidfd_(pidfd), mem_fd_(mem_fd) {}
  XferStatus copy(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept;

  pid_t pid_;
  int pidfd_;
  int mem_fd_;  // /proc/<pid>/mem as it was at registration
  // Set, once, by the first copy that found the address space gone; read by
  // the session to drop the region.
  mutable std::atomic<Gone> gone_{Gone::No};
};

}  // namespace ferry::xfer::agent
