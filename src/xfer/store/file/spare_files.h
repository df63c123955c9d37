#pragma once
// Files kept for reuse by O_DIRECT puts. A put that replaces an object swaps
// its new file in with renameat2(RENAME_EXCHANGE), which leaves the old file
// under the new one's temporary name instead of freeing it; a pack whose every
// record died is renamed to a temporary name instead of being unlinked. A
// later put overwrites such a spare in place, as an object file or a pack,
// instead of allocating a new file: freeing a file's blocks and allocating
// new ones, whose first write also converts them from unwritten extents, was
// most of what a replacing put cost on the disks measured (docs/bench/nixl.md).
//
// A spare may still be open in a reader that opened the object before the
// swap. It is handed out only once no such reader can remain: when no object
// file was open for reading at the swap, or when the count of open readers has
// been zero at some moment since (readers are counted before their open, so a
// reader of the old file is counted by the time of the swap). A retired pack is
// handed out once no read holds its PackFile any more.
//
// Spares keep their temporary names, so a restart's scan removes them as it
// removes any writer's leftovers. They take disk space the tier does not
// count, bounded by the pool's files and bytes.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ferry::xfer::store {

class SpareFiles {
 public:
  static constexpr std::size_t kMaxFiles = 256;
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{256} << 20;

  explicit SpareFiles(int dir_fd) : dir_fd_(dir_fd) {}
  ~SpareFiles();  // unlinks the spares left
  SpareFiles(const SpareFiles&) = delete;
  SpareFiles& operator=(const SpareFiles&) = delete;

  // Around every open object file that is read: before its open (also one
  // that fails), and after its close.
  void reader_opening() noexcept { readers_.fetch_add(1, std::memory_order_seq_cst); }
  void reader_closed() noexcept;

  // `name` (size bytes) was just swapped out from under an object's name, or
  // is a retired pack that stays in use until `in_use` expires (the reads that
  // hold the pack): kept, or unlinked when the pool is full.
  void offer(std::string name, std::uint64_t size, std::weak_ptr<const void> in_use = {}) noexcept;

  struct Spare {
    std::string name;
    std::uint64_t size = 0;
  };
  // The smallest spare of at least `size` bytes (and at most twice that) that
  // no reader can hold, taken out of the pool; none when there is none.
  std::optional<Spare> take(std::uint64_t size) noexcept;

  std::size_t count() const;
  std::uint64_t reused() const { return reused_.load(std::memory_order_relaxed); }  // spares taken so far

 private:
  struct Kept {
    Spare spare;
    bool readers_at_swap = false;  // a reader was open when it was swapped out
    std::uint64_t epoch = 0;       // quiet_epochs_ before that check
    std::weak_ptr<const void> in_use;  // a retired pack: whatever still reads it
  };
  int dir_fd_;
  std::atomic<std::uint64_t> readers_{0};
  std::atomic<std::uint64_t> quiet_epochs_{0};  // times readers_ fell to zero
  std::atomic<std::uint64_t> reused_{0};
  mutable std::mutex mu_;
  std::vector<Kept> kept_;
  std::uint64_t kept_bytes_ = 0;
};

}  // namespace ferry::xfer::store
