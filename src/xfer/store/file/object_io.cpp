#include "xfer/store/file/object_io.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ferry/xfer/checksum.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/quote_key.h"

namespace ferry::xfer::store {

// ---- writing an object file -------------------------------------------------------

XferStatus ObjectIo::create_temp(ObjectWrite& op, Fault& fault) noexcept {
  const PutItem& item = *op.item;
  op.fd = -1;
  op.truncate = false;
  op.spare_size = 0;
  op.offset = 0;
  op.tmp.clear();
  op.name = object_file_name(item.key);
  if (spares_) {
    // O_DIRECT writes whole pages: the spare is overwritten up to the padded
    // end and cut to the object's size at close.
    if (auto spare = spares_->take(kFileHeaderSize + io_round_up(item.data.size))) {
      op.fd = openat(dir_fd_, spare->name.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT);
      if (op.fd >= 0) {
        op.tmp = std::move(spare->name);
        op.spare_size = spare->size;
        return XferStatus::Ok;
      }
      unlinkat(dir_fd_, spare->name.c_str(), 0);
    }
  }
  op.tmp = temp_file_name(op.name);
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct_ ? O_DIRECT : 0);
  op.fd = openat(dir_fd_, op.tmp.c_str(), flags, 0644);
  if (op.fd < 0) {
    const int err = errno;
    op.tmp.clear();  // nothing to remove
    return fault.raise(write_errno_status(err),
                       "file tier " + dir_ + ": cannot create a file for key " + quote_key(item.key) + ": " +
                           std::strerror(err),
                       item.key);
  }
  // Buffered: the file's blocks allocated in one call before it is written, so
  // that the writes land in allocated extents instead of reserving blocks page
  // by page (ext4's delayed allocation), which is faster with one thread or
  // many (ferry-stream-probe, bench/xfer/store/stream_probe.cpp, measures it;
  // docs/bench/lmcache.md has the fallocate runs). A full disk also fails here,
  // before any byte is copied. File systems without fallocate write as before.
  // O_DIRECT writes reserve nothing page by page, so they skip the call.
  const std::uint64_t size = item.data.size;
  if (!direct_ && size > 0 && fallocate(op.fd, 0, 0, static_cast<off_t>(kFileHeaderSize + size)) != 0 &&
      errno != EOPNOTSUPP && errno != ENOSYS) {
    const int err = errno;
    discard(op);
    return fault.raise(write_errno_status(err),
                       "file tier " + dir_ + ": cannot allocate " + std::to_string(kFileHeaderSize + size) +
                           " bytes for key " + quote_key(item.key) + ": " + std::strerror(err),
                       item.key);
  }
  return XferStatus::Ok;
}

XferStatus ObjectIo::open_write(ObjectWrite& op, Fault& fault) noexcept {
  if (const XferStatus s = create_temp(op, fault); s != XferStatus::Ok) return s;
  const PutItem& item = *op.item;
  const std::uint64_t size = item.data.size;
  encode_file_header(item.key, size, item.checksum, op.seq, op.header.data());
  op.iov[0] = {op.header.data(), kFileHeaderSize};
  op.iov_count = 1;
  if (!direct_) {
    if (size > 0) op.iov[op.iov_count++] = {const_cast<std::uint8_t*>(item.data.data), size};
    op.total = kFileHeaderSize + size;
  } else if (io_aligned(item.data.data)) {
    // Whole pages go straight from the caller's buffer; only the last partial page
    // is copied, padded with zeros, and cut off again by ftruncate.
    const std::size_t body = size & ~(kIoAlign - 1);
    if (body > 0) op.iov[op.iov_count++] = {const_cast<std::uint8_t*>(item.data.data), body};
    if (body < size) {
      op.tail.resize(kIoAlign);
      std::memcpy(op.tail.data(), item.data.data + body, size - body);
      std::memset(op.tail.data() + (size - body), 0, kIoAlign - (size - body));
      op.iov[op.iov_count++] = {op.tail.data(), kIoAlign};
      op.truncate = true;
    }
    op.total = kFileHeaderSize + io_round_up(size);
  } else {
    // The caller's buffer is not page aligned: copy the object into one that is.
    if (size > 0) {
      op.bounce.resize(size);
      std::memcpy(op.bounce.data(), item.data.data, size);
      std::memset(op.bounce.data() + size, 0, io_round_up(size) - size);
      op.iov[op.iov_count++] = {op.bounce.data(), io_round_up(size)};
    }
    op.truncate = io_round_up(size) != size;
    op.total = kFileHeaderSize + io_round_up(size);
  }
  return XferStatus::Ok;  // the caller queues the write
}

XferStatus ObjectIo::write_failed(const ObjectWrite& op, int res, Fault& fault) noexcept {
  if (res == 0)
    return fault.raise(XferStatus::IoError, "file tier " + dir_ + ": writing " + op.tmp + " made no progress",
                       op.item->key);
  return fault.raise(write_errno_status(-res),
                     "file tier " + dir_ + ": writing " + op.tmp + " for key " + quote_key(op.item->key) + ": " +
                         std::strerror(-res),
                     op.item->key);
}

XferStatus ObjectIo::close_write(ObjectWrite& op, Fault& fault) noexcept {
  const PutItem& item = *op.item;
  const auto fail_errno = [&](const char* what) {
    const int err = errno;
    return fault.raise(write_errno_status(err),
                       "file tier " + dir_ + ": " + what + " " + op.tmp + " for key " + quote_key(item.key) + ": " +
                           std::strerror(err),
                       item.key);
  };
  const std::uint64_t end = kFileHeaderSize + item.data.size;
  if ((op.truncate || op.spare_size > end) && ftruncate(op.fd, static_cast<off_t>(end)) != 0)
    return fail_errno("truncating");
  if (fsync_ && fsync(op.fd) != 0) return fail_errno("fsync of");
  if (close(std::exchange(op.fd, -1)) != 0) return fail_errno("closing");
  return XferStatus::Ok;
}

XferStatus ObjectIo::publish(ObjectWrite& op, Fault& fault) noexcept {
  if (spares_ && exchange_works_->load(std::memory_order_relaxed)) {
    if (renameat2(dir_fd_, op.tmp.c_str(), dir_fd_, op.name.c_str(), RENAME_EXCHANGE) == 0) {
      // The old version now has the temporary's name: a spare, unless gone.
      struct stat st {};
      if (fstatat(dir_fd_, op.tmp.c_str(), &st, 0) == 0)
        spares_->offer(std::exchange(op.tmp, {}), static_cast<std::uint64_t>(st.st_size));
      else
        unlinkat(dir_fd_, op.tmp.c_str(), 0);
      op.tmp.clear();
      return XferStatus::Ok;
    }
    if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) exchange_works_->store(false);
    // ENOENT: no version to replace; the plain rename below publishes it.
  }
  if (renameat(dir_fd_, op.tmp.c_str(), dir_fd_, op.name.c_str()) != 0) {
    const int err = errno;
    return fault.raise(write_errno_status(err),
                       "file tier " + dir_ + ": renaming " + op.tmp + " for key " + quote_key(op.item->key) + ": " +
                           std::strerror(err),
                       op.item->key);
  }
  op.tmp.clear();
  return XferStatus::Ok;
}

XferStatus ObjectIo::sync_dir_after(const ObjectWrite& op, Fault& fault) noexcept {
  if (!fsync_ || fsync(dir_fd_) == 0) return XferStatus::Ok;
  const int err = errno;
  return fault.raise(XferStatus::IoError,
                     "file tier " + dir_ + ": fsync of the directory after publishing " + op.name + ": " +
                         std::strerror(err),
                     op.item->key);
}

void ObjectIo::discard(ObjectWrite& op) noexcept {
  if (op.fd >= 0) close(op.fd);
  op.fd = -1;
  if (!op.tmp.empty()) unlinkat(dir_fd_, op.tmp.c_str(), 0);  // never leave a half-written file behind
  op.tmp.clear();
  if (op.bounce.size() > kKeepBounce) op.bounce.reset();
}

// ---- reading an object ---------------------------------------------------------------

XferStatus ObjectIo::open_file(ObjectRead& op, Fault& fault) noexcept {
  op.name = object_file_name(op.item->key);
  if (spares_) spares_->reader_opening();  // before the open: spare_files.h says why
  op.fd = openat(dir_fd_, op.name.c_str(), O_RDONLY | O_CLOEXEC | (direct_ ? O_DIRECT : 0));
  if (op.fd >= 0) return XferStatus::Ok;
  const int err = errno;
  if (spares_) spares_->reader_closed();
  if (err == ENOENT) return XferStatus::NotFound;
  return fault.raise(XferStatus::IoError,
                     "file tier " + dir_ + ": cannot open " + op.name + " for key " + quote_key(op.item->key) + ": " +
                         std::strerror(err),
                     op.item->key);
}

void ObjectIo::lay_out_read(ObjectRead& op) noexcept {
  GetItem& item = *op.item;
  const std::uint64_t size = op.hint;
  op.iov_count = 0;
  if (op.pack) {
    // Packed: the bytes at the pack offset.
    op.total = direct_ ? io_round_up(size) : size;
  } else {
    op.iov[op.iov_count++] = {op.header.data(), kFileHeaderSize};
    op.total = kFileHeaderSize + (direct_ ? io_round_up(size) : size);
  }
  op.body = !direct_ ? size : io_aligned(item.out.data) ? (size & ~(kIoAlign - 1)) : 0;
  if (op.body > 0) op.iov[op.iov_count++] = {item.out.data, op.body};
  const std::size_t rest = op.total - (op.pack ? 0 : kFileHeaderSize) - op.body;
  if (rest > 0) {
    op.tail.resize(rest);
    op.iov[op.iov_count++] = {op.tail.data(), rest};
  }
}

XferStatus ObjectIo::read_failed(ObjectRead& op, int res, Fault& fault) noexcept {
  const XferStatus s = fault.raise(XferStatus::IoError,
                                   "file tier " + dir_ + ": reading " + (op.pack ? op.pack->name : op.name) +
                                       " for key " + quote_key(op.item->key) + ": " + std::strerror(-res),
                                   op.item->key);
  release(op);
  return s;
}

XferStatus ObjectIo::finish_packed_read(ObjectRead& op, Fault& fault) noexcept {
  GetItem& item = *op.item;
  // The descriptor goes back before the checksum pass; the pack itself is kept
  // for the messages below.
  const std::shared_ptr<PackFile> pack = std::move(op.pack);
  op.lease.reset();
  op.fd = -1;
  const auto path = [&] { return dir_ + "/" + pack->name; };
  const std::uint64_t size = op.hint;
  if (op.offset < size)
    return fault.raise(XferStatus::ChecksumMismatch,
                       "file tier: key " + quote_key(item.key) + " in pack " + path() + ": truncated (" +
                           std::to_string(op.offset) + " of " + std::to_string(size) + " bytes at offset " +
                           std::to_string(op.base) + ")",
                       item.key);
  if (size > op.body) std::memcpy(item.out.data + op.body, op.tail.data(), size - op.body);
  if (op.tail.size() > kKeepBounce) op.tail.reset();
  item.size = size;
  const std::uint64_t got = checksum_of_kind({item.out.data, size}, op.whole_sum);
  if (got != op.sum)
    return fault.raise(XferStatus::ChecksumMismatch,
                       "file tier: key " + quote_key(item.key) + " in pack " + path() + " (offset " +
                           std::to_string(op.base) + "): checksum mismatch (stored " + checksum_hex(op.sum) +
                           ", computed " + checksum_hex(got) + ")",
                       item.key);
  return XferStatus::Ok;
}

XferStatus ObjectIo::finish_file_read(ObjectRead& op, bool* retry, Fault& fault) noexcept {
  GetItem& item = *op.item;
  release(op);
  const auto path = [&] { return dir_ + "/" + op.name; };
  const auto corrupt = [&](const std::string& why) {
    return fault.raise(XferStatus::ChecksumMismatch,
                       "file tier: key " + quote_key(item.key) + " in file " + path() + ": " + why, item.key);
  };
  if (op.offset < kFileHeaderSize) return corrupt("truncated (" + std::to_string(op.offset) + " bytes)");
  DecodedHeader h;
  if (auto why = decode_file_header(op.header.data(), &h); !why.empty()) return corrupt("bad header: " + why);
  if (h.key != item.key)
    return fault.raise(XferStatus::IoError,
                       "file tier: file " + path() + " holds key " + quote_key(h.key) + ", not " + quote_key(item.key),
                       item.key);
  if (h.size != op.hint) {
    if (op.attempts < kMaxReadAttempts) {
      op.hint = h.size;  // the file we opened is the authority: read it at its size
      *retry = true;
      return XferStatus::InProgress;
    }
    return fault.raise(XferStatus::IoError,
                       "file tier: key " + quote_key(item.key) + " kept changing size while being read (" + path() +
                           ")",
                       item.key);
  }
  if (op.offset - kFileHeaderSize < h.size)
    return corrupt("truncated: the header says " + std::to_string(h.size) + " bytes, the file holds " +
                   std::to_string(op.offset - kFileHeaderSize));
  if (h.size > op.body) std::memcpy(item.out.data + op.body, op.tail.data(), h.size - op.body);
  if (op.tail.size() > kKeepBounce) op.tail.reset();
  item.size = h.size;
  const std::uint64_t got = checksum_of_kind({item.out.data, h.size}, h.whole_sum);
  if (got != h.checksum)
    return corrupt("checksum mismatch (stored " + checksum_hex(h.checksum) + ", computed " + checksum_hex(got) + ")");
  return XferStatus::Ok;
}

void ObjectIo::release(ObjectRead& op) noexcept {
  if (op.pack) {
    op.lease.reset();  // before the pack: the lease points into it
    op.pack.reset();
  } else if (op.fd >= 0) {
    close(op.fd);
    if (spares_) spares_->reader_closed();
  }
  op.fd = -1;
}

// ---- the files of keys -------------------------------------------------------------

bool ObjectIo::file_exists(std::string_view key) const noexcept {
  return faccessat(dir_fd_, object_file_name(key).c_str(), F_OK, 0) == 0;
}

int ObjectIo::unlink_file(std::string_view key) const noexcept {
  const std::string name = object_file_name(key);
  if (unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT) return errno;
  return 0;
}

}  // namespace ferry::xfer::store
