#include "xfer/store/file/file_tier.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

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
    cores_ = opts_.cores != 0 ? opts_.cores : std::thread::hardware_concurrency();
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
    ctx.spares = files_.spares();
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
  files_ = ObjectIo(-1, {}, false, false);  // unlinks its spare files, while the directory is open
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

// An unbounded tier can grow into the free space of its file system (what an
// unprivileged writer may use: f_bavail), so that is what it reports.
std::uint64_t FileTier::capacity_now() const {
  if (opts_.capacity != kUnbounded) return opts_.capacity;
  struct statvfs fs {};
  if (::statvfs(opts_.dir.c_str(), &fs) != 0) return kUnbounded;
  return used() + static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
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
  retire_packs(dir_fd_, opts_.dir, emptied, files_.spares());
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
