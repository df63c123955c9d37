#include "xfer/store/file/file_tier.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <unordered_set>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/compactor.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/helper_threads.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/file/startup_scan.h"
#include "xfer/store/file/tombstone_log.h"
#include "xfer/store/file/uring.h"
#include "xfer/store/file/uring_batch.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"

namespace ferry::xfer::store {
namespace {

constexpr const char* kLockName = ".ferry-lock";
constexpr const char* kProbeName = ".ferry-direct-probe";
constexpr std::size_t kMinObjectsPerThread = 4;  // a call is split into parts of at least this many

bool has_duplicate_keys(std::span<PutItem* const> items) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(items.size());
  for (const PutItem* item : items)
    if (!seen.insert(item->key).second) return true;
  return false;
}

FileTierOptions normalized(FileTierOptions o) {
  if (o.pack_max < kIoAlign) o.pack_max = kIoAlign;
  return o;
}

PackLimits limits_of(const FileTierOptions& o) {
  PackLimits l;
  l.pack_max = o.pack_max;
  l.compact_min_dead = o.compact_min_dead;
  l.compact_small_packs = o.compact_small_packs;
  return l;
}

}  // namespace

FileTier::FileTier(FileTierOptions options)
    : opts_(normalized(std::move(options))), files_(-1, {}, false, false), index_(limits_of(opts_)) {
  if (opts_.dir.empty()) throw Error("file tier: no directory given");
  if (opts_.queue_depth == 0 || opts_.queue_depth > 4096)
    throw Error("file tier " + opts_.dir + ": queue depth " + std::to_string(opts_.queue_depth) +
                " is outside 1..4096");
  if (opts_.capacity == 0) throw Error("file tier " + opts_.dir + ": capacity must be more than 0 bytes");
  if (opts_.pack_threshold > opts_.pack_max)
    throw Error("file tier " + opts_.dir + ": pack=" + format_size(opts_.pack_threshold) +
                " is larger than a pack (" + format_size(opts_.pack_max) + ")");
  spec_ = opts_.spec;
  if (spec_.empty()) {
    spec_ = "file:" + opts_.dir + (opts_.direct ? ",direct" : "") + (opts_.fsync ? ",fsync" : "");
    if (opts_.capacity != kUnbounded) spec_ += ",capacity=" + format_size(opts_.capacity);
    spec_ += ",qd=" + std::to_string(opts_.queue_depth);
    spec_ += ",pack=" + (opts_.pack_threshold == 0 ? std::string("0") : format_size(opts_.pack_threshold));
    if (opts_.threads != FileTierOptions{}.threads) spec_ += ",threads=" + std::to_string(opts_.threads);
  }

  std::error_code ec;
  std::filesystem::create_directories(opts_.dir, ec);
  if (ec) throw Error("file tier: cannot create directory " + opts_.dir + ": " + ec.message());
  dir_fd_ = open(opts_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) throw_errno("file tier: cannot open directory " + opts_.dir);
  files_ = ObjectIo(dir_fd_, opts_.dir, opts_.direct, opts_.fsync);
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
    pack_fds_ = std::make_unique<PackFds>(dir_fd_, opts_.direct, opts_.open_packs);
    rings_ = std::make_unique<UringPool>(opts_.queue_depth);
    if (!opts_.direct && opts_.threads > 1) helpers_ = std::make_unique<HelperThreads>(opts_.threads - 1);
    { auto ring = rings_->take(); }  // fail now, at set-up, if io_uring is refused
    ScanResult found = scan_tier_directory(dir_fd_, opts_, *pack_fds_, index_);
    tombstones_ = std::move(found.tombstones);
    next_seq_.store(found.next_seq, std::memory_order_relaxed);
    CompactorContext ctx;
    ctx.opts = &opts_;
    ctx.dir_fd = dir_fd_;
    ctx.mu = &mu_;
    ctx.index = &index_;
    ctx.stripes = &stripes_;
    ctx.fds = pack_fds_.get();
    ctx.rings = rings_.get();
    ctx.tombstones = tombstones_.get();
    ctx.next_seq = &next_seq_;
    compactor_ = std::make_unique<Compactor>(ctx, found.tombstones_kept);
  } catch (...) {
    index_.clear();
    if (lock_fd_ >= 0) close(lock_fd_);
    close(dir_fd_);
    throw;
  }
}

FileTier::~FileTier() {
  compactor_.reset();  // stops its thread
  helpers_.reset();
  rings_.reset();
  tombstones_.reset();
  index_.clear();  // closes the packs
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

std::string FileTier::path_of(std::string_view key) const {
  {
    std::lock_guard lock(mu_);
    const IndexEntry* e = index_.find(key);
    if (e != nullptr && e->pack) return opts_.dir + "/" + e->pack->name;
  }
  return opts_.dir + "/" + object_file_name(key);
}

std::uint64_t FileTier::used() const {
  std::lock_guard lock(mu_);
  return index_.used();
}

FileTierStats FileTier::stats() const {
  FileTierStats s;
  {
    std::lock_guard lock(mu_);
    const PackAccounting& p = index_.packs();
    s.packs = p.count();
    s.packed_objects = p.packed_objects();
    s.pack_live_bytes = p.live_bytes();
    s.pack_dead_bytes = p.dead_bytes();
    s.compactions = p.compactions();
    s.small_packs = p.small_packs();
  }
  s.tombstones = tombstones_->records();
  s.open_packs = pack_fds_->open_count();
  s.pack_reopens = pack_fds_->reopens();
  return s;
}

std::size_t FileTier::compact() { return compactor_->run(true); }

bool FileTier::reserve(PutItem& item) noexcept {
  const std::uint64_t size = item.data.size;
  std::lock_guard lock(mu_);
  if (index_.try_reserve(size, opts_.capacity)) return true;
  item.status = XferStatus::NoSpace;
  log::app().debug("file tier {}: full ({} stored + {} being written + {} > capacity {})", opts_.dir,
                   format_size(index_.used()), format_size(index_.reserved()), format_size(size),
                   format_size(opts_.capacity));
  return false;
}

void FileTier::unreserve(std::uint64_t size) noexcept {
  std::lock_guard lock(mu_);
  index_.unreserve(size);
}

// ---- calls shared between threads -----------------------------------------------

std::uint64_t FileTier::put_window_bytes() const {
  return (std::uint64_t{opts_.queue_depth} << 19) * (helpers_ ? helpers_->helpers() + 1 : 1);
}

bool FileTier::split_call(std::size_t count, std::size_t max_parts, const std::function<std::uint64_t(std::size_t)>& weight,
                          const std::function<void(Uring&, std::size_t first, std::size_t count, unsigned depth)>& part) {
  // Only a call with enough objects to pay for waking the helpers, and only
  // while it is the one put or get running: an agent's copy threads already
  // call in parallel, and more threads would take turns on its cores. At most
  // qd parts, so that no more than qd operations are in flight.
  if (!helpers_ || calls_running_.load(std::memory_order_relaxed) != 1) return false;
  const std::size_t parts = std::min({std::size_t{helpers_->helpers()} + 1, count / kMinObjectsPerThread, max_parts,
                                      std::size_t{opts_.queue_depth}});
  if (parts < 2) return false;
  // Where each part starts: at equal shares of the weight (or of the count),
  // each part at least one object.
  std::vector<std::size_t> first(parts + 1, count);
  first[0] = 0;
  if (weight) {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) total += weight(i);
    std::uint64_t sum = 0;
    std::size_t i = 0;
    for (std::size_t p = 1; p < parts; ++p) {
      while (i < count && sum < total / parts * p) sum += weight(i++);
      first[p] = std::clamp(i, first[p - 1] + 1, count - (parts - p));
      while (i < first[p]) sum += weight(i++);
    }
  } else {
    for (std::size_t p = 1; p < parts; ++p) first[p] = count * p / parts;
  }
  // Every part's ring before any part starts: a ring that cannot be made (too
  // many open files) leaves the call unsplit rather than half done.
  std::vector<UringPool::Lease> rings;
  try {
    for (std::size_t p = 0; p < parts; ++p) rings.push_back(rings_->take());
  } catch (const Error& e) {
    log::app().warn("file tier {}: running a call on one thread: {}", opts_.dir, e.what());
    return false;
  }
  const auto depth = static_cast<unsigned>(opts_.queue_depth / parts);
  return helpers_->try_run(static_cast<unsigned>(parts), [&](unsigned p) {
    part(*rings[p], first[p], first[p + 1] - first[p], depth);
  });
}

namespace {

// A ring for a call; none (raised) when a new one cannot be made (too many
// open files), which fails the call's items.
std::optional<UringPool::Lease> take_ring(UringPool& rings, const std::string& dir, Fault& fault) noexcept {
  try {
    return rings.take();
  } catch (const std::exception& e) {
    static_cast<void>(fault.raise(XferStatus::IoError, "file tier " + dir + ": " + e.what()));
    return std::nullopt;
  }
}

}  // namespace

// ---- put ----------------------------------------------------------------------

void FileTier::put(std::span<PutItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  std::vector<PutItem*> files, packed;
  for (auto& item : items) {
    if (item.key.empty()) {
      item.status = fault.raise(XferStatus::InvalidDesc, "file tier: empty key");
    } else if (item.key.size() > kMaxFileKeyLength) {
      item.status = fault.raise(XferStatus::InvalidDesc,
                                "file tier: a key of " + std::to_string(item.key.size()) +
                                    " bytes exceeds the limit of " + std::to_string(kMaxFileKeyLength),
                                item.key);
    } else {
      (opts_.pack_threshold > 0 && item.data.size <= opts_.pack_threshold ? packed : files).push_back(&item);
    }
  }
  const CallCount counted(calls_running_);
  const bool any_packed = !packed.empty();
  // A buffered pack write is a copy into the page cache, one worker per file
  // (writes to one file hold its lock): split, the call writes a pack per
  // thread. Only with enough bytes for packs that are not small (compaction
  // would merge them, writing them twice), and never when a key comes twice:
  // the later must win, and two packs would publish in either order.
  if (any_packed && helpers_) {
    std::uint64_t bytes = 0;
    for (const PutItem* item : packed) bytes += item->data.size;
    const std::span<PutItem*> all(packed);
    const auto max_parts =
        static_cast<std::size_t>(bytes / std::max<std::uint64_t>(1, index_.packs().small_pack_bytes()));
    if (max_parts >= 2 && !has_duplicate_keys(all) &&
        split_call(
            all.size(), max_parts, [&](std::size_t i) { return all[i]->data.size; },
            [&](Uring& ring, std::size_t first, std::size_t count, unsigned depth) {
              put_packed(ring, all.subspan(first, count), depth, fault);
            }))
      packed.clear();
  }
  auto ring = take_ring(*rings_, opts_.dir, fault);
  if (!ring) {
    for (PutItem* item : packed) item->status = XferStatus::IoError;
    for (PutItem* item : files) item->status = XferStatus::IoError;
    return;
  }
  if (!packed.empty()) put_packed(**ring, packed, opts_.queue_depth, fault);
  if (!files.empty()) put_files(**ring, files, fault);
  if (any_packed) compactor_->wake_if_due();
}

void FileTier::put_packed(Uring& ring, std::span<PutItem*> items, unsigned depth, Fault& fault) noexcept {
  std::vector<PutItem*> group;
  std::vector<PackItem> pack_items;
  EmptiedPacks emptied;
  for (std::size_t i = 0; i < items.size();) {
    group.clear();
    pack_items.clear();
    std::uint64_t bytes = 0;
    for (; i < items.size(); ++i) {
      PutItem& item = *items[i];
      const std::uint64_t padded = io_round_up(item.data.size);
      if (!group.empty() && bytes + padded > opts_.pack_max) break;
      if (!reserve(item)) continue;
      group.push_back(&item);
      pack_items.push_back(PackItem{item.key, item.data, item.checksum, 0, 0});
      bytes += padded;
    }
    if (group.empty()) continue;
    const std::uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
    for (auto& p : pack_items) p.seq = seq;
    PackWriteResult w = write_pack(ring, dir_fd_, opts_.dir, seq, pack_items, opts_.direct, opts_.fsync, depth);
    if (w.fd < 0) {
      // Nothing of this pack was published: exactly its items fail, with one
      // message for the pack.
      const XferStatus status = fault.raise(
          write_errno_status(w.err),
          w.error + " (pack of " + std::to_string(group.size()) + " object(s), the first " +
              quote_key(group.front()->key) + ")",
          group.front()->key);
      for (PutItem* item : group) {
        unreserve(item->data.size);
        item->status = status;
      }
      continue;
    }
    auto file = std::make_shared<PackFile>(pack_fds_.get(), seq, pack_file_name(seq), w.fd, w.file_size);
    {
      std::lock_guard lock(mu_);
      index_.packs().add_new(file, pack_items);
    }
    for (std::size_t k = 0; k < group.size(); ++k) {
      PutItem& item = *group[k];
      std::lock_guard key_lock(stripes_.of(item.key));
      bool unlink_file = false;
      {
        std::lock_guard lock(mu_);
        index_.unreserve(item.data.size);
        if (!index_.superseded(item.key, seq)) {
          index_.install(item.key, file, pack_items[k].offset, item.data.size, item.checksum, seq, &unlink_file,
                         &emptied);
        } else {
          // A newer version won meanwhile, so this record is dead at birth; but it
          // stays in the pack, and a remove of the newer version (an object file,
          // say) must leave a tombstone that hides it after a restart.
          index_.shadow(item.key, seq);
        }
      }
      if (unlink_file) {
        if (const int err = files_.unlink_file(item.key); err != 0)
          log::app().warn("file tier {}: cannot remove {} (replaced by a packed version): {}", opts_.dir,
                          object_file_name(item.key), std::strerror(err));
      }
      item.status = XferStatus::Ok;
    }
    {
      std::lock_guard lock(mu_);
      index_.packs().unpin(seq, &emptied);
    }
    unlink_packs(dir_fd_, opts_.dir, emptied);
    emptied.clear();
  }
}

void FileTier::put_files(Uring& ring, std::span<PutItem*> items, Fault& fault) noexcept {
  std::vector<ObjectWrite> slots(std::min<std::size_t>(items.size(), ring.entries()));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  run_batch(
      ring, slots, items.size(),
      [&](std::size_t i, ObjectWrite& op) {
        op.item = items[i];
        if (!start_put(op, fault)) return false;
        io_uring_sqe* sqe = next_sqe(ring);
        io_uring_prep_writev(sqe, op.fd, op.iov, op.iov_count, 0);
        io_uring_sqe_set_data64(sqe, op.slot);
        return true;
      },
      [&](ObjectWrite& op, int res) {
        if (res <= 0) {
          fail_put(op, files_.write_failed(op, res, fault));
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        if (op.offset < op.total) {  // short write: queue the rest
          advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          io_uring_sqe* sqe = next_sqe(ring);
          io_uring_prep_writev(sqe, op.fd, op.iov, op.iov_count, op.offset);
          io_uring_sqe_set_data64(sqe, op.slot);
          return true;
        }
        finish_put(op, fault);
        return false;
      });
}

// Reserves room, takes the version's seq and creates the temporary; false when
// the item is settled.
bool FileTier::start_put(ObjectWrite& op, Fault& fault) noexcept {
  op.reserved = false;
  op.tmp.clear();
  op.fd = -1;
  if (!reserve(*op.item)) return false;
  op.reserved = true;
  op.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  if (const XferStatus s = files_.open_write(op, fault); s != XferStatus::Ok) {
    fail_put(op, s);
    return false;
  }
  return true;  // the caller queues the write
}

void FileTier::fail_put(ObjectWrite& op, XferStatus status) noexcept {
  files_.discard(op);
  if (op.reserved) {
    unreserve(op.item->data.size);
    op.reserved = false;
  }
  op.item->status = status;
}

void FileTier::finish_put(ObjectWrite& op, Fault& fault) noexcept {
  PutItem& item = *op.item;
  const std::uint64_t size = item.data.size;
  if (const XferStatus s = files_.close_write(op, fault); s != XferStatus::Ok) return fail_put(op, s);

  // Rename and index update under the key's stripe: two puts of one key publish
  // in seq order on disk and in the index, so the index always describes the
  // version a restart would pick.
  EmptiedPacks emptied;
  {
    std::lock_guard key_lock(stripes_.of(item.key));
    bool stale = false;
    {
      std::lock_guard lock(mu_);
      stale = index_.superseded(item.key, op.seq);
    }
    if (stale) {
      // A put of this key that started later has already published: it wins,
      // as it would after a restart. This one ends as if overwritten at once.
      fail_put(op, XferStatus::Ok);
      return;
    }
    if (const XferStatus s = files_.publish(op, fault); s != XferStatus::Ok) return fail_put(op, s);
    std::lock_guard lock(mu_);
    index_.unreserve(size);
    op.reserved = false;
    bool unused = false;
    index_.install(item.key, nullptr, 0, size, item.checksum, op.seq, &unused, &emptied);
  }
  unlink_packs(dir_fd_, opts_.dir, emptied);
  item.status = files_.sync_dir_after(op, fault);
  if (op.bounce.size() > kKeepBounce) op.bounce.reset();
}

// ---- get ----------------------------------------------------------------------

void FileTier::get(std::span<GetItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  const CallCount counted(calls_running_);
  const bool split =
      split_call(items.size(), items.size(), nullptr, [&](Uring& ring, std::size_t first, std::size_t count, unsigned depth) {
        get_part(ring, items.subspan(first, count), depth, fault);
      });
  if (split) return;
  auto ring = take_ring(*rings_, opts_.dir, fault);
  if (!ring) {
    for (GetItem& item : items) item.status = XferStatus::IoError;
    return;
  }
  get_part(**ring, items, opts_.queue_depth, fault);
}

void FileTier::get_part(Uring& ring, std::span<GetItem> items, unsigned depth, Fault& fault) noexcept {
  std::vector<ObjectRead> slots(std::min<std::size_t>({items.size(), ring.entries(), depth}));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  const auto queue_read = [&](ObjectRead& op) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_readv(sqe, op.fd, op.iov, op.iov_count, op.base + op.offset);
    io_uring_sqe_set_data64(sqe, op.slot);
  };
  run_batch(
      ring, slots, items.size(),
      [&](std::size_t i, ObjectRead& op) {
        op.item = &items[i];
        op.attempts = 0;
        op.relookup = true;
        op.hint = 0;
        if (!start_get(op, fault)) return false;
        queue_read(op);
        return true;
      },
      [&](ObjectRead& op, int res) {
        if (res < 0) {
          op.item->status = files_.read_failed(op, res, fault);
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        // Done at the object's end: an O_DIRECT read of the padded last page comes
        // back short there, and asking again would only return end of file.
        const std::uint64_t end = op.pack ? op.hint : kFileHeaderSize + op.hint;
        if (res > 0 && op.offset < end) {  // short read: queue the rest
          advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          queue_read(op);
          return true;
        }
        if (op.pack) {
          op.item->status = files_.finish_packed_read(op, fault);
          return false;
        }
        bool retry = false;
        const XferStatus s = files_.finish_file_read(op, &retry, fault);  // at the expected length, or at end of file
        if (!retry) {
          op.item->status = s;
          return false;
        }
        if (start_get(op, fault)) {
          queue_read(op);
          return true;
        }
        return false;
      });
}

// Looks the key up (or, on a retry, keeps the size the file's header gave),
// opens the file or takes the pack's descriptor, and lays out the read. Returns
// false when the item is settled.
bool FileTier::start_get(ObjectRead& op, Fault& fault) noexcept {
  GetItem& item = *op.item;
  op.fd = -1;
  op.offset = 0;
  op.lease.reset();
  op.pack.reset();
  op.base = 0;
  if (item.key.empty()) {
    item.status = fault.raise(XferStatus::InvalidDesc, "file tier: empty key");
    return false;
  }
  std::shared_ptr<PackFile> pack;
  if (op.relookup) {
    std::lock_guard lock(mu_);
    IndexEntry* e = index_.find(item.key);
    if (e == nullptr) {
      item.status = XferStatus::NotFound;
      return false;
    }
    op.hint = e->size;
    op.generation = e->generation;
    op.sum = e->checksum;
    op.whole_sum = e->whole_sum;
    pack = e->pack;
    op.base = e->offset;
    if (op.attempts == 0) index_.touch(*e);
    op.relookup = false;
  }
  ++op.attempts;
  item.size = op.hint;
  if (item.out.size < op.hint) {
    item.status = fault.raise(XferStatus::TooLarge,
                              "file tier: object " + quote_key(item.key) + " has " + std::to_string(op.hint) +
                                  " bytes, the buffer holds " + std::to_string(item.out.size),
                              item.key);
    return false;
  }
  if (pack && op.hint == 0) {  // nothing to read
    op.pack = std::move(pack);
    op.body = 0;
    item.status = files_.finish_packed_read(op, fault);
    return false;
  }
  if (pack) {
    // Packed: the descriptor stays open while op holds its lease, even if
    // compaction or a remove unlinks the pack meanwhile.
    op.lease = pack_fds_->acquire(*pack);
    if (op.lease.fd() < 0) {
      const int err = op.lease.error();
      if (err == ENOENT) return moved_or_gone(op, pack, fault);
      item.status = fault.raise(XferStatus::IoError,
                                "file tier " + opts_.dir + ": cannot open " + pack->name + " for key " +
                                    quote_key(item.key) + ": " + std::strerror(err),
                                item.key);
      return false;
    }
    op.fd = op.lease.fd();
    op.pack = std::move(pack);
  } else {
    op.base = 0;
    const XferStatus s = files_.open_file(op, fault);
    if (s == XferStatus::NotFound) return moved_or_gone(op, nullptr, fault);
    if (s != XferStatus::Ok) {
      item.status = s;
      return false;
    }
  }
  files_.lay_out_read(op);
  return true;
}

bool FileTier::moved_or_gone(ObjectRead& op, const std::shared_ptr<PackFile>& pack, Fault& fault) noexcept {
  GetItem& item = *op.item;
  // A pack unlinked between the lookup and the open: the object moved to
  // another pack (compaction) or died. A file gone: replaced by a packed
  // version, removed meanwhile, or deleted behind our back. When it moved,
  // read where the index says it is now.
  bool moved = false;
  {
    std::lock_guard lock(mu_);
    const IndexEntry* e = index_.find(item.key);
    moved = e != nullptr && (e->generation != op.generation || (pack && e->pack != pack));
  }
  if (moved && op.attempts < kMaxReadAttempts) {
    op.relookup = true;
    return start_get(op, fault);
  }
  if (!pack) forget_vanished(item.key, op.generation);
  item.status = XferStatus::NotFound;
  return false;
}

void FileTier::forget_vanished(std::string_view key, std::uint64_t generation) noexcept {
  std::lock_guard key_lock(stripes_.of(key));
  std::lock_guard lock(mu_);
  const IndexEntry* e = index_.find(key);
  if (e == nullptr || e->generation != generation || e->pack) return;  // moved on
  if (files_.file_exists(key)) return;
  log::app().warn("file tier {}: {} vanished from the directory; dropping key {}", opts_.dir,
                  object_file_name(key), quote_key(key));
  EmptiedPacks none;
  index_.erase(key, &none);
}

// ---- queries, remove ------------------------------------------------------------

std::optional<ObjectMeta> FileTier::stat(std::string_view key) noexcept {
  std::lock_guard lock(mu_);
  return index_.meta(key);
}

// A removal the index has made is acknowledged only once it is on disk too:
// the object file unlinked, and a packed version hidden by a tombstone. When
// either fails (a full disk cannot take the tombstone), the object stays in the
// index and on disk, readable as before, and the removal fails: acknowledged,
// the object would come back at the next restart with its old bytes (or, for an
// object file that replaced a packed version, with that older version's).
XferStatus FileTier::remove(std::string_view key, Fault& fault) noexcept {
  EmptiedPacks emptied;
  bool packed = false;
  {
    std::lock_guard key_lock(stripes_.of(key));
    bool tombstone = false;
    std::uint64_t seq = 0;
    {
      std::lock_guard lock(mu_);
      const IndexEntry* e = index_.find(key);
      if (e == nullptr) return XferStatus::NotFound;
      packed = e->pack != nullptr;
      tombstone = packed || e->shadow_seq != 0;
      seq = e->seq;
    }
    // The tombstone first: a crash after it cannot bring the object back. Under
    // the stripe, so no publish of this key comes between it and the erase.
    if (tombstone) {
      if (const int err = tombstones_->append(key, seq); err != 0)
        return fault.raise(write_errno_status(err),
                           "file tier " + opts_.dir + ": appending to " + kTombstoneLogName + ": " +
                               std::strerror(err) + "; " + quote_key(key) +
                               " is kept (removed without its tombstone, it would come back at the next restart)",
                           key);
    }
    if (!packed) {
      // Unlinked before the index forgets it: a get that opens the file first
      // reads it whole, one that opens it after finds it gone (forget_vanished
      // waits for this stripe, and then finds the entry erased).
      if (const int err = files_.unlink_file(key); err != 0) {
        // A tombstone written above hides only packed versions: the file, which
        // is newer than all of them, still wins at a restart, as it does now.
        return fault.raise(XferStatus::IoError,
                           "file tier " + opts_.dir + ": cannot remove " + object_file_name(key) + ": " +
                               std::strerror(err) + "; " + quote_key(key) + " is kept",
                           key);
      }
      if (opts_.fsync) fsync(dir_fd_);
    }
    std::lock_guard lock(mu_);
    index_.erase(key, &emptied);
  }
  unlink_packs(dir_fd_, opts_.dir, emptied);
  if (packed) compactor_->wake_if_due();
  return XferStatus::Ok;
}

XferStatus FileTier::list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault&) noexcept {
  out->clear();
  std::lock_guard lock(mu_);
  index_.list(out);
  return XferStatus::Ok;
}

std::vector<std::string> FileTier::lru_victims(std::uint64_t bytes) noexcept {
  std::lock_guard lock(mu_);
  return index_.lru_victims(bytes);
}

}  // namespace ferry::xfer::store
