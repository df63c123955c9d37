#pragma once
// Host memory an application mapped from a shared file (POSIX shm: LMCache's
// L1 pool in its multiprocess mode), reached through the file the application
// handed over.
//
// read() and write() copy with pread(2) on the file. Writes go into the
// application's own mapping instead, by cross-memory attach
// (process_memory.h), where the kernel allows it: tmpfs serializes writes to
// one file on its inode lock, so parallel pwrites run at one thread's speed
// (docs/xfer.md). pwrite is the fallback. A read past the file's end (it
// shrank) is only short: an IoError.
//
// The agent also maps the file, for in_place(): a streamed object then goes
// between the mapping and a tier's file in one kernel copy, as a write(2) of
// the application's own buffer would, instead of a copy into the agent first.
// Such a file cannot be sealed against shrinking, so everything that touches
// the mapping from user space runs guarded (guarded_access.h), and kernel
// copies fail with EFAULT.

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
  std::uint8_t* in_place(const std::uint8_t* remote, std::size_t len, bool for_write) const noexcept override;

 protected:
  // The application's mapping, which writes go to, is gone with its process.
  bool vanished() const noexcept override { return writer_ != nullptr && writer_->gone(); }
  std::string vanished_reason() const override { return writer_ != nullptr ? writer_->gone_reason() : std::string(); }

 private:
  explicit SharedFileMemory(int fd) : fd_(fd) {}
  void map(std::uint64_t len) noexcept;
  XferStatus file_io(bool to_file, std::uint64_t offset, std::uint8_t* local, std::size_t len, Fault& fault) const noexcept;
  int fd_;
  std::uint64_t offset_ = 0;  // the region's first byte in the file ...
  std::uint64_t addr_ = 0;    // ... and in the application, for writer_
  std::unique_ptr<RemoteMemory> writer_;
  // The file's mapping, from offset_ rounded down to a page; null when the
  // kernel refused it (the copy calls above still work).
  std::uint8_t* map_ = nullptr;
  std::size_t map_len_ = 0;
  std::uint64_t map_offset_ = 0;
  bool map_writable_ = false;
};

}  // namespace ferry::xfer::agent
