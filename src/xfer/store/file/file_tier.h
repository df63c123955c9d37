#pragma once
// The file tier: objects in a directory, written and read through io_uring with
// up to `queue_depth` operations in flight per batch call, optionally with
// O_DIRECT. Objects larger than `pack_threshold` get a file each (format:
// file_format.h, names: file_names.h). Smaller ones, where creating a file per
// object would cost more than writing it (an inode and journal work: the
// openat(O_CREAT) alone took 300-460 us under load, docs/bench/store.md), are
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
// position) lives in memory and is rebuilt at start-up from the files' headers,
// the packs' indexes and the tombstones. One tier owns a directory: it holds an
// flock on "<dir>/.ferry-lock" for its lifetime. Gets read a pack through its
// descriptor, opened on demand and kept in a cache of at most `open_packs`
// (pack_fds.h); a get holds it open while it reads, so a get racing with the
// pack's deletion still reads its immutable bytes.
//
// Errors per item: ENOSPC, EDQUOT and EFBIG -> NoSpace (the temporary file is
// removed; for a pack, every item of that pack fails, the others go on); a
// missing key -> NotFound; bytes that fail their checksum -> ChecksumMismatch
// naming the key and the file (object file or pack); any other errno -> IoError
// with strerror.

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "xfer/store/key_map.h"
#include "xfer/store/file/pack_fds.h"
#include "xfer/store/tier.h"

namespace ferry::xfer::store {

class TombstoneLog;
class Uring;
class UringPool;
class HelperThreads;
struct PackItem;

struct FileTierOptions {
  std::string dir;                      // created if missing
  std::uint64_t capacity = kUnbounded;  // object bytes (headers not counted)
  unsigned queue_depth = 32;            // operations in flight per batch call
  bool direct = false;                  // O_DIRECT: bypass the page cache
  bool fsync = false;                   // fsync each file and the directory at publish
  // Objects of up to this many bytes go into packs; 0: a file per object. Why
  // 1 MiB: creating, renaming and closing a file per object held 1 MiB O_DIRECT
  // puts to 0.6x of fio on the disk measured, packed they reached 0.95x
  // (docs/bench/store.md). Packs were opt-in while each held a descriptor for
  // its life and the chain's evictions (a few objects per put call) piled up
  // small packs; the descriptor cache (open_packs) and the merging of small
  // packs (compact_small_packs) bound both.
  std::uint64_t pack_threshold = 1 << 20;
  // Bytes of objects (each padded to 4 KiB) per pack. Why 64 MiB: a pack's
  // create and rename (~0.5 ms under load) then cost < 1% of its write at
  // 1 GB/s; compaction copies at most this much per round; and a pack is the
  // unit an ENOSPC fails, so its size bounds what one failure takes with it.
  std::uint64_t pack_max = 64 << 20;
  // Compaction starts when the dead bytes in packs exceed both this and the
  // live bytes in packs, so the disk holds at most about twice the live bytes.
  std::uint64_t compact_min_dead = 64 << 20;
  // Compaction also merges packs of less than an eighth of pack_max (a put call
  // of a few objects, the chain's evictions) while there are more than this
  // many: each costs a descriptor while open, a file and an index read at
  // start-up, and merged they cost one.
  std::uint64_t compact_small_packs = 64;
  // Pack descriptors kept open (pack_fds.h); more are opened on demand. Why 256:
  // a quarter of the common soft limit of 1024 open files, and 16 GiB of 64 MiB
  // packs, so a get rarely pays an open.
  std::size_t open_packs = 256;
  // Threads that share one put or get call without O_DIRECT: the caller and
  // threads - 1 helpers, each with its part of the objects and of the queue
  // depth (so no more operations are in flight than qd). Through the page
  // cache, I/O is a CPU copy: a get's read is copied inline and its checksum is
  // a second pass over the bytes; a pack's writes all go to one io_uring worker,
  // since writes to one file take its lock. One thread therefore falls short of
  // fio's single thread, and two match or pass it (docs/bench/store.md).
  // A call is split only while no other put or get runs (an agent's copy
  // threads already call in parallel), into parts of at least 4 objects, and
  // a put only into packs that are not small and when no key comes twice.
  // O_DIRECT calls, whose copies the device does, are never split.
  unsigned threads = 2;
  std::string spec;  // for describe(); made from the options when empty
};

struct FileTierStats {
  std::uint64_t packs = 0;             // pack files in use
  std::uint64_t packed_objects = 0;    // objects that live in packs
  std::uint64_t pack_live_bytes = 0;   // their bytes, each padded to 4 KiB
  std::uint64_t pack_dead_bytes = 0;   // bytes of overwritten or removed objects still in packs
  std::uint64_t compactions = 0;       // packs rewritten by compaction
  std::uint64_t small_packs = 0;       // packs of less than pack_max / 8 bytes
  std::uint64_t tombstones = 0;        // records in the tombstone log
  std::uint64_t open_packs = 0;        // pack descriptors open now
  std::uint64_t pack_reopens = 0;      // packs opened on demand (their descriptor had been closed)
};

class FileTier final : public Tier {
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
  std::uint64_t used() const override;

  void put(std::span<PutItem> items) override;
  void get(std::span<GetItem> items) override;
  std::optional<ObjectMeta> stat(std::string_view key) override;
  // NoSpace (or IoError) when the removal cannot be made durable: the
  // tombstone a packed version needs cannot be written (a full disk), or the
  // object file cannot be unlinked. The object then stays, readable.
  XferStatus try_remove(std::string_view key, std::string* error) override;
  std::vector<std::pair<std::string, ObjectMeta>> list() override;
  std::vector<std::string> lru_victims(std::uint64_t bytes) override;
  // 512 KiB per write in flight (16 MiB at qd=32): a call's queue drains at its
  // end, and its pack's create and rename are fixed costs; with 2 MiB per call
  // (the chain's 32 keys of 64 KiB) they cost about a fifth of the throughput.
  // Times the threads that split a buffered call, so each writes a pack as large.
  std::uint64_t put_window_bytes() const override;

  const std::string& dir() const { return opts_.dir; }
  // The path of the file that holds key (its pack, when packed), or would hold it.
  std::string path_of(std::string_view key) const;

  FileTierStats stats() const;
  // Runs compaction rounds while the dead bytes in packs are over the bound (what
  // the background thread does when a put or remove makes them so), then
  // rewrites the tombstone log if anything was appended since its last rewrite
  // (the thread waits until it has grown by kTombstoneSlack). Returns the packs
  // emptied.
  std::size_t compact() { return run_compaction(true); }

 private:
  struct Entry {
    std::uint64_t size = 0;
    std::uint64_t checksum = 0;
    bool whole_sum = false;        // checksum is whole_checksum()'s (an older build's object)
    std::uint64_t generation = 0;  // tells a re-published object from the one a reader saw
    std::uint64_t seq = 0;         // the publish that wrote this version
    // The highest seq of an older version of this key that may still be in a
    // pack: a remove must then leave a tombstone even for an object file.
    std::uint64_t shadow_seq = 0;
    std::shared_ptr<PackFile> pack;  // null: the object's own file
    std::uint64_t offset = 0;        // in the pack
    std::list<std::string>::iterator lru;
  };
  // Accounting of one pack, under mu_. Bytes are padded to 4 KiB (disk use).
  struct PackState {
    std::shared_ptr<PackFile> file;
    std::uint64_t live_objects = 0;
    std::uint64_t live_bytes = 0;
    std::uint64_t dead_bytes = 0;
    bool pinned = false;      // being published: not dropped while it has no live objects yet
    bool unreadable = false;  // compaction could not read its index: left alone
    // (KeyHash of key, seq) of every record in the pack, live or dead: which
    // tombstones still hide something (tombstone log rewrites).
    std::vector<std::pair<std::size_t, std::uint64_t>> records;
  };
  struct PutOp;
  struct GetOp;

  void scan();
  void probe_direct();
  std::mutex& stripe(std::string_view key);
  bool reserve(PutItem& item);    // capacity check; sets NoSpace and returns false when full
  void unreserve(std::uint64_t size);

  // Runs a call of `count` objects as up to max_parts parts on the helper
  // threads, part(first, count, depth) each, sharing the queue depth; false,
  // having run nothing, when it is not split.
  // weight(i) (may be null: by count) balances the parts; each part runs on a
  // ring of its own.
  bool split_call(std::size_t count, std::size_t max_parts, const std::function<std::uint64_t(std::size_t)>& weight,
                  const std::function<void(Uring&, std::size_t first, std::size_t count, unsigned depth)>& part);
  void get_part(Uring& ring, std::span<GetItem> items, unsigned depth);
  void put_files(Uring& ring, std::span<PutItem*> items);
  void put_packed(Uring& ring, std::span<PutItem*> items, unsigned depth);
  bool start_put(PutOp& op);
  void finish_put(PutOp& op);
  void fail_put(PutOp& op, XferStatus status, std::string error);
  bool start_get(GetOp& op);
  void finish_get(GetOp& op, bool* retry);
  void finish_packed_get(GetOp& op);
  void release_fd(GetOp& op);
  void forget_vanished(std::string_view key, std::uint64_t generation);

  // Index updates, under stripe(key) and mu_. install() makes a version current
  // unless a newer one is; it sets *unlink_file when the key's object file was
  // replaced by a packed version (the caller unlinks it under the stripe).
  bool superseded(std::string_view key, std::uint64_t seq) const;
  void install(std::string_view key, const std::shared_ptr<PackFile>& pack, std::uint64_t offset,
               std::uint64_t size, std::uint64_t checksum, std::uint64_t seq, bool* unlink_file,
               std::vector<std::shared_ptr<PackFile>>* emptied);
  void erase_entry(KeyMap<Entry>::iterator it, std::vector<std::shared_ptr<PackFile>>* emptied);
  // A packed entry's bytes turn dead (make_dead: the pack is dropped into
  // *emptied when nothing in it lives) or live (make_live: it was registered
  // with every record dead, see add_pack).
  void make_dead(const Entry& e, std::vector<std::shared_ptr<PackFile>>* emptied);
  void make_live(const Entry& e);
  void add_pack(const std::shared_ptr<PackFile>& file, std::span<const PackItem> items);
  void unpin_pack(std::uint64_t seq, std::vector<std::shared_ptr<PackFile>>* emptied);
  void unlink_packs(const std::vector<std::shared_ptr<PackFile>>& emptied);
  bool compaction_due() const;     // under mu_: sparse_packs_due() or too many small packs
  bool sparse_packs_due() const;   // under mu_: too many dead bytes in packs
  bool is_small(const PackFile& f) const;
  // Why an eighth (8 MiB of 64 MiB): a buffered put call of 16 MiB, split
  // between two threads, writes two packs of 8 MiB, and these should not be
  // merged (written again) later.
  std::uint64_t small_pack_bytes() const { return opts_.pack_max / 8; }
  bool tombstones_due(std::uint64_t slack) const;  // not under mu_
  void wake_compactor();

  // Compaction (file_tier_compact.cpp): one round rewrites the live objects of
  // the sparsest packs into one new pack; returns the packs it emptied.
  std::size_t run_compaction(bool rewrite_any);
  std::size_t compact_once(Uring& ring);
  void rewrite_tombstones();
  void drop_corrupt(const std::string& key, std::uint64_t generation, const std::shared_ptr<PackFile>& from);
  void compactor_main();

  // The tombstone log is rewritten (only what still hides a packed record is
  // kept) when it holds more than twice what its last rewrite kept, plus this.
  static constexpr std::uint64_t kTombstoneSlack = 4096;

  FileTierOptions opts_;
  std::string spec_;
  int dir_fd_ = -1;
  int lock_fd_ = -1;
  std::unique_ptr<PackFds> pack_fds_;  // before the index and packs_: their PackFiles use it
  std::unique_ptr<UringPool> rings_;
  std::unique_ptr<HelperThreads> helpers_;  // null: threads == 1 or direct
  std::atomic<unsigned> calls_running_{0};   // puts and gets
  // Counts a put or get call while it runs.
  struct CallCount {
    std::atomic<unsigned>& n;
    explicit CallCount(std::atomic<unsigned>& count) : n(count) { n.fetch_add(1, std::memory_order_relaxed); }
    ~CallCount() { n.fetch_sub(1, std::memory_order_relaxed); }
  };
  std::unique_ptr<TombstoneLog> tombstones_;
  std::atomic<std::uint64_t> next_seq_{1};

  // Publishing (rename + index update) and removing hold the key's stripe, so the
  // file on disk and the index agree for every key.
  std::array<std::mutex, 64> stripes_;

  mutable std::mutex mu_;  // guards everything below up to the compactor's fields
  KeyMap<Entry> index_;
  std::list<std::string> lru_;  // front = most recently used
  std::uint64_t used_ = 0;
  std::uint64_t reserved_ = 0;  // bytes of puts in flight (capacity check)
  std::uint64_t next_generation_ = 1;
  std::map<std::uint64_t, PackState> packs_;  // by pack seq
  std::uint64_t pack_live_bytes_ = 0;
  std::uint64_t pack_dead_bytes_ = 0;
  std::uint64_t packed_objects_ = 0;
  std::uint64_t compactions_ = 0;
  std::uint64_t small_packs_ = 0;  // packs_ entries with is_small()
  std::uint64_t tombstones_kept_ = 0;  // records the tombstone log kept at its last rewrite

  // One compaction at a time: the background thread's rounds and compact().
  std::mutex compact_mu_;
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;  // under wake_mu_
  bool stop_ = false;  // under wake_mu_
  std::thread compactor_;
};

}  // namespace ferry::xfer::store
