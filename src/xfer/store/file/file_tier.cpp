#include "xfer/store/file/file_tier.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/checksum/checksum.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/helper_threads.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/file/tombstone_log.h"
#include "xfer/store/file/uring.h"
#include "xfer/store/file/uring_batch.h"

namespace ferry::xfer::store {
namespace {

constexpr const char* kLockName = ".ferry-lock";
constexpr const char* kProbeName = ".ferry-direct-probe";
constexpr int kMaxReadAttempts = 8;           // re-reads of an object that is being replaced meanwhile
constexpr std::size_t kKeepBounce = 4 << 20;  // bounce buffers above this are freed after use
constexpr std::size_t kMinObjectsPerThread = 4;  // a call is split into parts of at least this many

bool has_duplicate_keys(std::span<PutItem* const> items) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(items.size());
  for (const PutItem* item : items)
    if (!seen.insert(item->key).second) return true;
  return false;
}

// Disk full, quota and file-size limits all mean "this tier cannot take the
// object": the chain moves it (or victims) to the next tier.
XferStatus write_errno_status(int err) {
  return (err == ENOSPC || err == EDQUOT || err == EFBIG) ? XferStatus::NoSpace : XferStatus::IoError;
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
  std::uint64_t seq = 0;
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

FileTier::FileTier(FileTierOptions options) : opts_(std::move(options)) {
  if (opts_.dir.empty()) throw Error("file tier: no directory given");
  if (opts_.queue_depth == 0 || opts_.queue_depth > 4096)
    throw Error("file tier " + opts_.dir + ": queue depth " + std::to_string(opts_.queue_depth) +
                " is outside 1..4096");
  if (opts_.capacity == 0) throw Error("file tier " + opts_.dir + ": capacity must be more than 0 bytes");
  if (opts_.pack_max < kIoAlign) opts_.pack_max = kIoAlign;
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
    scan();
  } catch (...) {
    index_.clear();
    packs_.clear();
    if (lock_fd_ >= 0) close(lock_fd_);
    close(dir_fd_);
    throw;
  }
  // Why a thread of its own: compaction copies up to pack_max bytes per round,
  // ~50-100 ms of disk time, which would otherwise land on whichever put or
  // remove (the chain's eviction) crossed the bound.
  compactor_ = std::thread([this] { compactor_main(); });
}

FileTier::~FileTier() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  if (compactor_.joinable()) compactor_.join();
  helpers_.reset();
  rings_.reset();
  tombstones_.reset();
  index_.clear();  // closes the packs
  packs_.clear();
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

std::mutex& FileTier::stripe(std::string_view key) {
  return stripes_[KeyHash{}(key) % stripes_.size()];
}

std::string FileTier::path_of(std::string_view key) const {
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end() && it->second.pack) return opts_.dir + "/" + it->second.pack->name;
  }
  return opts_.dir + "/" + object_file_name(key);
}

std::uint64_t FileTier::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

FileTierStats FileTier::stats() const {
  FileTierStats s;
  {
    std::lock_guard lock(mu_);
    s.packs = packs_.size();
    s.packed_objects = packed_objects_;
    s.pack_live_bytes = pack_live_bytes_;
    s.pack_dead_bytes = pack_dead_bytes_;
    s.compactions = compactions_;
    s.small_packs = small_packs_;
  }
  s.tombstones = tombstones_->records();
  s.open_packs = pack_fds_->open_count();
  s.pack_reopens = pack_fds_->reopens();
  return s;
}

// ---- index --------------------------------------------------------------------
// Every function here runs under mu_ and, where it changes a key, its stripe.

bool FileTier::superseded(std::string_view key, std::uint64_t seq) const {
  auto it = index_.find(key);
  // Equal seqs are one pack's duplicates of a key: the later one wins, as the
  // start-up scan decides (pack_format.h).
  return it != index_.end() && it->second.seq > seq;
}

void FileTier::make_dead(const Entry& e, std::vector<std::shared_ptr<PackFile>>* emptied) {
  auto p = packs_.find(e.pack->seq);
  const std::uint64_t bytes = io_round_up(e.size);
  p->second.live_objects -= 1;
  p->second.live_bytes -= bytes;
  p->second.dead_bytes += bytes;
  pack_live_bytes_ -= bytes;
  pack_dead_bytes_ += bytes;
  packed_objects_ -= 1;
  if (p->second.live_objects == 0 && !p->second.pinned) {
    pack_dead_bytes_ -= p->second.dead_bytes;
    small_packs_ -= is_small(*p->second.file);
    emptied->push_back(p->second.file);
    packs_.erase(p);
  }
}

void FileTier::install(std::string_view key, const std::shared_ptr<PackFile>& pack, std::uint64_t offset,
                       std::uint64_t size, std::uint64_t checksum, std::uint64_t seq, bool* unlink_file,
                       std::vector<std::shared_ptr<PackFile>>* emptied) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    lru_.emplace_front(key);
    it = index_.emplace(std::string(key), Entry{}).first;
    it->second.lru = lru_.begin();
  } else {
    Entry& old = it->second;
    used_ -= old.size;
    if (old.pack) {
      make_dead(old, emptied);
      old.shadow_seq = std::max(old.shadow_seq, old.seq);
    } else if (pack) {
      *unlink_file = true;  // a newer packed version replaces the object file
    }
    lru_.splice(lru_.begin(), lru_, old.lru);
  }
  Entry& e = it->second;
  e.size = size;
  e.checksum = checksum;
  e.whole_sum = false;  // puts and compaction store checksum()'s sums
  e.generation = next_generation_++;
  e.seq = seq;
  e.pack = pack;
  e.offset = offset;
  used_ += size;
  if (pack) make_live(e);
}

void FileTier::make_live(const Entry& e) {
  auto& p = packs_.find(e.pack->seq)->second;
  const std::uint64_t bytes = io_round_up(e.size);
  p.live_objects += 1;
  p.live_bytes += bytes;
  p.dead_bytes -= bytes;
  pack_live_bytes_ += bytes;
  pack_dead_bytes_ -= bytes;
  packed_objects_ += 1;
}

void FileTier::erase_entry(KeyMap<Entry>::iterator it, std::vector<std::shared_ptr<PackFile>>* emptied) {
  used_ -= it->second.size;
  if (it->second.pack) make_dead(it->second, emptied);
  lru_.erase(it->second.lru);
  index_.erase(it);
}

// A pack is registered with every record dead, pinned; install() makes its
// records live one by one, and unpin_pack() drops it if none was.
void FileTier::add_pack(const std::shared_ptr<PackFile>& file, std::span<const PackItem> items) {
  PackState p;
  p.file = file;
  p.pinned = true;
  p.records.reserve(items.size());
  for (const auto& item : items) {
    p.dead_bytes += io_round_up(item.data.size);
    p.records.emplace_back(KeyHash{}(item.key), item.seq);
  }
  pack_dead_bytes_ += p.dead_bytes;
  small_packs_ += is_small(*file);
  packs_.emplace(file->seq, std::move(p));
}

void FileTier::unpin_pack(std::uint64_t seq, std::vector<std::shared_ptr<PackFile>>* emptied) {
  auto p = packs_.find(seq);
  p->second.pinned = false;
  if (p->second.live_objects == 0) {
    pack_dead_bytes_ -= p->second.dead_bytes;
    small_packs_ -= is_small(*p->second.file);
    emptied->push_back(p->second.file);
    packs_.erase(p);
  }
}

// Outside mu_: a pack's name is never reused, so nothing can race with this.
void FileTier::unlink_packs(const std::vector<std::shared_ptr<PackFile>>& emptied) {
  for (const auto& f : emptied)
    if (unlinkat(dir_fd_, f->name.c_str(), 0) != 0 && errno != ENOENT)
      log::app().warn("file tier {}: cannot remove the empty pack {}: {}", opts_.dir, f->name,
                      std::strerror(errno));
}

bool FileTier::compaction_due() const {
  return sparse_packs_due() || small_packs_ > opts_.compact_small_packs;
}

bool FileTier::sparse_packs_due() const {
  return pack_dead_bytes_ > opts_.compact_min_dead && pack_dead_bytes_ > pack_live_bytes_;
}

bool FileTier::is_small(const PackFile& f) const {
  return f.size < small_pack_bytes();
}

bool FileTier::tombstones_due(std::uint64_t slack) const {
  const std::uint64_t records = tombstones_->records();  // not under mu_: the log's lock comes first
  std::lock_guard lock(mu_);
  return records > (slack == 0 ? tombstones_kept_ : 2 * tombstones_kept_ + slack);
}

void FileTier::wake_compactor() {
  bool due = false;
  {
    std::lock_guard lock(mu_);
    due = compaction_due();
  }
  if (!due && !tombstones_due(kTombstoneSlack)) return;
  {
    std::lock_guard lock(wake_mu_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

bool FileTier::reserve(PutItem& item) {
  const std::uint64_t size = item.data.size;
  std::lock_guard lock(mu_);
  if (opts_.capacity != kUnbounded && (size > opts_.capacity || used_ + reserved_ + size > opts_.capacity)) {
    item.status = XferStatus::NoSpace;
    item.error = "file tier " + opts_.dir + ": full (" + format_size(used_) + " stored + " +
                 format_size(reserved_) + " being written + " + format_size(size) + " > capacity " +
                 format_size(opts_.capacity) + ")";
    return false;
  }
  reserved_ += size;
  return true;
}

void FileTier::unreserve(std::uint64_t size) {
  std::lock_guard lock(mu_);
  reserved_ -= size;
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

// ---- put ----------------------------------------------------------------------

void FileTier::put(std::span<PutItem> items) {
  if (items.empty()) return;
  std::vector<PutItem*> files, packed;
  for (auto& item : items) {
    if (item.key.empty()) {
      item.status = XferStatus::InvalidDesc;
      item.error = "file tier: empty key";
    } else if (item.key.size() > kMaxFileKeyLength) {
      item.status = XferStatus::InvalidDesc;
      item.error = "file tier: a key of " + std::to_string(item.key.size()) + " bytes exceeds the limit of " +
                   std::to_string(kMaxFileKeyLength);
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
    const auto max_parts = static_cast<std::size_t>(bytes / std::max<std::uint64_t>(1, small_pack_bytes()));
    if (max_parts >= 2 && !has_duplicate_keys(all) &&
        split_call(
            all.size(), max_parts, [&](std::size_t i) { return all[i]->data.size; },
            [&](Uring& ring, std::size_t first, std::size_t count, unsigned depth) {
              put_packed(ring, all.subspan(first, count), depth);
            }))
      packed.clear();
  }
  auto ring = rings_->take();
  if (!packed.empty()) put_packed(*ring, packed, opts_.queue_depth);
  if (!files.empty()) put_files(*ring, files);
  if (any_packed) wake_compactor();
}

void FileTier::put_packed(Uring& ring, std::span<PutItem*> items, unsigned depth) {
  std::vector<PutItem*> group;
  std::vector<PackItem> pack_items;
  std::vector<std::shared_ptr<PackFile>> emptied;
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
      // Nothing of this pack was published: exactly its items fail.
      for (PutItem* item : group) {
        unreserve(item->data.size);
        item->status = write_errno_status(w.err);
        item->error = w.error + " (pack with key " + quote_key(item->key) + ")";
      }
      continue;
    }
    auto file = std::make_shared<PackFile>(pack_fds_.get(), seq, pack_file_name(seq), w.fd, w.file_size);
    {
      std::lock_guard lock(mu_);
      add_pack(file, pack_items);
    }
    for (std::size_t k = 0; k < group.size(); ++k) {
      PutItem& item = *group[k];
      std::lock_guard key_lock(stripe(item.key));
      bool unlink_file = false;
      {
        std::lock_guard lock(mu_);
        reserved_ -= item.data.size;
        if (!superseded(item.key, seq)) {
          install(item.key, file, pack_items[k].offset, item.data.size, item.checksum, seq, &unlink_file,
                  &emptied);
        } else {
          // A newer version won meanwhile, so this record is dead at birth; but it
          // stays in the pack, and a remove of the newer version (an object file,
          // say) must leave a tombstone that hides it after a restart.
          Entry& newer = index_.find(item.key)->second;
          newer.shadow_seq = std::max(newer.shadow_seq, seq);
        }
      }
      if (unlink_file) {
        const std::string name = object_file_name(item.key);
        if (unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT)
          log::app().warn("file tier {}: cannot remove {} (replaced by a packed version): {}", opts_.dir, name,
                          std::strerror(errno));
      }
      item.status = XferStatus::Ok;
      item.error.clear();
    }
    {
      std::lock_guard lock(mu_);
      unpin_pack(seq, &emptied);
    }
    unlink_packs(emptied);
    emptied.clear();
  }
}

void FileTier::put_files(Uring& ring, std::span<PutItem*> items) {
  std::vector<PutOp> slots(std::min<std::size_t>(items.size(), ring.entries()));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  run_batch(
      ring, slots, items.size(),
      [&](std::size_t i, PutOp& op) {
        op.item = items[i];
        if (!start_put(op)) return false;
        io_uring_sqe* sqe = next_sqe(ring);
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
          advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          io_uring_sqe* sqe = next_sqe(ring);
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
  const std::uint64_t size = item.data.size;
  if (!reserve(item)) return false;
  op.reserved = true;
  op.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
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

  encode_file_header(item.key, size, item.checksum, op.seq, op.header.data());
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
    unreserve(op.item->data.size);
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
  // in seq order on disk and in the index, so the index always describes the
  // version a restart would pick.
  std::vector<std::shared_ptr<PackFile>> emptied;
  {
    std::lock_guard key_lock(stripe(item.key));
    bool stale = false;
    {
      std::lock_guard lock(mu_);
      stale = superseded(item.key, op.seq);
    }
    if (stale) {
      // A put of this key that started later has already published: it wins,
      // as it would after a restart. This one ends as if overwritten at once.
      unlinkat(dir_fd_, op.tmp.c_str(), 0);
      op.tmp.clear();
      unreserve(size);
      op.reserved = false;
      item.status = XferStatus::Ok;
      item.error.clear();
      if (op.bounce.size() > kKeepBounce) op.bounce.reset();
      return;
    }
    if (renameat(dir_fd_, op.tmp.c_str(), dir_fd_, op.name.c_str()) != 0) return fail_errno("renaming");
    op.tmp.clear();
    std::lock_guard lock(mu_);
    reserved_ -= size;
    op.reserved = false;
    bool unused = false;
    install(item.key, nullptr, 0, size, item.checksum, op.seq, &unused, &emptied);
  }
  unlink_packs(emptied);
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
  const CallCount counted(calls_running_);
  const bool split =
      split_call(items.size(), items.size(), nullptr, [&](Uring& ring, std::size_t first, std::size_t count, unsigned depth) {
        get_part(ring, items.subspan(first, count), depth);
      });
  if (!split) get_part(*rings_->take(), items, opts_.queue_depth);
}

void FileTier::get_part(Uring& ring, std::span<GetItem> items, unsigned depth) {
  std::vector<GetOp> slots(std::min<std::size_t>({items.size(), ring.entries(), depth}));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  const auto queue_read = [&](GetOp& op) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_readv(sqe, op.fd, op.iov, op.iov_count, op.base + op.offset);
    io_uring_sqe_set_data64(sqe, op.slot);
  };
  run_batch(
      ring, slots, items.size(),
      [&](std::size_t i, GetOp& op) {
        op.item = &items[i];
        op.attempts = 0;
        op.relookup = true;
        op.hint = 0;
        if (!start_get(op)) return false;
        queue_read(op);
        return true;
      },
      [&](GetOp& op, int res) {
        if (res < 0) {
          op.item->status = XferStatus::IoError;
          op.item->error = "file tier " + opts_.dir + ": reading " + (op.pack ? op.pack->name : op.name) +
                           " for key " + quote_key(op.item->key) + ": " + std::strerror(-res);
          release_fd(op);
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
        bool retry = false;
        if (op.pack) {
          finish_packed_get(op);
        } else {
          finish_get(op, &retry);  // at the expected length, or at end of file
        }
        if (retry && start_get(op)) {
          queue_read(op);
          return true;
        }
        return false;
      });
}

void FileTier::release_fd(GetOp& op) {
  if (op.pack) {
    op.lease.reset();  // before the pack: the lease points into it
    op.pack.reset();
  } else if (op.fd >= 0) {
    close(op.fd);
  }
  op.fd = -1;
}

// Looks the key up (or, on a retry, keeps the size the file's header gave),
// opens the file or takes the pack's descriptor, and lays out the read. Returns
// false when the item is settled.
bool FileTier::start_get(GetOp& op) {
  GetItem& item = *op.item;
  op.fd = -1;
  op.offset = 0;
  op.lease.reset();
  op.pack.reset();
  op.base = 0;
  if (item.key.empty()) {
    item.status = XferStatus::InvalidDesc;
    item.error = "file tier: empty key";
    return false;
  }
  std::shared_ptr<PackFile> pack;
  if (op.relookup) {
    std::lock_guard lock(mu_);
    auto it = index_.find(item.key);
    if (it == index_.end()) {
      item.status = XferStatus::NotFound;
      item.error = "file tier " + opts_.dir + ": no object " + quote_key(item.key);
      return false;
    }
    op.hint = it->second.size;
    op.generation = it->second.generation;
    op.sum = it->second.checksum;
    op.whole_sum = it->second.whole_sum;
    pack = it->second.pack;
    op.base = it->second.offset;
    if (op.attempts == 0) lru_.splice(lru_.begin(), lru_, it->second.lru);
    op.relookup = false;
  }
  ++op.attempts;
  item.size = op.hint;
  if (item.out.size < op.hint) {
    item.status = XferStatus::TooLarge;
    item.error = "file tier: object " + quote_key(item.key) + " has " + std::to_string(op.hint) +
                 " bytes, the buffer holds " + std::to_string(item.out.size);
    return false;
  }
  const std::uint64_t size = op.hint;
  op.iov_count = 0;
  if (pack && size == 0) {  // nothing to read
    op.pack = std::move(pack);
    op.body = 0;
    finish_packed_get(op);
    return false;
  }
  if (pack) {
    // Packed: the bytes at the pack offset. The descriptor stays open while op
    // holds its lease, even if compaction or a remove unlinks the pack meanwhile.
    op.lease = pack_fds_->acquire(*pack);
    if (op.lease.fd() < 0) {
      const int err = op.lease.error();
      if (err == ENOENT) {
        // Unlinked between the lookup and the open: the object moved to another
        // pack (compaction) or died. The first: read where the index says it is now.
        bool moved = false;
        {
          std::lock_guard lock(mu_);
          auto it = index_.find(item.key);
          moved = it != index_.end() && (it->second.generation != op.generation || it->second.pack != pack);
        }
        if (moved && op.attempts < kMaxReadAttempts) {
          op.relookup = true;
          return start_get(op);
        }
        item.status = XferStatus::NotFound;
        item.error = "file tier " + opts_.dir + ": object " + quote_key(item.key) + " was removed (" +
                     pack->name + ")";
      } else {
        item.status = XferStatus::IoError;
        item.error = "file tier " + opts_.dir + ": cannot open " + pack->name + " for key " +
                     quote_key(item.key) + ": " + std::strerror(err);
      }
      return false;
    }
    op.fd = op.lease.fd();
    op.pack = std::move(pack);
    op.total = opts_.direct ? io_round_up(size) : size;
    op.body = !opts_.direct ? size : io_aligned(item.out.data) ? (size & ~(kIoAlign - 1)) : 0;
  } else {
    op.base = 0;
    op.name = object_file_name(item.key);
    op.fd = openat(dir_fd_, op.name.c_str(), O_RDONLY | O_CLOEXEC | (opts_.direct ? O_DIRECT : 0));
    if (op.fd < 0) {
      const int err = errno;
      if (err == ENOENT) {
        // Replaced by a packed version, removed meanwhile, or deleted behind our
        // back. The first: read where the index says it is now.
        bool moved = false;
        {
          std::lock_guard lock(mu_);
          auto it = index_.find(item.key);
          moved = it != index_.end() && it->second.generation != op.generation;
        }
        if (moved && op.attempts < kMaxReadAttempts) {
          op.relookup = true;
          return start_get(op);
        }
        forget_vanished(item.key, op.generation);
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
    op.iov[op.iov_count++] = {op.header.data(), kFileHeaderSize};
    // O_DIRECT reads whole pages: whole pages land in the caller's buffer when it
    // is page aligned; the rest (or everything) goes through a bounce buffer.
    op.total = kFileHeaderSize + (opts_.direct ? io_round_up(size) : size);
    op.body = !opts_.direct ? size : io_aligned(item.out.data) ? (size & ~(kIoAlign - 1)) : 0;
  }
  if (op.body > 0) op.iov[op.iov_count++] = {item.out.data, op.body};
  const std::size_t rest = op.total - (op.pack ? 0 : kFileHeaderSize) - op.body;
  if (rest > 0) {
    op.tail.resize(rest);
    op.iov[op.iov_count++] = {op.tail.data(), rest};
  }
  return true;
}

// Checks what was read (op.offset bytes) of a packed object against the index's
// size and checksum.
void FileTier::finish_packed_get(GetOp& op) {
  GetItem& item = *op.item;
  const std::string path = opts_.dir + "/" + op.pack->name;
  release_fd(op);
  const std::uint64_t size = op.hint;
  if (op.offset < size) {
    item.status = XferStatus::ChecksumMismatch;
    item.error = "file tier: key " + quote_key(item.key) + " in pack " + path + ": truncated (" +
                 std::to_string(op.offset) + " of " + std::to_string(size) + " bytes at offset " +
                 std::to_string(op.base) + ")";
    return;
  }
  if (size > op.body) std::memcpy(item.out.data + op.body, op.tail.data(), size - op.body);
  if (op.tail.size() > kKeepBounce) op.tail.reset();
  item.size = size;
  const std::uint64_t got = checksum_of_kind({item.out.data, size}, op.whole_sum);
  if (got != op.sum) {
    item.status = XferStatus::ChecksumMismatch;
    item.error = "file tier: key " + quote_key(item.key) + " in pack " + path + " (offset " +
                 std::to_string(op.base) + "): checksum mismatch (stored " + checksum_hex(op.sum) +
                 ", computed " + checksum_hex(got) + ")";
    return;
  }
  item.status = XferStatus::Ok;
  item.error.clear();
}

// Checks what was read (op.offset bytes); sets *retry when the file was replaced
// by an object of another size between the lookup and the read.
void FileTier::finish_get(GetOp& op, bool* retry) {
  GetItem& item = *op.item;
  release_fd(op);
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
  const std::uint64_t got = checksum_of_kind({item.out.data, h.size}, h.whole_sum);
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
  if (it == index_.end() || it->second.generation != generation || it->second.pack) return;  // moved on
  if (faccessat(dir_fd_, object_file_name(key).c_str(), F_OK, 0) == 0) return;
  log::app().warn("file tier {}: {} vanished from the directory; dropping key {}", opts_.dir,
                  object_file_name(key), quote_key(key));
  std::vector<std::shared_ptr<PackFile>> none;
  erase_entry(it, &none);
}

// ---- queries, remove ------------------------------------------------------------

std::optional<ObjectMeta> FileTier::stat(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return ObjectMeta{it->second.size, it->second.checksum, it->second.whole_sum};
}

// A removal the index has made is acknowledged only once it is on disk too:
// the object file unlinked, and a packed version hidden by a tombstone. When
// either fails (a full disk cannot take the tombstone), the object stays in the
// index and on disk, readable as before, and the removal fails: acknowledged,
// the object would come back at the next restart with its old bytes (or, for an
// object file that replaced a packed version, with that older version's).
XferStatus FileTier::try_remove(std::string_view key, std::string* error) {
  std::vector<std::shared_ptr<PackFile>> emptied;
  bool packed = false;
  {
    std::lock_guard key_lock(stripe(key));
    bool tombstone = false;
    std::uint64_t seq = 0;
    {
      std::lock_guard lock(mu_);
      auto it = index_.find(key);
      if (it == index_.end()) {
        *error = "file tier " + opts_.dir + ": no object " + quote_key(key);
        return XferStatus::NotFound;
      }
      packed = it->second.pack != nullptr;
      tombstone = packed || it->second.shadow_seq != 0;
      seq = it->second.seq;
    }
    // The tombstone first: a crash after it cannot bring the object back. Under
    // the stripe, so no publish of this key comes between it and the erase.
    if (tombstone) {
      std::string why;
      if (const int err = tombstones_->append(key, seq, &why); err != 0) {
        *error = why + "; " + quote_key(key) +
                 " is kept (removed without its tombstone, it would come back at the "
                 "next restart)";
        return write_errno_status(err);
      }
    }
    if (!packed) {
      // Unlinked before the index forgets it: a get that opens the file first
      // reads it whole, one that opens it after finds it gone (forget_vanished
      // waits for this stripe, and then finds the entry erased).
      const std::string name = object_file_name(key);
      if (unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT) {
        // A tombstone written above hides only packed versions: the file, which
        // is newer than all of them, still wins at a restart, as it does now.
        const int err = errno;
        *error = "file tier " + opts_.dir + ": cannot remove " + name + ": " + std::strerror(err) + "; " +
                 quote_key(key) + " is kept";
        return XferStatus::IoError;
      }
      if (opts_.fsync) fsync(dir_fd_);
    }
    std::lock_guard lock(mu_);
    erase_entry(index_.find(key), &emptied);
  }
  unlink_packs(emptied);
  if (packed) wake_compactor();
  return XferStatus::Ok;
}

std::vector<std::pair<std::string, ObjectMeta>> FileTier::list() {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, ObjectMeta>> out;
  out.reserve(index_.size());
  for (const auto& [key, e] : index_) out.emplace_back(key, ObjectMeta{e.size, e.checksum, e.whole_sum});
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
