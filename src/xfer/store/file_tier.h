#pragma once
// The file tier: one file per object in a directory (format: file_format.h, names:
// file_names.h), written and read through io_uring with up to `queue_depth`
// operations in flight per batch call, optionally with O_DIRECT.
//
// Publish is atomic: a put writes "<name>.tmp.<pid>.<n>" and renames it over the
// final name, so a reader (or an agent restarting after a crash) sees the old
// object or the new one, never a torn file. With `fsync`, the file is fsynced
// before the rename and the directory after it, so the object also survives a
// power cut; without it (the default: this is a cache, and fsync costs a disk
// flush per object) it survives the agent's own restarts and crashes, and a file
// the kernel lost is caught by its checksums.
//
// The index (key -> size, checksum, LRU position) lives in memory and is rebuilt
// at start-up from the files' headers. One tier owns a directory: it holds an
// flock on "<dir>/.ferry-lock" for its lifetime.
//
// Errors per item: ENOSPC, EDQUOT and EFBIG -> NoSpace (the temporary file is
// removed); a missing key -> NotFound; a file whose bytes fail their checksum ->
// ChecksumMismatch naming the key and the file; any other errno -> IoError with
// strerror.

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "xfer/store/key_map.h"
#include "xfer/store/tier.h"

namespace ferry::xfer::store {

class UringPool;

struct FileTierOptions {
  std::string dir;                      // created if missing
  std::uint64_t capacity = kUnbounded;  // object bytes (headers not counted)
  unsigned queue_depth = 32;            // operations in flight per batch call
  bool direct = false;                  // O_DIRECT: bypass the page cache
  bool fsync = false;                   // fsync each file and the directory at publish
  std::string spec;                     // for describe(); made from the options when empty
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
  bool remove(std::string_view key) override;
  std::vector<std::pair<std::string, ObjectMeta>> list() override;
  std::vector<std::string> lru_victims(std::uint64_t bytes) override;

  const std::string& dir() const { return opts_.dir; }
  // The path of the file that holds (or would hold) key.
  std::string path_of(std::string_view key) const;

 private:
  struct Entry {
    std::uint64_t size = 0;
    std::uint64_t checksum = 0;
    std::uint64_t generation = 0;  // tells a re-published object from the one a reader saw
    std::list<std::string>::iterator lru;
  };
  struct PutOp;
  struct GetOp;

  void scan();
  void probe_direct();
  std::mutex& stripe(std::string_view key);

  bool start_put(PutOp& op);
  void finish_put(PutOp& op);
  void fail_put(PutOp& op, XferStatus status, std::string error);
  bool start_get(GetOp& op);
  void finish_get(GetOp& op, bool* retry);
  void forget_vanished(std::string_view key, std::uint64_t generation);

  FileTierOptions opts_;
  std::string spec_;
  int dir_fd_ = -1;
  int lock_fd_ = -1;
  std::unique_ptr<UringPool> rings_;

  // Publishing (rename + index update) and removing hold the key's stripe, so the
  // file on disk and the index agree for every key.
  std::array<std::mutex, 64> stripes_;

  mutable std::mutex mu_;  // guards index_, lru_, used_, reserved_, next_generation_
  KeyMap<Entry> index_;
  std::list<std::string> lru_;  // front = most recently used
  std::uint64_t used_ = 0;
  std::uint64_t reserved_ = 0;  // bytes of puts in flight (capacity check)
  std::uint64_t next_generation_ = 1;
};

}  // namespace ferry::xfer::store
