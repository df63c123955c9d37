#pragma once
// Host memory an application mapped from a shared file (POSIX shm: LMCache's
// L1 pool in its multiprocess mode), read with pread(2) on the file the
// application handed over. The agent never maps it: such a file cannot be
// sealed against shrinking, and a mapping of a file that shrank raises
// SIGBUS, where a read past its end is only short (an IoError).
//
// Writes go by cross-memory attach into the application's own mapping where
// the kernel allows it: tmpfs serializes writes to one file on its inode
// lock, so parallel pwrites run at one thread's speed (measured: 3.8 GB/s
// against 8.6 by process_vm_writev for 32 MiB pulls on an H100 host). pwrite
// is the fallback.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "xfer/agent/remote_memory.h"

namespace ferry::xfer::agent {

class SharedFileMemory final : public RemoteMemory {
 public:
  // Takes over fd: a regular file that holds [offset, offset + len). Reads
  // its first and last byte to prove it. `writer`, if any, reaches the same
  // bytes at `addr` in the application. Throws ferry::Error with a reason the
  // application gets back.
  static std::unique_ptr<SharedFileMemory> open(int fd, std::uint64_t offset, std::uint64_t len,
                                                std::unique_ptr<RemoteMemory> writer = nullptr, std::uint64_t addr = 0);
  ~SharedFileMemory() override;
  SharedFileMemory(const SharedFileMemory&) = delete;
  SharedFileMemory& operator=(const SharedFileMemory&) = delete;

  // `remote` is an offset in the file.
  XferStatus read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  XferStatus write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len, Fault& fault) const noexcept override;
  std::string describe() const override;

 private:
  explicit SharedFileMemory(int fd) : fd_(fd) {}
  XferStatus file_io(bool to_file, std::uint64_t offset, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept;
  int fd_;
  std::uint64_t offset_ = 0;  // the region's first byte in the file ...
  std::uint64_t addr_ = 0;    // ... and in the application, for writer_
  std::unique_ptr<RemoteMemory> writer_;
};

}  // namespace ferry::xfer::agent
