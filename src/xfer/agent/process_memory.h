#pragma once
// An application's plain host memory (a NumPy array, a framework's pinned
// pool: memory Ferry did not allocate) reached from the agent by cross-memory
// attach: process_vm_readv(2) and process_vm_writev(2) copy straight between
// the application's pages and the agent's staging or pool, one copy, as a
// mapped memfd costs (docs/xfer.md, "Memory the agent reaches").
//
// The kernel allows it where the agent could ptrace the application: the same
// uid, and, under Yama's ptrace_scope 1, an application that named the agent
// with prctl(PR_SET_PTRACER), which the client library does when it registers
// such memory. The process is held by a pidfd, checked before every copy, so a
// pid reused after the application exits is never read or written.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "xfer/agent/remote_memory.h"
#include "xfer/base/fault.h"

namespace ferry::xfer::agent {

class ProcessMemory final : public RemoteMemory {
 public:
  // [addr, addr + len) in process pid, which must run wholly as uid. Reads its
  // first and last byte to prove that the agent may. Throws ferry::Error with
  // a reason the application gets back.
  static std::unique_ptr<ProcessMemory> open(pid_t pid, uid_t uid, std::uint64_t addr, std::uint64_t len);
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  // Copies len bytes at `remote` (an address in the application, inside the
  // region) into `local`, or the other way. IoError, raised naming the
  // process and the cause, when the process has exited, unmapped the memory,
  // or no longer lets the agent in.
  XferStatus read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  XferStatus write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  std::string describe() const override;

  pid_t pid() const noexcept { return pid_; }

 private:
  ProcessMemory(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
  XferStatus copy(bool to_remote, std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept;

  pid_t pid_;
  int pidfd_;
};

}  // namespace ferry::xfer::agent
