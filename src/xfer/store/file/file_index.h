#pragma once
// The file tier's index, in memory: for each key where its current version is
// (its object file, or a pack and offset), its size, checksum and seq, and its
// place in the LRU order; the bytes stored and the bytes of puts in flight
// (the capacity check); and, through the pack accounting it owns
// (pack_accounting.h), which bytes in packs are live. No disk I/O: the start-up
// scan fills it (startup_scan.h), the tier and its compactor keep it current.
//
// Not thread-safe: the tier calls it under one mutex (its `mu_`), and a call
// that changes a key also holds the key's stripe (key_stripes.h), so that the
// file on disk and the index agree for every key.

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/xfer/tier.h"
#include "xfer/store/file/pack_accounting.h"
#include "xfer/store/key_map.h"

namespace ferry::xfer::store {

struct IndexEntry {
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

class FileIndex {
 public:
  explicit FileIndex(const PackLimits& limits) : packs_(limits) {}

  IndexEntry* find(std::string_view key);
  const IndexEntry* find(std::string_view key) const;

  // True when the key's current version is newer than `seq`. Equal seqs are
  // one pack's duplicates of a key: the later one wins, as the start-up scan
  // decides (pack_format.h).
  bool superseded(std::string_view key, std::uint64_t seq) const;
  // Makes a version current (the caller checked superseded()), at the front of
  // the LRU order, with a new generation. Sets *unlink_file when the key's
  // object file was replaced by a packed version (the caller unlinks it under
  // the stripe); packs the replaced version emptied go into *emptied.
  void install(std::string_view key, const std::shared_ptr<PackFile>& pack, std::uint64_t offset,
               std::uint64_t size, std::uint64_t checksum, std::uint64_t seq, bool* unlink_file,
               EmptiedPacks* emptied);
  // A packed version `seq` that lost to a newer one at birth: it stays in its
  // pack, so a remove of the newer version must leave a tombstone that hides it.
  void shadow(std::string_view key, std::uint64_t seq);
  // Forgets the key (which must be here).
  void erase(std::string_view key, EmptiedPacks* emptied);
  // Compaction copied the entry's version into `pack` at `offset`: neither the
  // generation (the bytes are the same) nor the LRU order (not a use) changes;
  // the checksum is checksum()'s now (re-summed if an older build's).
  void relocate(IndexEntry& e, const std::shared_ptr<PackFile>& pack, std::uint64_t offset, std::uint64_t checksum,
                EmptiedPacks* emptied);
  // A get is a use: the key moves to the front of the LRU order.
  void touch(IndexEntry& e) { lru_.splice(lru_.begin(), lru_, e.lru); }
  // Start-up scan: an entry found on disk (offered oldest first, so the newest
  // ends at the front of the LRU order); its pack must be in packs().
  void load(const std::string& key, IndexEntry e);

  // Reserves room for a put of `size` bytes: false when stored + being written
  // + size would exceed capacity.
  bool try_reserve(std::uint64_t size, std::uint64_t capacity);
  void unreserve(std::uint64_t size) { reserved_ -= size; }

  std::optional<ObjectMeta> meta(std::string_view key) const;
  void list(std::vector<std::pair<std::string, ObjectMeta>>* out) const;
  std::vector<std::string> lru_victims(std::uint64_t bytes) const;

  std::size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  std::uint64_t used() const { return used_; }
  std::uint64_t reserved() const { return reserved_; }
  PackAccounting& packs() { return packs_; }
  const PackAccounting& packs() const { return packs_; }
  void clear();  // drops every entry and pack (their files close)

 private:
  KeyMap<IndexEntry> map_;
  std::list<std::string> lru_;  // front = most recently used
  std::uint64_t used_ = 0;
  std::uint64_t reserved_ = 0;  // bytes of puts in flight (capacity check)
  std::uint64_t next_generation_ = 1;
  PackAccounting packs_;
};

}  // namespace ferry::xfer::store
