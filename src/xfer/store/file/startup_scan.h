#pragma once
// The file tier's start-up scan: rebuilds the index (file_index.h) from the
// object files' headers, the packs' indexes and the tombstone log, removing
// what a crash left behind (temporary files, object files that lost to a
// packed version, packs with nothing live) and rewriting the tombstone log
// with only what still hides a packed record.
//
// The newest version of each key wins: highest seq; among equal seqs (a
// compaction's copy beside its original, or one pack's duplicates) the newer
// pack, then the later record. So the version a restart finds is the one the
// index held.

#include <cstdint>
#include <memory>

#include "xfer/store/file/file_tier_options.h"

namespace ferry::xfer::store {

class FileIndex;
class PackFds;
class TombstoneLog;

struct ScanResult {
  std::unique_ptr<TombstoneLog> tombstones;  // open for appending
  std::uint64_t tombstones_kept = 0;         // records it holds
  std::uint64_t next_seq = 1;                // above every seq found
};

// Scans the directory dir_fd (opts.dir) into the empty `index`; packs found
// are handed to `fds`. Throws ferry::Error: the directory cannot be listed,
// too many open files, the tombstone log cannot be read or rewritten.
ScanResult scan_tier_directory(int dir_fd, const FileTierOptions& opts, PackFds& fds, FileIndex& index);

}  // namespace ferry::xfer::store
