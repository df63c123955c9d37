#include "xfer/agent/shared_file_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "ferry/core/status.h"

namespace ferry::xfer::agent {

std::unique_ptr<SharedFileMemory> SharedFileMemory::open(int fd, std::uint64_t offset, std::uint64_t len,
                                                         std::unique_ptr<RemoteMemory> writer, std::uint64_t addr) {
  std::unique_ptr<SharedFileMemory> m(new SharedFileMemory(fd));  // closes fd on every way out
  m->offset_ = offset;
  m->addr_ = addr;
  m->writer_ = std::move(writer);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("register: the shared file");
  if (!S_ISREG(st.st_mode)) throw Error("register: the shared file's descriptor is not a regular file");
  if (len == 0 || offset + len < offset) throw Error("register: an empty or wrapping range");
  if (offset + len > static_cast<std::uint64_t>(st.st_size))
    throw Error("register: " + std::to_string(len) + " bytes at offset " + std::to_string(offset) +
                " run past the shared file's " + std::to_string(st.st_size) + " bytes");
  std::uint8_t probe = 0;
  Fault fault;
  // The file's offsets as addresses (RemoteMemory's space), computed as
  // integers: offset 0 is a null pointer, and null plus an offset is undefined.
  const auto* first = reinterpret_cast<const std::uint8_t*>(offset);
  const auto* last = reinterpret_cast<const std::uint8_t*>(offset + len - 1);
  if (m->read(first, &probe, 1, fault) != XferStatus::Ok || m->read(last, &probe, 1, fault) != XferStatus::Ok)
    throw Error("register: " + fault.detail());
  m->map(len);
  return m;
}

void SharedFileMemory::map(std::uint64_t len) noexcept {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  map_offset_ = offset_ & ~(page - 1);
  map_len_ = static_cast<std::size_t>(offset_ + len - map_offset_);
  // Writable where the descriptor allows it (opened read-write), else for reading only.
  for (const bool writable : {true, false}) {
    void* p = ::mmap(nullptr, map_len_, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd_,
                     static_cast<off_t>(map_offset_));
    if (p != MAP_FAILED) {
      map_ = static_cast<std::uint8_t*>(p);
      map_writable_ = writable;
      return;
    }
  }
  map_len_ = 0;
}

SharedFileMemory::~SharedFileMemory() {
  if (map_ != nullptr) ::munmap(map_, map_len_);
  ::close(fd_);
}

std::string SharedFileMemory::describe() const {
  std::string how = writer_ ? "a shared file, pread, and " + writer_->describe() + " to write" : "a shared file, pread/pwrite";
  if (map_ != nullptr) how += map_writable_ ? "; mapped" : "; mapped read-only";
  return how;
}

std::uint8_t* SharedFileMemory::in_place(const std::uint8_t* remote, std::size_t len, bool for_write) const noexcept {
  if (gone()) return nullptr;
  const auto offset = reinterpret_cast<std::uintptr_t>(remote);
  if (map_ == nullptr || (for_write && !map_writable_) || offset < map_offset_ || len > map_len_ ||
      offset - map_offset_ > map_len_ - len)
    return nullptr;
  // A file cut inside a page still maps that page, past its end as zeros: lend
  // nothing the file no longer holds (the copy calls then report it shrank).
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || offset + len > static_cast<std::uint64_t>(st.st_size)) return nullptr;
  return map_ + (offset - map_offset_);
}

XferStatus SharedFileMemory::read(const std::uint8_t* remote, std::uint8_t* local, std::size_t len,
                                  Fault& fault) const noexcept {
  if (gone()) return fault.raise(XferStatus::IoError, gone_reason());
  return file_io(false, reinterpret_cast<std::uintptr_t>(remote), local, len, fault);
}

XferStatus SharedFileMemory::write(std::uint8_t* remote, const std::uint8_t* local, std::size_t len,
                                   Fault& fault) const noexcept {
  if (gone()) return fault.raise(XferStatus::IoError, gone_reason());
  const auto offset = reinterpret_cast<std::uintptr_t>(remote);
  if (writer_ != nullptr) return writer_->write(reinterpret_cast<std::uint8_t*>(addr_ + (offset - offset_)), local, len, fault);
  // A write past the end would grow the file, not fill the application's
  // memory: the region was inside the file at registration, so check it still is.
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && offset + len > static_cast<std::uint64_t>(st.st_size))
    return fault.raise(XferStatus::IoError, "writing " + std::to_string(len) + " bytes at offset " +
                                                std::to_string(offset) + " of the shared file: it shrank below them");
  return file_io(true, offset, const_cast<std::uint8_t*>(local), len, fault);
}

XferStatus SharedFileMemory::file_io(bool to_file, std::uint64_t offset, std::uint8_t* local, std::size_t len,
                                     Fault& fault) const noexcept {
  // The kernel may move less than asked (a signal, a page boundary): go on from where it stopped.
  std::size_t done = 0;
  while (done < len) {
    const auto at = static_cast<off_t>(offset + done);
    const ssize_t n = to_file ? ::pwrite(fd_, local + done, len - done, at) : ::pread(fd_, local + done, len - done, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return fault.raise(XferStatus::IoError, std::string(to_file ? "writing " : "reading ") + std::to_string(len) +
                                                  " bytes at offset " + std::to_string(offset) + " of the shared file: " +
                                                  (n == 0 ? std::string("it shrank below them") : std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::agent
