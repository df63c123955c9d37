#include "xfer/store/file/compactor.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "core/log.h"
#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/key_stripes.h"
#include "xfer/store/file/pack_fds.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/file/spare_files.h"
#include "xfer/store/file/tombstone_log.h"
#include "xfer/store/file/uring.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"

namespace ferry::xfer::store {

void retire_packs(int dir_fd, const std::string& dir, const EmptiedPacks& emptied,
                  SpareFiles* spares) noexcept {
  for (const auto& f : emptied) {
    if (spares != nullptr) {
      std::string spare = temp_file_name(f->name);
      if (renameat(dir_fd, f->name.c_str(), dir_fd, spare.c_str()) == 0) {
        spares->offer(std::move(spare), f->size, f);
        continue;
      }
    }
    if (unlinkat(dir_fd, f->name.c_str(), 0) != 0 && errno != ENOENT)
      log::app().warn("file tier {}: cannot remove the empty pack {}: {}", dir, f->name, std::strerror(errno));
  }
}

Compactor::Compactor(const CompactorContext& ctx, std::uint64_t tombstones_kept)
    : ctx_(ctx), tombstones_kept_(tombstones_kept) {
  thread_ = std::thread([this] { thread_main(); });
}

Compactor::~Compactor() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Compactor::stopping() {
  std::lock_guard lock(wake_mu_);
  return stop_;
}

bool Compactor::tombstones_due(std::uint64_t slack) const {
  const std::uint64_t records = ctx_.tombstones->records();  // not under mu: the log's lock comes first
  std::lock_guard lock(*ctx_.mu);
  return records > (slack == 0 ? tombstones_kept_ : 2 * tombstones_kept_ + slack);
}

void Compactor::wake_if_due() {
  bool due = false;
  {
    std::lock_guard lock(*ctx_.mu);
    due = ctx_.index->packs().compaction_due();
  }
  if (!due && !tombstones_due(kTombstoneSlack)) return;
  {
    std::lock_guard lock(wake_mu_);
    wake_ = true;
  }
  wake_cv_.notify_one();
}

void Compactor::thread_main() {
  for (;;) {
    {
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait(lock, [&] { return stop_ || wake_; });
      if (stop_) return;
      wake_ = false;
    }
    run(false);
    bool due = false;
    {
      std::lock_guard lock(*ctx_.mu);
      due = ctx_.index->packs().compaction_due();
    }
    if (due) {
      // A round failed (a full disk, a read error) and left the bound crossed:
      // every put would wake us again at once. Wait a second before retrying.
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });
      if (stop_) return;
    }
  }
}

std::size_t Compactor::run(bool rewrite_any) {
  std::lock_guard one(run_mu_);
  std::size_t rewritten = 0;
  {
    auto ring = ctx_.rings->take();
    for (;;) {
      {
        std::lock_guard lock(*ctx_.mu);
        if (!ctx_.index->packs().compaction_due()) break;
      }
      if (stopping()) break;
      const std::size_t n = compact_once(*ring);
      if (n == 0) break;
      rewritten += n;
    }
  }
  if (tombstones_due(rewrite_any ? 0 : kTombstoneSlack)) rewrite_tombstones();
  return rewritten;
}

std::size_t Compactor::compact_once(Uring& ring) {
  const FileTierOptions& opts = *ctx_.opts;
  std::mutex& mu = *ctx_.mu;
  FileIndex& index = *ctx_.index;
  EmptiedPacks victims;
  {
    std::lock_guard lock(mu);
    victims = index.packs().pick_victims();
  }
  if (victims.empty()) return 0;

  // The victims' live records, from their on-disk indexes: a record is live when
  // the index entry of its key still points at it. The generation tells, at
  // publish, whether the key was overwritten or removed meanwhile.
  struct Live {
    std::string key;
    std::uint64_t seq, size, checksum, generation, from_offset;
    bool whole_sum;  // an older build's checksum: verified as such, then stored as checksum()'s
    std::shared_ptr<PackFile> from;
    std::uint64_t at = 0;  // in the staging image
    bool ok = false;
  };
  std::vector<Live> live;
  const auto mark_unreadable = [&](const std::shared_ptr<PackFile>& f) {
    std::lock_guard lock(mu);
    index.packs().mark_unreadable(f->seq);
  };
  // Each victim's descriptor, held until its objects are read.
  std::vector<PackFds::Lease> leases(victims.size());
  for (std::size_t k = 0; k < victims.size(); ++k) {
    const auto& v = victims[k];
    leases[k] = ctx_.fds->acquire(*v);
    if (leases[k].fd() < 0) {
      // ENOENT: every object in it died since the victims were picked, and it
      // was unlinked; nothing to copy.
      if (leases[k].error() != ENOENT) {
        log::app().error("file tier {}: compaction cannot open {}: {}; leaving it as it is", opts.dir, v->name,
                         std::strerror(leases[k].error()));
        mark_unreadable(v);
      }
      continue;
    }
    PackHeader h{};
    std::vector<PackRecord> records;
    if (auto why = read_pack_index(leases[k].fd(), v->size, &h, &records); !why.empty()) {
      log::app().error("file tier {}: compaction cannot read the index of {}: {}; leaving it as it is", opts.dir,
                       v->name, why);
      mark_unreadable(v);
      continue;
    }
    std::lock_guard lock(mu);
    for (auto& r : records) {
      const IndexEntry* e = index.find(r.key);
      if (e == nullptr || e->pack != v || e->offset != r.offset) continue;
      live.push_back({std::move(r.key), r.seq, r.size, r.checksum, e->generation, r.offset, r.whole_sum, v});
    }
  }

  // Read them into an image laid out as they will be written, verifying each.
  std::uint64_t image = 0;
  for (auto& l : live) {
    l.at = image;
    image += io_round_up(l.size);
  }
  AlignedBuffer staging(std::max<std::uint64_t>(image, kIoAlign));
  for (std::size_t k = 0; k < victims.size(); ++k) {
    const auto& v = victims[k];
    std::vector<ReadRange> ranges;
    std::vector<Live*> of;
    for (auto& l : live)
      if (l.from == v) {
        ranges.push_back({l.from_offset, io_round_up(l.size), staging.data() + l.at, 0});
        of.push_back(&l);
      }
    if (ranges.empty()) continue;
    read_ranges(ring, leases[k].fd(), ranges);
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      Live& l = *of[i];
      if (ranges[i].result < 0 || static_cast<std::uint64_t>(ranges[i].result) < l.size) {
        log::app().error("file tier {}: compaction cannot read key {} from {}: {}; leaving the pack as it is",
                         opts.dir, quote_key(l.key), v->name,
                         ranges[i].result < 0 ? std::strerror(static_cast<int>(-ranges[i].result)) : "short read");
        mark_unreadable(v);
        continue;
      }
      const ByteView bytes{reinterpret_cast<const std::uint8_t*>(staging.data() + l.at), l.size};
      const std::uint64_t got = checksum_of_kind(bytes, l.whole_sum);
      if (got != l.checksum) {
        // Never spread a corrupt object: drop it (a get would fail on it anyway).
        log::app().error("file tier {}: key {} in pack {} fails its checksum (stored {}, computed {}); removing it",
                         opts.dir, quote_key(l.key), v->name, checksum_hex(l.checksum), checksum_hex(got));
        drop_corrupt(l.key, l.generation, l.from);
        continue;
      }
      if (l.whole_sum) l.checksum = checksum(bytes);  // the new pack holds checksum()'s sums
      l.ok = true;
    }
  }

  std::vector<PackItem> items;
  std::vector<Live*> copied;
  for (auto& l : live) {
    if (!l.ok) continue;
    items.push_back(PackItem{l.key, {reinterpret_cast<const std::uint8_t*>(staging.data() + l.at), l.size},
                             l.checksum, l.seq, 0});
    copied.push_back(&l);
  }
  EmptiedPacks emptied;
  if (!items.empty()) {
    const std::uint64_t seq = ctx_.next_seq->fetch_add(1, std::memory_order_relaxed);
    PackWriteResult w =
        write_pack(ring, ctx_.dir_fd, opts.dir, seq, items, opts.direct, opts.fsync, ctx_.spares);
    if (w.fd < 0) {
      log::app().warn("file tier {}: compaction of {} pack(s) failed: {}", opts.dir, victims.size(), w.error);
      return 0;
    }
    auto file = std::make_shared<PackFile>(ctx_.fds, seq, pack_file_name(seq), w.fd, w.file_size);
    {
      std::lock_guard lock(mu);
      index.packs().add_new(file, items);
    }
    // Move each key still holding the version copied; a key overwritten or
    // removed meanwhile leaves its copy dead in the new pack.
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Live& l = *copied[i];
      std::lock_guard key_lock(ctx_.stripes->of(l.key));
      std::lock_guard lock(mu);
      IndexEntry* e = index.find(l.key);
      if (e == nullptr || e->generation != l.generation || e->pack != l.from) continue;
      // The checksum is re-summed if it was an older build's (whole_sum).
      index.relocate(*e, file, items[i].offset, items[i].checksum, &emptied);
    }
    std::lock_guard lock(mu);
    index.packs().unpin(seq, &emptied);
    index.packs().note_compacted(victims.size());
  }
  retire_packs(ctx_.dir_fd, opts.dir, emptied, nullptr);  // compaction is there to free the disk
  log::app().debug("file tier {}: compaction copied {} object(s) ({}) out of {} pack(s), removed {} pack(s)",
                   opts.dir, items.size(), format_size(image), victims.size(), emptied.size());
  return emptied.size();
}

void Compactor::drop_corrupt(const std::string& key, std::uint64_t generation,
                             const std::shared_ptr<PackFile>& from) {
  EmptiedPacks emptied;
  {
    std::lock_guard key_lock(ctx_.stripes->of(key));
    std::uint64_t seq = 0;
    {
      std::lock_guard lock(*ctx_.mu);
      const IndexEntry* e = ctx_.index->find(key);
      if (e == nullptr || e->generation != generation || e->pack != from) return;
      seq = e->seq;
    }
    // Its bytes are lost either way: without the tombstone it comes back after
    // a restart as the same damaged object, which its next get reports again.
    if (const int err = ctx_.tombstones->append(key, seq); err != 0)
      log::app().warn("file tier {}: appending to {}: {}; the damaged object {} comes back after a restart",
                      ctx_.opts->dir, kTombstoneLogName, std::strerror(err), quote_key(key));
    std::lock_guard lock(*ctx_.mu);
    ctx_.index->erase(key, &emptied);
  }
  retire_packs(ctx_.dir_fd, ctx_.opts->dir, emptied, nullptr);
}

void Compactor::rewrite_tombstones() {
  // A tombstone is needed while some pack holds a record of its key that it
  // hides. Keys are compared by hash: a collision only keeps a tombstone longer.
  std::unordered_map<std::size_t, std::uint64_t> oldest;  // key hash -> lowest record seq
  bool built = false;
  const std::string why = ctx_.tombstones->rewrite([&](const Tombstone& t) {
    if (!built) {  // under the log's lock, so no removal slips between this and the rename
      std::lock_guard lock(*ctx_.mu);
      ctx_.index->packs().oldest_records(&oldest);
      built = true;
    }
    auto it = oldest.find(KeyHash{}(t.key));
    return it != oldest.end() && it->second <= t.seq;
  });
  if (!why.empty()) {
    log::app().warn("{}", why);
    return;
  }
  const std::uint64_t kept = ctx_.tombstones->records();
  std::lock_guard lock(*ctx_.mu);
  tombstones_kept_ = kept;
}

}  // namespace ferry::xfer::store
