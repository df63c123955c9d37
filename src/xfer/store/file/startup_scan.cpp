#include "xfer/store/file/startup_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/file_index.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/file/tombstone_log.h"

namespace ferry::xfer::store {
namespace {

struct FoundFile {
  std::string name;
  std::int64_t mtime_ns = 0;
  DecodedHeader h;
};

struct FoundPack {
  std::shared_ptr<PackFile> file;
  std::vector<PackRecord> records;
  std::uint64_t live_objects = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t total_bytes = 0;
};

// Where the newest version of a key is: an object file or a pack record.
struct Winner {
  std::uint64_t seq = 0;
  std::size_t file = SIZE_MAX;  // index into the files found, or
  std::size_t pack = SIZE_MAX;  // index into the packs found (sorted by pack seq) and
  std::size_t record = 0;       // its record
  std::uint64_t shadow = 0;     // highest seq of a losing pack record of the key
};

}  // namespace

ScanResult scan_tier_directory(int dir_fd, const FileTierOptions& opts, PackFds& fds, FileIndex& index) {
  const int fd = dup(dir_fd);
  if (fd < 0) throw_errno("file tier: dup");
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    throw_errno("file tier: cannot list " + opts.dir);
  }
  rewinddir(d);
  std::vector<FoundFile> files;
  std::vector<FoundPack> packs;
  std::uint64_t max_seq = 0;
  std::size_t stale = 0, bad = 0, superseded_files = 0, empty_packs = 0, dropped = 0;
  // A pack that cannot be read may hold the newest version of any key whose
  // version found elsewhere is older than it: those keys are dropped below (a
  // miss, never stale data), and every tombstone is kept.
  std::uint64_t newest_bad_pack = 0;
  AlignedBuffer header(kFileHeaderSize);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (is_temp_file_name(name)) {
      // A writer died before its rename: the object or pack it was writing never existed.
      if (unlinkat(dir_fd, name.c_str(), 0) == 0) ++stale;
      continue;
    }
    const auto skip = [&](const std::string& why) {
      log::app().warn("file tier {}: skipping {}: {}", opts.dir, name, why);
      ++bad;
    };
    std::uint64_t pack_seq = 0;
    if (is_pack_file_name(name, &pack_seq)) {
      max_seq = std::max(max_seq, pack_seq);  // even a bad pack keeps its name: never reuse it
      const int f = openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | (opts.direct ? O_DIRECT : 0));
      if (f < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM))
        throw Error("file tier " + opts.dir + ": cannot open " + name + ": " + std::strerror(errno) +
                    " (raise the open-file limit, ulimit -n, or lower open_packs)");
      const auto skip_pack = [&](const std::string& why) {
        skip(why);
        newest_bad_pack = std::max(newest_bad_pack, pack_seq);
      };
      if (f < 0) {
        skip_pack(std::strerror(errno));
        continue;
      }
      struct stat st {};
      PackHeader h{};
      FoundPack p;
      std::string why = fstat(f, &st) == 0 ? read_pack_index(f, static_cast<std::uint64_t>(st.st_size), &h, &p.records)
                                           : std::string(std::strerror(errno));
      if (why.empty() && h.seq != pack_seq) why = "its header says pack " + std::to_string(h.seq);
      if (!why.empty()) {
        close(f);
        skip_pack(why);
        continue;
      }
      // Handed to the descriptor cache, which keeps the newest open_packs open.
      p.file = std::make_shared<PackFile>(&fds, pack_seq, name, f, static_cast<std::uint64_t>(st.st_size));
      for (const auto& r : p.records) {
        max_seq = std::max(max_seq, r.seq);
        p.total_bytes += io_round_up(r.size);
      }
      packs.push_back(std::move(p));
      continue;
    }
    if (!is_object_file_name(name)) continue;  // ".", "..", the lock file, the tombstone log, foreign files
    const int f = openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0) {
      skip(std::strerror(errno));
      continue;
    }
    struct stat st {};
    const ssize_t n = fstat(f, &st) == 0 ? pread(f, header.data(), kFileHeaderSize, 0) : -1;
    const int err = errno;
    close(f);
    if (n < 0) {
      skip(std::strerror(err));
      continue;
    }
    if (n != static_cast<ssize_t>(kFileHeaderSize)) {
      skip("shorter than a header (" + std::to_string(n) + " bytes)");
      continue;
    }
    DecodedHeader h;
    if (auto why = decode_file_header(header.data(), &h); !why.empty()) {
      skip(why);
      continue;
    }
    if (object_file_name(h.key) != name) {
      skip("its header names key " + quote_key(h.key) + ", which belongs in " + object_file_name(h.key));
      continue;
    }
    if (static_cast<std::uint64_t>(st.st_size) != kFileHeaderSize + h.size) {
      skip("the header says " + std::to_string(h.size) + " data bytes, the file holds " +
           std::to_string(st.st_size - static_cast<std::int64_t>(kFileHeaderSize)));
      continue;
    }
    max_seq = std::max(max_seq, h.seq);
    files.push_back({name, st.st_mtim.tv_sec * 1'000'000'000ll + st.st_mtim.tv_nsec, std::move(h)});
  }
  closedir(d);

  // Tombstones: key -> every packed version with seq <= this is removed.
  KeyMap<std::uint64_t> tombs;
  for (auto& t : TombstoneLog::load(dir_fd, opts.dir)) {
    max_seq = std::max(max_seq, t.seq);
    auto [it, fresh] = tombs.try_emplace(std::move(t.key), t.seq);
    if (!fresh) it->second = std::max(it->second, t.seq);
  }

  // The newest version of each key wins: highest seq; among equal seqs (a
  // compaction's copy beside its original, or one pack's duplicates) the newer
  // pack, then the later record.
  std::sort(packs.begin(), packs.end(),
            [](const FoundPack& a, const FoundPack& b) { return a.file->seq < b.file->seq; });
  KeyMap<Winner> best;
  for (std::size_t i = 0; i < files.size(); ++i) {
    Winner w;
    w.seq = files[i].h.seq;
    w.file = i;
    best.emplace(files[i].h.key, w);
  }
  for (std::size_t p = 0; p < packs.size(); ++p) {
    for (std::size_t r = 0; r < packs[p].records.size(); ++r) {
      const PackRecord& rec = packs[p].records[r];
      if (auto t = tombs.find(rec.key); t != tombs.end() && rec.seq <= t->second) continue;
      auto [it, fresh] = best.try_emplace(rec.key);
      Winner& w = it->second;
      if (!fresh && w.seq > rec.seq) {
        w.shadow = std::max(w.shadow, rec.seq);
        continue;
      }
      if (!fresh && w.pack != SIZE_MAX) w.shadow = std::max(w.shadow, w.seq);
      w.seq = rec.seq;
      w.file = SIZE_MAX;
      w.pack = p;
      w.record = r;
    }
  }
  if (newest_bad_pack > 0) {
    for (auto it = best.begin(); it != best.end();) {
      if (it->second.seq < newest_bad_pack) {
        it = best.erase(it);
        ++dropped;
      } else {
        ++it;
      }
    }
    if (dropped > 0)
      log::app().warn("file tier {}: dropped {} object(s) older than the unreadable pack {}: it may hold newer "
                      "versions of them",
                      opts.dir, dropped, pack_file_name(newest_bad_pack));
  }
  // An object file that lost to a packed version is what a crash left between
  // publishing that version and unlinking the file.
  std::vector<bool> file_wins(files.size(), false);
  for (auto& [key, w] : best) {
    if (w.file != SIZE_MAX) {
      file_wins[w.file] = true;
    } else {
      FoundPack& p = packs[w.pack];
      p.live_objects += 1;
      p.live_bytes += io_round_up(p.records[w.record].size);
    }
  }
  for (std::size_t i = 0; i < files.size(); ++i)
    if (!file_wins[i] && unlinkat(dir_fd, files[i].name.c_str(), 0) == 0) ++superseded_files;

  // Packs with nothing live go; the tombstones that still hide a record in a
  // pack that stays are kept, the others dropped.
  KeyMap<std::uint64_t> oldest_record;  // key -> lowest seq of its records in the packs kept
  for (auto& p : packs) {
    if (p.live_objects == 0) continue;
    for (const auto& r : p.records) {
      auto [it, fresh] = oldest_record.try_emplace(r.key, r.seq);
      if (!fresh) it->second = std::min(it->second, r.seq);
    }
  }
  std::vector<Tombstone> keep;
  for (const auto& [key, seq] : tombs) {
    const auto it = oldest_record.find(key);
    // The unreadable packs' records are unknown: then every tombstone stays.
    if (newest_bad_pack > 0 || (it != oldest_record.end() && it->second <= seq)) keep.push_back({key, seq});
  }
  ScanResult result;
  result.tombstones = std::make_unique<TombstoneLog>(dir_fd, opts.dir, opts.fsync, keep);
  result.tombstones_kept = keep.size();
  result.next_seq = max_seq + 1;

  // Oldest first, so that the newest version ends at the front of the LRU list:
  // the order survives a restart as "last written". Object files of older builds
  // (seq 0) go by modification time (reads do not touch it).
  struct Found {
    std::uint64_t seq;
    std::int64_t mtime_ns;
    const std::string* key;
    const Winner* w;
  };
  std::vector<Found> order;
  order.reserve(best.size());
  for (const auto& [key, w] : best)
    order.push_back({w.seq, w.file != SIZE_MAX ? files[w.file].mtime_ns : 0, &key, &w});
  std::sort(order.begin(), order.end(), [](const Found& a, const Found& b) {
    return std::tie(a.seq, a.mtime_ns, *a.key) < std::tie(b.seq, b.mtime_ns, *b.key);
  });

  PackAccounting& pack_acc = index.packs();
  for (auto& p : packs) {
    if (p.live_objects == 0) {
      if (unlinkat(dir_fd, p.file->name.c_str(), 0) == 0) ++empty_packs;
      continue;
    }
    PackState s;
    s.file = p.file;
    s.live_objects = p.live_objects;
    s.live_bytes = p.live_bytes;
    s.dead_bytes = p.total_bytes - p.live_bytes;
    s.records.reserve(p.records.size());
    for (const auto& r : p.records) s.records.emplace_back(KeyHash{}(r.key), r.seq);
    pack_acc.add_loaded(std::move(s));
  }
  for (const Found& f : order) {
    const Winner& w = *f.w;
    IndexEntry e;
    if (w.file != SIZE_MAX) {
      e.size = files[w.file].h.size;
      e.checksum = files[w.file].h.checksum;
      e.whole_sum = files[w.file].h.whole_sum;
    } else {
      const PackRecord& r = packs[w.pack].records[w.record];
      e.size = r.size;
      e.checksum = r.checksum;
      e.whole_sum = r.whole_sum;
      e.pack = packs[w.pack].file;
      e.offset = r.offset;
    }
    e.seq = w.seq;
    e.shadow_seq = w.shadow;
    index.load(*f.key, std::move(e));
  }
  if (!index.empty() || stale > 0 || bad > 0 || !pack_acc.empty())
    log::app().info(
        "file tier {}: found {} object(s) ({}), {} of them in {} pack(s); removed {} stale temporary file(s), "
        "{} superseded object file(s), {} empty pack(s); skipped {} bad file(s); kept {} of {} tombstone(s)",
        opts.dir, index.size(), format_size(index.used()), pack_acc.packed_objects(), pack_acc.count(), stale, superseded_files,
        empty_packs, bad, keep.size(), tombs.size());
  if (opts.capacity != kUnbounded && index.used() > opts.capacity)
    log::app().warn("file tier {}: holds {} but its capacity is {}; new puts wait for evictions", opts.dir,
                    format_size(index.used()), format_size(opts.capacity));
  return result;
}

}  // namespace ferry::xfer::store
