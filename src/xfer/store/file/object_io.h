#pragma once
// One object's I/O in the file tier: writing an object file (a temporary name,
// its header, the data, then a rename over the final name: file_format.h,
// file_names.h), and reading one object, from its file or from its place in a
// pack, and verifying it. The tier (file_tier.h) runs many of these on one
// io_uring ring (uring_batch.h): each op below is one ring slot's state, laid
// out here, submitted and completed there, settled here again.
//
// Errors follow ferry/xfer/fault.h: a function that fails composes the text once,
// naming the key and the file, raises it into the call's Fault and returns its
// status. What is an answer rather than a failure (a file that is gone,
// NotFound) is returned without raising: the caller decides whether the key
// moved meanwhile.

#include <sys/uio.h>

#include <cerrno>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ferry/xfer/tier.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/pack_fds.h"
#include "xfer/store/file/spare_files.h"

namespace ferry::xfer::store {

inline constexpr int kMaxReadAttempts = 8;           // re-reads of an object that is being replaced meanwhile
inline constexpr std::size_t kKeepBounce = 4 << 20;  // bounce buffers above this are freed after use

// Disk full, quota and file-size limits all mean "this tier cannot take the
// object": the chain moves it (or victims) to the next tier.
inline XferStatus write_errno_status(int err) noexcept {
  return (err == ENOSPC || err == EDQUOT || err == EFBIG) ? XferStatus::NoSpace : XferStatus::IoError;
}

// The write of one object file, in flight.
struct ObjectWrite {
  std::size_t slot = 0;
  PutItem* item = nullptr;
  std::string name;
  std::string tmp;  // empty: nothing on disk to remove
  int fd = -1;
  bool reserved = false;  // holds a reservation in the index (the tier's)
  bool truncate = false;  // O_DIRECT wrote padding past the object's end
  std::uint64_t spare_size =
      0;  // > 0: tmp is a spare file (spare_files.h) of this size, overwritten in place
  std::uint64_t seq = 0;
  AlignedBuffer header{kFileHeaderSize};
  AlignedBuffer tail;    // the last partial page, padded (O_DIRECT with aligned data)
  AlignedBuffer bounce;  // the whole object, padded (O_DIRECT with unaligned data)
  iovec iov[3]{};
  int iov_count = 0;
  std::uint64_t offset = 0;
  std::uint64_t total = 0;
};

// The read of one object, from its file or (pack set) from a pack, in flight.
struct ObjectRead {
  std::size_t slot = 0;
  GetItem* item = nullptr;
  std::string name;
  int fd = -1;
  int attempts = 0;
  bool relookup = false;   // look the key up again (it moved between a file and a pack)
  std::uint64_t hint = 0;  // the size we expect the object to have
  std::uint64_t generation = 0;
  std::shared_ptr<PackFile> pack;  // set when the object is packed: fd is lease's
  PackFds::Lease lease;
  std::uint64_t base = 0;          // where the object starts in the pack
  std::uint64_t sum = 0;           // its checksum (packed: from the index)
  bool whole_sum = false;          // of an older build: whole_checksum()'s
  std::size_t body = 0;            // data bytes read straight into item->out
  AlignedBuffer header{kFileHeaderSize};
  AlignedBuffer tail;  // the rest of the data (O_DIRECT: padded pages)
  iovec iov[3]{};
  int iov_count = 0;
  std::uint64_t offset = 0;  // bytes read so far, from base
  std::uint64_t total = 0;   // bytes to read
};

class ObjectIo {
 public:
  // With O_DIRECT, replaced objects' files are kept for reuse (spare_files.h).
  ObjectIo(int dir_fd, std::string dir, bool direct, bool fsync)
      : dir_fd_(dir_fd),
        dir_(std::move(dir)),
        direct_(direct),
        fsync_(fsync),
        spares_(direct && dir_fd >= 0 ? std::make_unique<SpareFiles>(dir_fd) : nullptr) {}

  // ---- writing an object file ----
  // Creates the temporary for op.item (op.seq set) and lays out the write of
  // header and data (op.iov, op.total). On failure (raised) nothing is left.
  [[nodiscard]] XferStatus open_write(ObjectWrite& op, Fault& fault) noexcept;
  // Only creates the temporary (op.fd, op.tmp) and, buffered, allocates its
  // blocks (with O_DIRECT it may be a spare file instead), for a write laid out elsewhere (a streamed put,
  // file_tier_stream.cpp). On failure (raised) nothing is left.
  [[nodiscard]] XferStatus create_temp(ObjectWrite& op, Fault& fault) noexcept;
  // A write completion with res <= 0: the failure's status, raised.
  [[nodiscard]] XferStatus write_failed(const ObjectWrite& op, int res, Fault& fault) noexcept;
  // After the last write: cuts O_DIRECT padding, fsyncs (with fsync), closes.
  [[nodiscard]] XferStatus close_write(ObjectWrite& op, Fault& fault) noexcept;
  // Renames the temporary over the object's name (the caller holds the key's
  // stripe); with O_DIRECT swaps them, and keeps the old file as a spare.
  [[nodiscard]] XferStatus publish(ObjectWrite& op, Fault& fault) noexcept;
  // With fsync: the directory after a publish. The object is in place and
  // readable; only its durability across a power cut is in doubt: IoError.
  [[nodiscard]] XferStatus sync_dir_after(const ObjectWrite& op, Fault& fault) noexcept;
  // Closes and removes what op left on disk (never a half-written file) and
  // frees a large bounce buffer.
  void discard(ObjectWrite& op) noexcept;

  // ---- reading an object ----
  // Opens the object file of op.item->key into op.fd. NotFound (not raised)
  // when there is none; IoError (raised) when it cannot be opened.
  [[nodiscard]] XferStatus open_file(ObjectRead& op, Fault& fault) noexcept;
  // Lays out the read of op.hint bytes into op.item->out, through op.fd (the
  // object's file, or op.pack's descriptor from op.base). O_DIRECT reads whole
  // pages: whole pages land in the caller's buffer when it is page aligned;
  // the rest (or everything) goes through a bounce buffer.
  void lay_out_read(ObjectRead& op) noexcept;
  // A read completion with res < 0: IoError, raised.
  [[nodiscard]] XferStatus read_failed(ObjectRead& op, int res, Fault& fault) noexcept;
  // Checks what was read (op.offset bytes) of an object file against its
  // header; *retry when the file was replaced by an object of another size
  // between the lookup and the read (op.hint is then the file's size).
  [[nodiscard]] XferStatus finish_file_read(ObjectRead& op, bool* retry, Fault& fault) noexcept;
  // Checks what was read of a packed object against the index's size and checksum.
  [[nodiscard]] XferStatus finish_packed_read(ObjectRead& op, Fault& fault) noexcept;
  // Closes op's file, or gives its pack's descriptor back.
  void release(ObjectRead& op) noexcept;

  // The pool of spare files, which packs share (nullptr without O_DIRECT).
  SpareFiles* spares() noexcept { return spares_.get(); }
  // Spare files kept for reuse (0 without O_DIRECT).
  std::size_t spare_files() const { return spares_ ? spares_->count() : 0; }
  std::uint64_t spare_files_reused() const { return spares_ ? spares_->reused() : 0; }

  // ---- the files of keys ----
  bool file_exists(std::string_view key) const noexcept;
  // Unlinks the key's object file; 0 (also when there is none) or errno.
  [[nodiscard]] int unlink_file(std::string_view key) const noexcept;

 private:
  int dir_fd_;
  std::string dir_;
  bool direct_;
  bool fsync_;
  std::unique_ptr<SpareFiles> spares_;  // with O_DIRECT
  // Cleared when the file system refuses RENAME_EXCHANGE: plain renames from then on.
  std::unique_ptr<std::atomic<bool>> exchange_works_ = std::make_unique<std::atomic<bool>>(true);
};

}  // namespace ferry::xfer::store
