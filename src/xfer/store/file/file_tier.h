#pragma once
// The file tier: objects in a directory, written and read through io_uring with
// up to `queue_depth` operations in flight per batch call, optionally with
// O_DIRECT. Objects larger than `pack_threshold` get a file each (format:
// file_format.h, names: file_names.h). Smaller ones, where creating a file per
// object would cost more than writing it (an inode and journal work, timed in
// docs/bench/store.md), are
// written together, per put() call, into pack files of up to `pack_max` bytes
// (pack_format.h); their removals are recorded as tombstones (tombstone_log.h),
// and a background thread compacts packs whose objects are mostly dead.
//
// Every publish takes a number from one counter (seq) and writes it into the
// file or the pack's index: the index keeps, for each key, the version with the
// highest seq, and so does the start-up scan, so the version a restart finds is
// the one the index held.
//
// Publish is atomic: a put writes "<name>.tmp.<pid>.<n>" and renames it over the
// final name (an object file) or to a new pack name, so a reader (or an agent
// restarting after a crash) sees the old object or the new one, never a torn
// file. With `fsync`, the file is fsynced
// before the rename and the directory after it, so the object also survives a
// power cut; without it (the default: this is a cache, and fsync costs a disk
// flush per object) it survives the agent's own restarts and crashes, and a file
// the kernel lost is caught by its checksums.
//
// The index (key -> object file or pack and offset, size, checksum, seq, LRU
// position: file_index.h) lives in memory and is rebuilt at start-up from the
// files' headers, the packs' indexes and the tombstones (startup_scan.h). One
// tier owns a directory: it holds an flock on "<dir>/.ferry-lock" for its
// lifetime. Gets read a pack through its
// descriptor, opened on demand and kept in a cache of at most `open_packs`
// (pack_fds.h); a get holds it open while it reads, so a get racing with the
// pack's deletion still reads its immutable bytes.
//
// This file is the facade: it composes the index (file_index.h) with its pack
// accounting (pack_accounting.h), one object's file I/O (object_io.h), pack
// I/O (pack_io.h), the compactor (compactor.h) and the start-up scan.
//
// Errors per item (ferry/xfer/fault.h): a missing key -> NotFound, and a tier full to
// its capacity -> NoSpace, are answers, not raised. A write that fails with
// ENOSPC, EDQUOT or EFBIG (the disk, not the capacity, is full) -> NoSpace,
// raised with the errno's text (the temporary file is removed; for a pack,
// every item of that pack fails, the others go on); bytes that fail their
// checksum -> ChecksumMismatch naming the key and the file (object file or
// pack); any other errno -> IoError with strerror. Each is raised once, where
// it starts, into the call's Fault.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ferry/xfer/tier.h"
#include "xfer/store/file/file_index.h"
#include "xfer/store/file/file_tier_options.h"
#include "xfer/store/file/key_stripes.h"
#include "xfer/store/file/object_io.h"
#include "xfer/store/file/pack_fds.h"
#include "xfer/store/streaming.h"

namespace ferry::xfer::store {

class Compactor;
struct DecodedHeader;
class HelperThreads;
class TombstoneLog;
class Uring;
class UringPool;

class FileTier final : public Tier, public Streamable {
 public:
  // Opens (or creates) the directory, locks it, removes stale temporary files and
  // indexes the objects there. Throws ferry::Error: directory unusable, locked by
  // another process, O_DIRECT refused by the file system, io_uring unavailable.
  explicit FileTier(FileTierOptions options);
  ~FileTier() override;
  FileTier(const FileTier&) = delete;
  FileTier& operator=(const FileTier&) = delete;

  std::string_view kind() const override { return "file"; }
  std::string describe() const override { return spec_; }
  std::uint64_t capacity() const override { return opts_.capacity; }
  std::size_t max_key_length() const noexcept override { return kMaxFileKeyLength; }
  std::uint64_t used() const override;
  std::uint64_t capacity_now() const override;
  // Replaced objects' files kept for reuse with O_DIRECT (spare_files.h): the
  // only temporary-named files in the directory between calls.
  std::size_t spare_files() const { return files_.spare_files(); }
  std::uint64_t spare_files_reused() const { return files_.spare_files_reused(); }  // puts that overwrote one

  void put(std::span<PutItem> items, Fault& fault) noexcept override;
  void get(std::span<GetItem> items, Fault& fault) noexcept override;
  std::optional<ObjectMeta> stat(std::string_view key) noexcept override;
  // NoSpace (or IoError), raised, when the removal cannot be made durable: the
  // tombstone a packed version needs cannot be written (a full disk), or the
  // object file cannot be unlinked. The object then stays, readable.
  XferStatus remove(std::string_view key, Fault& fault) noexcept override;
  XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept override;
  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override;
  // 512 KiB per write in flight (16 MiB at qd=32): a call's queue drains at its
  // end, and its pack's create and rename are fixed costs; with 2 MiB per call
  // (the chain's 32 keys of 64 KiB) they cost about a fifth of the throughput.
  // Times the threads that split a buffered call, so each writes a pack as large.
  std::uint64_t put_window_bytes() const override;

  // Streaming (streaming.h, file_tier_stream.cpp): large objects are written
  // and read piece by piece.
  Streamable* streamable() noexcept override { return this; }
  // Objects that get a file of their own, and at least kStreamFloor: smaller
  // ones go faster many at a time through put()'s io_uring batches.
  static constexpr std::uint64_t kStreamFloor = 256 << 10;
  std::uint64_t stream_above() const noexcept override {
    return opts_.pack_threshold > kStreamFloor ? opts_.pack_threshold : kStreamFloor;
  }
  XferStatus put_streamed(std::string_view key, std::uint64_t size, const PieceSource& source,
                          std::uint64_t* checksum, Fault& fault) noexcept override;
  std::optional<XferStatus> get_streamed(std::string_view key, std::uint64_t capacity, const PieceSink& sink,
                                         std::uint64_t* size, Fault& fault) noexcept override;

  const std::string& dir() const { return opts_.dir; }
  const FileTierOptions& options() const { return opts_; }
  // The path of the file that holds key (its pack, when packed), or would hold it.
  std::string path_of(std::string_view key) const;

  FileTierStats stats() const;
  // Runs compaction rounds while the dead bytes in packs are over the bound (what
  // the background thread does when a put or remove makes them so), then
  // rewrites the tombstone log if anything was appended since its last rewrite
  // (the thread waits until it has grown by its slack). Returns the packs
  // emptied.
  std::size_t compact();

 private:
  void probe_direct();
  // Reserves room for the item under the capacity; false (NoSpace set, not
  // raised: the chain evicts or moves on) when the tier is full.
  bool reserve(PutItem& item) noexcept;
  void unreserve(std::uint64_t size) noexcept;

  // Runs a call of `count` objects as up to max_parts parts on the helper
  // threads, part(first, count, depth) each, sharing the queue depth; false,
  // having run nothing, when it is not split.
  // weight(i) (may be null: by count) balances the parts; each part runs on a
  // ring of its own.
  bool split_call(std::size_t count, std::size_t max_parts, const std::function<std::uint64_t(std::size_t)>& weight,
                  const std::function<void(Uring&, std::size_t first, std::size_t count, unsigned depth)>& part);
  void get_part(Uring& ring, std::span<GetItem> items, unsigned depth, Fault& fault) noexcept;
  void put_files(Uring& ring, std::span<PutItem*> items, Fault& fault) noexcept;
  void put_packed(Uring& ring, std::span<PutItem*> items, unsigned depth, Fault& fault) noexcept;
  bool start_put(ObjectWrite& op, Fault& fault) noexcept;
  void finish_put(ObjectWrite& op, Fault& fault) noexcept;
  void fail_put(ObjectWrite& op, XferStatus status) noexcept;
  bool start_get(ObjectRead& op, Fault& fault) noexcept;
  // The key's file or pack was gone at open: reads again where the index says
  // the key is now (true), or settles the item as NotFound (false).
  bool moved_or_gone(ObjectRead& op, const std::shared_ptr<PackFile>& pack, Fault& fault) noexcept;
  void forget_vanished(std::string_view key, std::uint64_t generation) noexcept;
  // Runs fn(first, end) over [0, size) in up to max_parts parts of whole
  // pieces, on the caller and its share of the helper threads (all of them
  // when this is the only call running); false, having run nothing, where
  // the object is too small to split or no helper of its share is free.
  bool try_stream_parts(std::uint64_t size, unsigned max_parts,
                        const std::function<void(std::uint64_t first, std::uint64_t end)>& fn);
  // A streamed object's data, piece by piece: into op's temporary, or out of
  // an open object file or pack (the Piecewise), hashing the leaves on the way.
  // Buffered (pwrite/pread, split by try_stream_parts) or O_DIRECT (io_uring, a
  // few pieces in flight).
  struct Piecewise {
    int fd;
    std::uint64_t data_at;  // where the object's bytes start in the file
    std::uint64_t size;
    std::string where;  // "file DIR/NAME" or "pack DIR/NAME", for messages
  };
  XferStatus write_pieces(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                          std::vector<std::uint64_t>& leaves, Fault& fault) noexcept;
  // Whether a streamed object may take a helper to hash beside its copy: one
  // is idle, and the cores are not all busy already (this tier's calls and
  // the helpers they hold), so the hash runs on a core that would idle.
  bool may_hash_beside(std::uint64_t size) const noexcept;
  // A lent object is copied by this thread while a helper hashes each piece
  // the copy has passed, in cache still. nullopt, having done nothing, where
  // may_hash_beside() says no or no helper is free after all.
  std::optional<XferStatus> write_hashed_behind(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                                                std::vector<std::uint64_t>& leaves, Fault& fault) noexcept;
  // A lent object copied and hashed by this thread alone.
  XferStatus write_lent(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                        std::vector<std::uint64_t>& leaves, Fault& fault) noexcept;
  std::optional<XferStatus> read_hashed_behind(const Piecewise& r, std::string_view key,
                                               const PieceSink& sink, std::vector<std::uint64_t>& leaves,
                                               Fault& fault) noexcept;
  XferStatus read_pieces(const Piecewise& r, std::string_view key, const PieceSink& sink,
                         std::vector<std::uint64_t>& leaves, Fault& fault) noexcept;
  // O_DIRECT (file_tier_direct.cpp): the object's pieces in one io_uring
  // batch, the first one last with the header page (seal_header) in front.
  XferStatus write_file_direct(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                               std::vector<std::uint64_t>& leaves, Fault& fault) noexcept;
  // What an O_DIRECT read of an object file's header and data found. The
  // data's own failures (the disk, the sink) are raised; a file that ends
  // short of the data is not, since its header may name another version.
  static constexpr std::uint64_t kNotShort = ~std::uint64_t{0};
  struct DirectFileRead {
    XferStatus data = XferStatus::Ok;
    ssize_t header_got = 0;              // bytes of the header read, or -errno
    std::uint64_t ended_at = kNotShort;  // where the file ended short of the data
  };
  // The file's header into `header` (kFileHeaderSize, page aligned) and r.size
  // bytes of data into the sink, in one io_uring batch, the header with the
  // first piece.
  DirectFileRead read_file_direct(const Piecewise& r, std::string_view key, const PieceSink& sink,
                                  std::vector<std::uint64_t>& leaves, std::byte* header,
                                  Fault& fault) noexcept;
  // get_streamed of an unpacked object under O_DIRECT, with op's file open:
  // the header and the data laid out for the index's size read at once; a
  // header that gives another size (the file was replaced since the lookup)
  // reads again for that. Releases op. nullopt: get() must read it (whole_sum).
  std::optional<XferStatus> get_file_direct(ObjectRead& op, std::string_view key, std::uint64_t capacity,
                                            const PieceSink& sink, std::uint64_t* size,
                                            const std::string& where, Fault& fault) noexcept;
  // Checks an object file's header, of which `got` bytes (or -errno) are in
  // op.header, into *h. nullopt: whole, valid, and the key's. Else the error,
  // raised, with op released.
  std::optional<XferStatus> check_file_header(ObjectRead& op, std::string_view key, ssize_t got,
                                              const std::string& where, DecodedHeader* h,
                                              Fault& fault) noexcept;
  XferStatus corrupt(std::string_view key, const std::string& where, const std::string& why,
                     Fault& fault) noexcept;
  XferStatus too_large(std::string_view key, std::uint64_t size, std::uint64_t capacity,
                       Fault& fault) noexcept;
  XferStatus read_error(const Piecewise& r, std::string_view key, int err, Fault& fault) noexcept;
  XferStatus truncated(const Piecewise& r, std::string_view key, std::uint64_t there, Fault& fault) noexcept;
  // A lent source or sink whose pages went away under a kernel copy (EFAULT).
  XferStatus source_gone(std::string_view key, std::uint64_t at, std::size_t len, Fault& fault) noexcept;
  XferStatus sink_gone(std::string_view key, std::uint64_t at, std::size_t len, Fault& fault) noexcept;

  FileTierOptions opts_;
  std::string spec_;
  int dir_fd_ = -1;
  int lock_fd_ = -1;
  std::unique_ptr<PackFds> pack_fds_;  // before the index: its PackFiles use it
  std::unique_ptr<UringPool> rings_;
  std::unique_ptr<HelperThreads> helpers_;  // null: threads == 1 or direct
  unsigned cores_ = 0;  // opts_.cores, or the machine's
  std::atomic<unsigned> calls_running_{0};   // puts and gets
  // Counts a put or get call while it runs.
  struct CallCount {
    std::atomic<unsigned>& n;
    explicit CallCount(std::atomic<unsigned>& count) : n(count) { n.fetch_add(1, std::memory_order_relaxed); }
    ~CallCount() { n.fetch_sub(1, std::memory_order_relaxed); }
  };
  std::unique_ptr<TombstoneLog> tombstones_;
  std::atomic<std::uint64_t> next_seq_{1};
  ObjectIo files_;

  KeyStripes stripes_;  // taken before mu_
  mutable std::mutex mu_;  // guards index_
  FileIndex index_;

  std::unique_ptr<Compactor> compactor_;  // last: its thread uses everything above
};

}  // namespace ferry::xfer::store
