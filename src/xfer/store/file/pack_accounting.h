#pragma once
// What the file tier knows about its packs (pack_format.h), in memory: per
// pack its live and dead bytes (each object padded to 4 KiB, as it takes the
// disk), which packs are small, and when compaction is due and of which packs.
// No disk I/O: the compactor (compactor.h) and the start-up scan
// (startup_scan.h) do that.
//
// Not thread-safe: the tier calls it under the one mutex that also guards its
// index (file_index.h), which owns it, so that an object's bytes move between
// live and dead in the same step as its index entry changes.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xfer/store/file/pack_fds.h"

namespace ferry::xfer::store {

struct PackItem;

struct PackLimits {
  std::uint64_t pack_max = 64 << 20;            // FileTierOptions::pack_max
  std::uint64_t compact_min_dead = 64 << 20;    // FileTierOptions::compact_min_dead
  std::uint64_t compact_small_packs = 64;       // FileTierOptions::compact_small_packs
};

// Accounting of one pack. Bytes are padded to 4 KiB (disk use).
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

using EmptiedPacks = std::vector<std::shared_ptr<PackFile>>;

class PackAccounting {
 public:
  explicit PackAccounting(const PackLimits& limits) : limits_(limits) {}

  // A pack being published is registered with every record dead, pinned;
  // object_lives() makes its records live one by one as the index takes them,
  // and unpin() drops it if none was.
  void add_new(const std::shared_ptr<PackFile>& file, std::span<const PackItem> items);
  void unpin(std::uint64_t seq, EmptiedPacks* emptied);
  // A pack found at start-up, with what of it lives.
  void add_loaded(PackState state);

  // One object of `size` bytes in pack `seq` turns dead (the pack is dropped
  // into *emptied when nothing in it lives and it is not pinned) or live.
  void object_died(std::uint64_t seq, std::uint64_t size, EmptiedPacks* emptied);
  void object_lives(std::uint64_t seq, std::uint64_t size);

  void mark_unreadable(std::uint64_t seq);
  void note_compacted(std::uint64_t packs) { compactions_ += packs; }

  // Too many dead bytes in packs, or too many small packs.
  bool compaction_due() const { return sparse_packs_due() || small_packs_ > limits_.compact_small_packs; }
  // Too many dead bytes in packs: more than compact_min_dead and than the live bytes.
  bool sparse_packs_due() const {
    return dead_bytes_ > limits_.compact_min_dead && dead_bytes_ > live_bytes_;
  }
  bool is_small(const PackFile& f) const { return f.size < small_pack_bytes(); }
  // Why an eighth (8 MiB of 64 MiB): a buffered put call of 16 MiB, split
  // between two threads, writes two packs of 8 MiB, and these should not be
  // merged (written again) later.
  std::uint64_t small_pack_bytes() const { return limits_.pack_max / 8; }

  // The packs one compaction round rewrites: the packs with the smallest live
  // share, as many as fit in one new pack; or, when the dead bytes are within
  // bounds but small packs are too many, the small packs with the fewest live
  // bytes, merged (none when fewer than two). Pinned and unreadable packs never.
  EmptiedPacks pick_victims() const;

  // For each key hash, the lowest seq of a record of it in any pack.
  void oldest_records(std::unordered_map<std::size_t, std::uint64_t>* out) const;

  std::size_t count() const { return packs_.size(); }
  bool empty() const { return packs_.empty(); }
  std::uint64_t packed_objects() const { return packed_objects_; }
  std::uint64_t live_bytes() const { return live_bytes_; }
  std::uint64_t dead_bytes() const { return dead_bytes_; }
  std::uint64_t compactions() const { return compactions_; }
  std::uint64_t small_packs() const { return small_packs_; }
  const PackState* find(std::uint64_t seq) const;
  void clear() { packs_.clear(); }

 private:
  void drop(std::map<std::uint64_t, PackState>::iterator p, EmptiedPacks* emptied);

  PackLimits limits_;
  std::map<std::uint64_t, PackState> packs_;  // by pack seq
  std::uint64_t live_bytes_ = 0;
  std::uint64_t dead_bytes_ = 0;
  std::uint64_t packed_objects_ = 0;
  std::uint64_t compactions_ = 0;
  std::uint64_t small_packs_ = 0;  // packs_ entries with is_small()
};

}  // namespace ferry::xfer::store
