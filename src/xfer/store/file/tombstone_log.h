#pragma once
// The file tier's record of removed packed objects. A pack is never modified, so
// removing an object that lives in one cannot delete its bytes; instead a
// tombstone says "key K: every version with seq <= S is gone", and the start-up
// scan applies it to the packs' records. Overwrites need none: the newer
// version's higher seq wins.
//
// ".ferry-tombstones" is a sequence of records, appended with one write(2) each:
//
//   +0   magic    u32  "FTMB"
//   +4   key_len  u32  1 .. kMaxFileKeyLength
//   +8   seq      u64
//   +16  key      key_len bytes
//   +16+key_len   sum  u64  XXH3-64 of the bytes before it
//
// A crash in the middle of an append leaves a torn last record; loading stops at
// the first record that does not check out (logging what it dropped), which
// costs at most the removals being written at the crash: those objects come
// back after the restart, as a removal of an object file that failed would.
// The start-up scan then rewrites the log (temporary + rename) with only the
// tombstones that still hide a record in some pack.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::xfer::store {

struct Tombstone {
  std::string key;
  std::uint64_t seq = 0;
};

class TombstoneLog {
 public:
  // Reads the valid records of the log in directory dir_fd (none when missing).
  // Throws ferry::Error when it exists but cannot be read.
  static std::vector<Tombstone> load(int dir_fd, const std::string& dir);

  // Replaces the log by exactly these tombstones and opens it for appending.
  // Throws ferry::Error.
  TombstoneLog(int dir_fd, std::string dir, bool fsync, const std::vector<Tombstone>& keep);
  ~TombstoneLog();
  TombstoneLog(const TombstoneLog&) = delete;
  TombstoneLog& operator=(const TombstoneLog&) = delete;

  // Appends one tombstone; returns 0, or the errno of what failed (ENOSPC: the
  // disk is full), for the caller to raise with what the failure means for
  // its key. A failed append is cut off again (a record written in part would
  // end the log for the start-up scan): the removal is not recorded.
  // Thread-safe.
  [[nodiscard]] int append(std::string_view key, std::uint64_t seq) noexcept;
  // Rewrites the log (temporary + rename) with the tombstones for which
  // needed() is true; returns "" or what failed (the old log is then kept).
  // Appends wait meanwhile, so none is lost between the choice and the rename.
  // needed() may take the caller's locks: append() must not be called under them.
  std::string rewrite(const std::function<bool(const Tombstone&)>& needed);
  // Records in the log now.
  std::uint64_t records() const;

 private:
  std::string write_new(std::vector<Tombstone> keep);  // under mu_

  int dir_fd_;
  std::string dir_;
  bool fsync_;
  mutable std::mutex mu_;
  int fd_ = -1;
  std::vector<Tombstone> records_;  // what the log holds, for rewrite()
};

}  // namespace ferry::xfer::store
