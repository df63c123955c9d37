#pragma once
// The file tier's compaction (docs/xfer-tiers.md "Compaction"): a background
// thread that, while the pack accounting (pack_accounting.h) says it is due,
// copies the live objects of the sparsest packs (or of too many small ones)
// into a new pack, after which the old packs hold nothing live and are
// unlinked; and that rewrites the tombstone log (tombstone_log.h) once it has
// grown well past what still hides a packed record.
//
// Why a thread of its own: compaction copies up to pack_max bytes per round,
// whole disk writes' worth of time, which would otherwise land on whichever put
// or remove (the chain's eviction) crossed the bound.
//
// It shares the tier's state: the index and its mutex, the key stripes, the
// pack descriptors, the rings, the tombstone log and the seq counter. A moved
// object keeps its generation, so a reader that saw the old place notices
// nothing but a relookup.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "xfer/store/file/file_index.h"
#include "xfer/store/file/file_tier_options.h"

namespace ferry::xfer::store {

class KeyStripes;
class PackFds;
class SpareFiles;
class TombstoneLog;
class Uring;
class UringPool;

// What of the tier the compactor works on; every pointer outlives it.
struct CompactorContext {
  const FileTierOptions* opts = nullptr;
  int dir_fd = -1;
  std::mutex* mu = nullptr;  // guards *index
  FileIndex* index = nullptr;
  KeyStripes* stripes = nullptr;
  PackFds* fds = nullptr;
  UringPool* rings = nullptr;
  TombstoneLog* tombstones = nullptr;
  std::atomic<std::uint64_t>* next_seq = nullptr;
  SpareFiles* spares = nullptr;  // with O_DIRECT: a new pack may overwrite a spare file
};

class Compactor {
 public:
  // tombstones_kept: records the tombstone log kept at its last rewrite (the
  // start-up scan's). Starts the thread.
  Compactor(const CompactorContext& ctx, std::uint64_t tombstones_kept);
  ~Compactor();  // stops the thread, after the round it may be running
  Compactor(const Compactor&) = delete;
  Compactor& operator=(const Compactor&) = delete;

  // Wakes the thread when compaction or a tombstone log rewrite is due (a put
  // of packed objects or a remove of one calls this). Not under ctx.mu.
  void wake_if_due();
  // Runs compaction rounds while the pack accounting says so, then rewrites
  // the tombstone log if due (rewrite_any: if anything was appended since its
  // last rewrite). Returns the packs emptied. One run at a time.
  std::size_t run(bool rewrite_any);

 private:
  void thread_main();
  std::size_t compact_once(Uring& ring);
  void drop_corrupt(const std::string& key, std::uint64_t generation, const std::shared_ptr<PackFile>& from);
  void rewrite_tombstones();
  bool tombstones_due(std::uint64_t slack) const;  // not under ctx.mu
  bool stopping();

  // The tombstone log is rewritten (only what still hides a packed record is
  // kept) when it holds more than twice what its last rewrite kept, plus this.
  static constexpr std::uint64_t kTombstoneSlack = 4096;

  CompactorContext ctx_;
  std::uint64_t tombstones_kept_;  // under *ctx_.mu

  std::mutex run_mu_;  // one run at a time: the thread's and compact()'s
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;  // under wake_mu_
  bool stop_ = false;  // under wake_mu_
  std::thread thread_;
};

// Takes the packs the index emptied out of the directory: renamed to a
// temporary name and kept as spares while `spares` (O_DIRECT) keeps them, else
// unlinked, logging what cannot be. Compaction passes none: it is there to
// free the disk. Outside the index's mutex: a pack's name is
// never reused, so nothing can race with this; a read that opens it by name
// afterwards finds it gone, as after an unlink.
void retire_packs(int dir_fd, const std::string& dir, const EmptiedPacks& emptied,
                  SpareFiles* spares) noexcept;

}  // namespace ferry::xfer::store
