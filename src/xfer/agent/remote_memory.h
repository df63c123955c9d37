#pragma once
// Host memory of an application that the agent reaches by copy calls, never by
// dereferencing it: the mover copies between it and the agent's staging with
// read() and write(). Two kinds (docs/xfer.md, "Memory the agent reaches"):
//   ProcessMemory     plain memory of the application's process, through /proc/<pid>/mem;
//   SharedFileMemory  memory the application mapped from a shared file (POSIX
//                     shm), by pread/pwrite on that file.
// Addresses are in the remote space: the application's addresses for the
// first, offsets in the file for the second.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/xfer/fault.h"

namespace ferry::xfer::agent {

class RemoteMemory {
 public:
  virtual ~RemoteMemory() = default;
  // Copies len bytes at `remote` (inside the region) into `local`, or the
  // other way. IoError, raised naming the memory and the cause, when it can no
  // longer be reached (the process exited, the file shrank ...).
  virtual XferStatus read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept = 0;
  virtual XferStatus write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len, Fault& fault) const noexcept = 0;
  // "process 123's memory, /proc/pid/mem", for the log.
  virtual std::string describe() const = 0;
  // True once the memory can never be reached again: its process exited or ran
  // another program, or a copy waited on it past the agent's deadline (a hung
  // FUSE or NFS mapping). Copies then fail at once, and the session drops the
  // region, giving gone_reason().
  bool gone() const noexcept { return unresponsive_.load(std::memory_order_relaxed) || vanished(); }
  std::string gone_reason() const {
    return unresponsive_.load(std::memory_order_relaxed)
               ? describe() +
                     " did not answer a copy within AgentServiceOptions::memory_timeout_s (a hung FUSE or "
                     "NFS mapping?)"
               : vanished_reason();
  }
  // Called by the mover's watchdog when a copy waited past the deadline. Const:
  // the regions that hold this memory hand it out const, and this only
  // records what became of it.
  void mark_unresponsive() const noexcept { unresponsive_.store(true, std::memory_order_relaxed); }

  // The len bytes at `remote` mapped into the agent, when this memory is (a
  // shared file's mapping), for a kernel copy straight into or out of them
  // (pread/pwrite) and for hashing them in place under run_guarded()
  // (guarded_access.h): their pages can vanish. nullptr: reach them by
  // read() and write() only. `for_write`: the caller will store into them.
  virtual std::uint8_t* in_place(const std::uint8_t* /*remote*/, std::size_t /*len*/,
                                 bool /*for_write*/) const noexcept {
    return nullptr;
  }

 protected:
  // Whether (and why) the memory went away for good on its own.
  virtual bool vanished() const noexcept { return false; }
  virtual std::string vanished_reason() const { return {}; }

 private:
  mutable std::atomic<bool> unresponsive_{false};
};

}  // namespace ferry::xfer::agent
