#pragma once
// The file tier's options and statistics (file_tier.h), apart so that the
// tier's parts can take them without the facade.

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/xfer/tier.h"

namespace ferry::xfer::store {

struct FileTierOptions {
  std::string dir;                      // created if missing
  std::uint64_t capacity = kUnbounded;  // object bytes (headers not counted)
  unsigned queue_depth = 32;            // operations in flight per batch call
  bool direct = false;                  // O_DIRECT: bypass the page cache
  bool fsync = false;                   // fsync each file and the directory at publish
  // Objects of up to this many bytes go into packs; 0: a file per object. Why
  // 1 MiB: creating, renaming and closing a file per object cost 1 MiB O_DIRECT
  // puts a large share of the disk's rate, which packing won back
  // (docs/bench/store.md). Packs were opt-in while each held a descriptor for
  // its life and the chain's evictions (a few objects per put call) piled up
  // small packs; the descriptor cache (open_packs) and the merging of small
  // packs (compact_small_packs) bound both.
  std::uint64_t pack_threshold = 1 << 20;
  // Bytes of objects (each padded to 4 KiB) per pack. Why 64 MiB: a pack's
  // create and rename are then a small part of its write (docs/bench/store.md
  // times them); compaction copies at most this much per round; and a pack is the
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
  // Cores the tier's calls and helpers may keep busy at once: a helper hashes
  // beside a streamed copy only while fewer are (file_tier_stream.cpp). 0:
  // the machine's.
  unsigned cores = 0;
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

}  // namespace ferry::xfer::store
