#include "xfer/store/file_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <tuple>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/aligned_buffer.h"
#include "xfer/store/checksum.h"
#include "xfer/store/file_format.h"
#include "xfer/store/file_names.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/uring.h"

namespace ferry::xfer::store {
namespace {

constexpr const char* kLockName = ".ferry-lock";
constexpr const char* kProbeName = ".ferry-direct-probe";
constexpr int kMaxReadAttempts = 8;           // re-reads of an object that is being replaced meanwhile
constexpr std::size_t kKeepBounce = 4 << 20;  // bounce buffers above this are freed after use

// Disk full, quota and file-size limits all mean "this tier cannot take the
// object": the chain moves it (or victims) to the next tier.
XferStatus write_errno_status(int err) {
  return (err == ENOSPC || err == EDQUOT || err == EFBIG) ? XferStatus::NoSpace : XferStatus::IoError;
}

// Moves an iovec array past `n` bytes that were transferred (a short read or write).
void advance(iovec* iov, int* count, std::size_t n) {
  int i = 0;
  while (i < *count && n >= iov[i].iov_len) n -= iov[i++].iov_len;
  if (i < *count) {
    iov[i].iov_base = static_cast<std::byte*>(iov[i].iov_base) + n;
    iov[i].iov_len -= n;
  }
  std::move(iov + i, iov + *count, iov);
  *count -= i;
}

io_uring_sqe* next_sqe(Uring& ring) {
  // Never null: at most entries() operations are in flight, one SQE each, and
  // everything queued is submitted before the next wait.
  return io_uring_get_sqe(ring.get());
}

// Runs `count` items through the ring with at most slots.size() in flight.
// start(item, slot) queues an SQE and returns true, or settles the item and
// returns false. complete(slot, res) returns true when it queued another SQE for
// the slot (a short transfer or a retry), false when the slot's item is settled.
template <class Slot, class Start, class Complete>
void run_batch(Uring& ring, std::vector<Slot>& slots, std::size_t count, Start start, Complete complete) {
  std::vector<std::size_t> free_slots;
  for (std::size_t s = slots.size(); s-- > 0;) free_slots.push_back(s);
  std::size_t next = 0;
  std::size_t in_flight = 0;
  while (next < count || in_flight > 0) {
    while (!free_slots.empty() && next < count) {
      const std::size_t s = free_slots.back();
      if (start(next++, slots[s])) {
        free_slots.pop_back();
        ++in_flight;
      }
    }
    if (in_flight == 0) continue;
    for (int tries = 0;; ++tries) {
      const int rc = ring.submit_and_wait();
      if (rc == 0) break;
      // The kernel still owns the queued SQEs and their buffers: we cannot return
      // before they complete, so a failing submit is retried, loudly.
      if (tries == 0) log::app().error("file tier: io_uring submit failed: {}; retrying", std::strerror(-rc));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    unsigned head;
    io_uring_cqe* cqe;
    unsigned seen = 0;
    std::vector<std::pair<std::size_t, int>> done;
    io_uring_for_each_cqe(ring.get(), head, cqe) {
      done.emplace_back(static_cast<std::size_t>(cqe->user_data), cqe->res);
      ++seen;
    }
    io_uring_cq_advance(ring.get(), seen);
    for (const auto& [s, res] : done) {
      if (!complete(slots[s], res)) {
        free_slots.push_back(s);
        --in_flight;
      }
    }
  }
}

}  // namespace

struct FileTier::PutOp {
  std::size_t slot = 0;
  PutItem* item = nullptr;
  std::string name;
  std::string tmp;
  int fd = -1;
  bool reserved = false;
  bool truncate = false;  // O_DIRECT wrote padding past the object's end
  AlignedBuffer header{kFileHeaderSize};
  AlignedBuffer tail;    // the last partial page, padded (O_DIRECT with aligned data)
  AlignedBuffer bounce;  // the whole object, padded (O_DIRECT with unaligned data)
  iovec iov[3]{};
  int iov_count = 0;
  std::uint64_t offset = 0;
  std::uint64_t total = 0;
};

struct FileTier::GetOp {
  std::size_t slot = 0;
  GetItem* item = nullptr;
  std::string name;
  int fd = -1;
  int attempts = 0;
  std::uint64_t hint = 0;  // the size we expect the file to hold
  std::uint64_t generation = 0;
  std::size_t body = 0;  // data bytes read straight into item->out
  AlignedBuffer header{kFileHeaderSize};
  AlignedBuffer tail;  // the rest of the data (O_DIRECT: padded pages)
  iovec iov[3]{};
  int iov_count = 0;
  std::uint64_t offset = 0;
  std::uint64_t total = 0;
};

FileTier::FileTier(FileTierOptions options) : opts_(std::move(options)) {
  if (opts_.dir.empty()) throw Error("file tier: no directory given");
  if (opts_.queue_depth == 0 || opts_.queue_depth > 4096)
    throw Error("file tier " + opts_.dir + ": queue depth " + std::to_string(opts_.queue_depth) +
                " is outside 1..4096");
  if (opts_.capacity == 0) throw Error("file tier " + opts_.dir + ": capacity must be more than 0 bytes");
  spec_ = opts_.spec;
  if (spec_.empty()) {
    spec_ = "file:" + opts_.dir + (opts_.direct ? ",direct" : "") + (opts_.fsync ? ",fsync" : "");
    if (opts_.capacity != kUnbounded) spec_ += ",capacity=" + format_size(opts_.capacity);
    spec_ += ",qd=" + std::to_string(opts_.queue_depth);
  }

  std::error_code ec;
  std::filesystem::create_directories(opts_.dir, ec);
  if (ec) throw Error("file tier: cannot create directory " + opts_.dir + ": " + ec.message());
  dir_fd_ = open(opts_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) throw_errno("file tier: cannot open directory " + opts_.dir);
  try {
    lock_fd_ = openat(dir_fd_, kLockName, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) throw_errno("file tier: cannot create " + opts_.dir + "/" + kLockName);
    if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK)
        throw Error("file tier: directory " + opts_.dir +
                    " is in use by another tier (it holds the lock on " + kLockName +
                    "); give each agent its own directory");
      throw_errno("file tier: cannot lock " + opts_.dir + "/" + kLockName);
    }
    if (opts_.direct) probe_direct();
    rings_ = std::make_unique<UringPool>(opts_.queue_depth);
    { auto ring = rings_->take(); }  // fail now, at set-up, if io_uring is refused
    scan();
  } catch (...) {
    if (lock_fd_ >= 0) close(lock_fd_);
    close(dir_fd_);
    throw;
  }
}

FileTier::~FileTier() {
  rings_.reset();
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
  if (dir_fd_ >= 0) close(dir_fd_);
}

void FileTier::probe_direct() {
  const int fd = openat(dir_fd_, kProbeName, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    AlignedBuffer page(kIoAlign);
    std::memset(page.data(), 0, kIoAlign);
    if (pwrite(fd, page.data(), kIoAlign, 0) != static_cast<ssize_t>(kIoAlign)) err = errno ? errno : EIO;
    close(fd);
    unlinkat(dir_fd_, kProbeName, 0);
  }
  if (err == EINVAL || err == EOPNOTSUPP)
    throw Error("file tier " + opts_.dir + ": the file system refuses O_DIRECT (" + std::strerror(err) +
                "; tmpfs does); drop ',direct' or use a directory on a disk file system");
  if (err != 0) throw Error("file tier " + opts_.dir + ": O_DIRECT probe failed: " + std::strerror(err));
}

void FileTier::scan() {
  const int fd = dup(dir_fd_);
  if (fd < 0) throw_errno("file tier: dup");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    throw_errno("file tier: cannot list " + opts_.dir);
  }
  rewinddir(d);
  struct Found {
    std::int64_t mtime_ns;
    std::string key;
    std::uint64_t size;
    std::uint64_t checksum;
  };
  std::vector<Found> found;
  std::size_t stale = 0, bad = 0;
  AlignedBuffer header(kFileHeaderSize);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (is_temp_file_name(name)) {
      // A writer died before its rename: the object it was writing never existed.
      if (unlinkat(dir_fd_, name.c_str(), 0) == 0) ++stale;
      continue;
    }
    if (!is_object_file_name(name)) continue;  // ".", "..", the lock file, foreign files
    const auto skip = [&](const std::string& why) {
      log::app().warn("file tier {}: skipping {}: {}", opts_.dir, name, why);
      ++bad;
    };
    const int f = openat(dir_fd_, name.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0) {
      skip(std::strerror(errno));
      continue;
    }
    struct stat st {};
    const ssize_t n = fstat(f, &st) == 0 ? pread(f, header.data(), kFileHeaderSize, 0) : -1;
    const int err = errno;
    close(f);
    if (n < 0) {
      skip(std::strerror(err));
      continue;
    }
    if (n != static_cast<ssize_t>(kFileHeaderSize)) {
      skip("shorter than a header (" + std::to_string(n) + " bytes)");
      continue;
    }
    DecodedHeader h;
    if (auto why = decode_file_header(header.data(), &h); !why.empty()) {
      skip(why);
      continue;
    }
    if (object_file_name(h.key) != name) {
      skip("its header names key " + quote_key(h.key) + ", which belongs in " + object_file_name(h.key));
      continue;
    }
    if (static_cast<std::uint64_t>(st.st_size) != kFileHeaderSize + h.size) {
      skip("the header says " + std::to_string(h.size) + " data bytes, the file holds " +
           std::to_string(st.st_size - static_cast<std::int64_t>(kFileHeaderSize)));
      continue;
    }
    found.push_back(
        {st.st_mtim.tv_sec * 1'000'000'000ll + st.st_mtim.tv_nsec, std::move(h.key), h.size, h.checksum});
  }
  closedir(d);

  // Oldest first, so that the newest file ends at the front of the LRU list: the
  // order survives a restart as "last written" (reads do not touch mtime).
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.mtime_ns, a.key) < std::tie(b.mtime_ns, b.key);
  });
  std::lock_guard lock(mu_);
  for (auto& f : found) {
    lru_.emplace_front(f.key);
    index_.emplace(std::move(f.key), Entry{f.size, f.checksum, next_generation_++, lru_.begin()});
    used_ += f.size;
  }
  if (!found.empty() || stale > 0 || bad > 0)
    log::app().info(
        "file tier {}: found {} object(s) ({}), removed {} stale temporary file(s), skipped {} bad file(s)",
        opts_.dir, found.size(), format_size(used_), stale, bad);
  if (opts_.capacity != kUnbounded && used_ > opts_.capacity)
    log::app().warn("file tier {}: holds {} but its capacity is {}; new puts wait for evictions", opts_.dir,
                    format_size(used_), format_size(opts_.capacity));
}

std::mutex& FileTier::stripe(std::string_view key) {
  return stripes_[KeyHash{}(key) % stripes_.size()];
}

std::string FileTier::path_of(std::string_view key) const {
  return opts_.dir + "/" + object_file_name(key);
}

std::uint64_t FileTier::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

// ---- put ----------------------------------------------------------------------

void FileTier::put(std::span<PutItem> items) {
  if (items.empty()) return;
  auto ring = rings_->take();
  std::vector<PutOp> slots(std::min<std::size_t>(items.size(), ring->entries()));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  run_batch(
      *ring, slots, items.size(),
      [&](std::size_t i, PutOp& op) {
        op.item = &items[i];
        if (!start_put(op)) return false;
        io_uring_sqe* sqe = next_sqe(*ring);
        io_uring_prep_writev(sqe, op.fd, op.iov, op.iov_count, 0);
        io_uring_sqe_set_data64(sqe, op.slot);
        return true;
      },
      [&](PutOp& op, int res) {
        if (res < 0) {
          fail_put(op, write_errno_status(-res),
                   "file tier " + opts_.dir + ": writing " + op.tmp + " for key " + quote_key(op.item->key) +
                       ": " + std::strerror(-res));
          return false;
        }
        if (res == 0) {
          fail_put(op, XferStatus::IoError,
                   "file tier " + opts_.dir + ": writing " + op.tmp + " made no progress");
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        if (op.offset < op.total) {  // short write: queue the rest
          advance(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          io_uring_sqe* sqe = next_sqe(*ring);
          io_uring_prep_writev(sqe, op.fd, op.iov, op.iov_count, op.offset);
          io_uring_sqe_set_data64(sqe, op.slot);
          return true;
        }
        finish_put(op);
        return false;
      });
}

bool FileTier::start_put(PutOp& op) {
  PutItem& item = *op.item;
  op.fd = -1;
  op.reserved = false;
  op.truncate = false;
  op.offset = 0;
  op.tmp.clear();
  if (item.key.empty()) {
    item.status = XferStatus::InvalidDesc;
    item.error = "file tier: empty key";
    return false;
  }
  if (item.key.size() > kMaxFileKeyLength) {
    item.status = XferStatus::InvalidDesc;
    item.error = "file tier: a key of " + std::to_string(item.key.size()) + " bytes exceeds the limit of " +
                 std::to_string(kMaxFileKeyLength);
    return false;
  }
  const std::uint64_t size = item.data.size;
  {
    std::lock_guard lock(mu_);
    if (opts_.capacity != kUnbounded &&
        (size > opts_.capacity || used_ + reserved_ + size > opts_.capacity)) {
      item.status = XferStatus::NoSpace;
      item.error = "file tier " + opts_.dir + ": full (" + format_size(used_) + " stored + " +
                   format_size(reserved_) + " being written + " + format_size(size) + " > capacity " +
                   format_size(opts_.capacity) + ")";
      return false;
    }
    reserved_ += size;
    op.reserved = true;
  }
  op.name = object_file_name(item.key);
  op.tmp = temp_file_name(op.name);
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (opts_.direct ? O_DIRECT : 0);
  op.fd = openat(dir_fd_, op.tmp.c_str(), flags, 0644);
  if (op.fd < 0) {
    const int err = errno;
    op.tmp.clear();  // nothing to remove
    fail_put(op, write_errno_status(err),
             "file tier " + opts_.dir + ": cannot create a file for key " + quote_key(item.key) + ": " +
                 std::strerror(err));
    return false;
  }

  encode_file_header(item.key, size, item.checksum, op.header.data());
  op.iov[0] = {op.header.data(), kFileHeaderSize};
  op.iov_count = 1;
  if (!opts_.direct) {
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
  return true;  // the caller queues the write
}

void FileTier::fail_put(PutOp& op, XferStatus status, std::string error) {
  if (op.fd >= 0) close(op.fd);
  op.fd = -1;
  if (!op.tmp.empty()) unlinkat(dir_fd_, op.tmp.c_str(), 0);  // never leave a half-written file behind
  if (op.reserved) {
    std::lock_guard lock(mu_);
    reserved_ -= op.item->data.size;
    op.reserved = false;
  }
  if (op.bounce.size() > kKeepBounce) op.bounce.reset();
  op.item->status = status;
  op.item->error = std::move(error);
}

void FileTier::finish_put(PutOp& op) {
  PutItem& item = *op.item;
  const std::uint64_t size = item.data.size;
  const auto fail_errno = [&](const char* what) {
    const int err = errno;
    fail_put(op, write_errno_status(err),
             "file tier " + opts_.dir + ": " + what + " " + op.tmp + " for key " + quote_key(item.key) +
                 ": " + std::strerror(err));
  };
  if (op.truncate && ftruncate(op.fd, static_cast<off_t>(kFileHeaderSize + size)) != 0)
    return fail_errno("truncating");
  if (opts_.fsync && fsync(op.fd) != 0) return fail_errno("fsync of");
  if (close(std::exchange(op.fd, -1)) != 0) return fail_errno("closing");

  // Rename and index update under the key's stripe: two puts of one key publish
  // in the same order on disk and in the index, so the index always describes
  // the file that is there.
  {
    std::lock_guard key_lock(stripe(item.key));
    if (renameat(dir_fd_, op.tmp.c_str(), dir_fd_, op.name.c_str()) != 0) return fail_errno("renaming");
    op.tmp.clear();
    std::lock_guard lock(mu_);
    reserved_ -= size;
    op.reserved = false;
    auto it = index_.find(item.key);
    if (it == index_.end()) {
      lru_.emplace_front(item.key);
      index_.emplace(std::string(item.key), Entry{size, item.checksum, next_generation_++, lru_.begin()});
    } else {
      used_ -= it->second.size;
      it->second.size = size;
      it->second.checksum = item.checksum;
      it->second.generation = next_generation_++;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    used_ += size;
  }
  if (opts_.fsync && fsync(dir_fd_) != 0) {
    // The object is in place and readable; only its durability across a power
    // cut is in doubt. Report it, so the caller does not count on it.
    const int err = errno;
    item.status = XferStatus::IoError;
    item.error = "file tier " + opts_.dir + ": fsync of the directory after publishing " + op.name + ": " +
                 std::strerror(err);
  } else {
    item.status = XferStatus::Ok;
    item.error.clear();
  }
  if (op.bounce.size() > kKeepBounce) op.bounce.reset();
}

// ---- get ----------------------------------------------------------------------

void FileTier::get(std::span<GetItem> items) {
  if (items.empty()) return;
  auto ring = rings_->take();
  std::vector<GetOp> slots(std::min<std::size_t>(items.size(), ring->entries()));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  const auto queue_read = [&](GetOp& op) {
    io_uring_sqe* sqe = next_sqe(*ring);
    io_uring_prep_readv(sqe, op.fd, op.iov, op.iov_count, op.offset);
    io_uring_sqe_set_data64(sqe, op.slot);
  };
  run_batch(
      *ring, slots, items.size(),
      [&](std::size_t i, GetOp& op) {
        op.item = &items[i];
        op.attempts = 0;
        op.hint = 0;
        if (!start_get(op)) return false;
        queue_read(op);
        return true;
      },
      [&](GetOp& op, int res) {
        if (res < 0) {
          close(std::exchange(op.fd, -1));
          op.item->status = XferStatus::IoError;
          op.item->error = "file tier " + opts_.dir + ": reading " + op.name + " for key " +
                           quote_key(op.item->key) + ": " + std::strerror(-res);
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        // Done at the object's end: an O_DIRECT read of the padded last page comes
        // back short there, and asking again would only return end of file.
        if (res > 0 && op.offset < kFileHeaderSize + op.hint) {  // short read: queue the rest
          advance(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          queue_read(op);
          return true;
        }
        bool retry = false;
        finish_get(op, &retry);  // at the expected length, or at end of file
        if (retry && start_get(op)) {
          queue_read(op);
          return true;
        }
        return false;
      });
}

// Looks the key up (or, on a retry, keeps the size the file's header gave), opens
// the file and lays out the read. Returns false when the item is settled.
bool FileTier::start_get(GetOp& op) {
  GetItem& item = *op.item;
  op.fd = -1;
  op.offset = 0;
  if (item.key.empty()) {
    item.status = XferStatus::InvalidDesc;
    item.error = "file tier: empty key";
    return false;
  }
  if (op.attempts == 0) {
    std::lock_guard lock(mu_);
    auto it = index_.find(item.key);
    if (it == index_.end()) {
      item.status = XferStatus::NotFound;
      item.error = "file tier " + opts_.dir + ": no object " + quote_key(item.key);
      return false;
    }
    op.hint = it->second.size;
    op.generation = it->second.generation;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  ++op.attempts;
  item.size = op.hint;
  if (item.out.size < op.hint) {
    item.status = XferStatus::TooLarge;
    item.error = "file tier: object " + quote_key(item.key) + " has " + std::to_string(op.hint) +
                 " bytes, the buffer holds " + std::to_string(item.out.size);
    return false;
  }
  op.name = object_file_name(item.key);
  op.fd = openat(dir_fd_, op.name.c_str(), O_RDONLY | O_CLOEXEC | (opts_.direct ? O_DIRECT : 0));
  if (op.fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      // Removed meanwhile, or deleted behind our back: either way it is gone.
      if (op.attempts == 1) forget_vanished(item.key, op.generation);
      item.status = XferStatus::NotFound;
      item.error =
          "file tier " + opts_.dir + ": object " + quote_key(item.key) + " was removed (" + op.name + ")";
    } else {
      item.status = XferStatus::IoError;
      item.error = "file tier " + opts_.dir + ": cannot open " + op.name + " for key " + quote_key(item.key) +
                   ": " + std::strerror(err);
    }
    return false;
  }

  const std::uint64_t size = op.hint;
  op.iov[0] = {op.header.data(), kFileHeaderSize};
  op.iov_count = 1;
  op.body = 0;
  if (!opts_.direct) {
    op.body = size;
    op.total = kFileHeaderSize + size;
  } else {
    // O_DIRECT reads whole pages: whole pages land in the caller's buffer when it
    // is page aligned; the rest (or everything) goes through a bounce buffer.
    op.body = io_aligned(item.out.data) ? (size & ~(kIoAlign - 1)) : 0;
    op.total = kFileHeaderSize + io_round_up(size);
  }
  if (op.body > 0) op.iov[op.iov_count++] = {item.out.data, op.body};
  const std::size_t rest = op.total - kFileHeaderSize - op.body;
  if (rest > 0) {
    op.tail.resize(rest);
    op.iov[op.iov_count++] = {op.tail.data(), rest};
  }
  return true;
}

// Checks what was read (op.offset bytes); sets *retry when the file was replaced
// by an object of another size between the lookup and the read.
void FileTier::finish_get(GetOp& op, bool* retry) {
  GetItem& item = *op.item;
  close(std::exchange(op.fd, -1));
  const std::string path = opts_.dir + "/" + op.name;
  const auto corrupt = [&](const std::string& why) {
    item.status = XferStatus::ChecksumMismatch;
    item.error = "file tier: key " + quote_key(item.key) + " in file " + path + ": " + why;
  };
  if (op.offset < kFileHeaderSize) return corrupt("truncated (" + std::to_string(op.offset) + " bytes)");
  DecodedHeader h;
  if (auto why = decode_file_header(op.header.data(), &h); !why.empty()) return corrupt("bad header: " + why);
  if (h.key != item.key) {
    item.status = XferStatus::IoError;
    item.error =
        "file tier: file " + path + " holds key " + quote_key(h.key) + ", not " + quote_key(item.key);
    return;
  }
  if (h.size != op.hint) {
    if (op.attempts < kMaxReadAttempts) {
      op.hint = h.size;  // the file we opened is the authority: read it at its size
      *retry = true;
      return;
    }
    item.status = XferStatus::IoError;
    item.error =
        "file tier: key " + quote_key(item.key) + " kept changing size while being read (" + path + ")";
    return;
  }
  if (op.offset - kFileHeaderSize < h.size)
    return corrupt("truncated: the header says " + std::to_string(h.size) + " bytes, the file holds " +
                   std::to_string(op.offset - kFileHeaderSize));
  if (h.size > op.body) std::memcpy(item.out.data + op.body, op.tail.data(), h.size - op.body);
  if (op.tail.size() > kKeepBounce) op.tail.reset();
  item.size = h.size;
  const std::uint64_t got = checksum({item.out.data, h.size});
  if (got != h.checksum)
    return corrupt("checksum mismatch (stored " + checksum_hex(h.checksum) + ", computed " +
                   checksum_hex(got) + ")");
  item.status = XferStatus::Ok;
  item.error.clear();
}

void FileTier::forget_vanished(std::string_view key, std::uint64_t generation) {
  std::lock_guard key_lock(stripe(key));
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end() || it->second.generation != generation) return;  // removed or re-published
  if (faccessat(dir_fd_, object_file_name(key).c_str(), F_OK, 0) == 0) return;
  log::app().warn("file tier {}: {} vanished from the directory; dropping key {}", opts_.dir,
                  object_file_name(key), quote_key(key));
  used_ -= it->second.size;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

// ---- index --------------------------------------------------------------------

std::optional<ObjectMeta> FileTier::stat(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return ObjectMeta{it->second.size, it->second.checksum};
}

bool FileTier::remove(std::string_view key) {
  std::lock_guard key_lock(stripe(key));
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    used_ -= it->second.size;
    lru_.erase(it->second.lru);
    index_.erase(it);
  }
  const std::string name = object_file_name(key);
  if (unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT)
    log::app().warn("file tier {}: cannot remove {}: {}; it comes back after a restart", opts_.dir, name,
                    std::strerror(errno));
  else if (opts_.fsync)
    fsync(dir_fd_);
  return true;
}

std::vector<std::pair<std::string, ObjectMeta>> FileTier::list() {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, ObjectMeta>> out;
  out.reserve(index_.size());
  for (const auto& [key, e] : index_) out.emplace_back(key, ObjectMeta{e.size, e.checksum});
  return out;
}

std::vector<std::string> FileTier::lru_victims(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  std::uint64_t sum = 0;
  for (auto it = lru_.rbegin(); it != lru_.rend() && sum < bytes; ++it) {
    out.push_back(*it);
    sum += index_.find(*it)->second.size;
  }
  return out;
}

}  // namespace ferry::xfer::store
