// The file tier's compaction: the live objects of the sparsest packs are copied
// into a new pack, after which the old packs hold nothing live and are unlinked
// (see file_tier.h, and docs/xfer-tiers.md "Compaction").

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "core/log.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/checksum/checksum.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/file/tombstone_log.h"
#include "xfer/store/file/uring.h"

namespace ferry::xfer::store {

void FileTier::compactor_main() {
  for (;;) {
    {
      std::unique_lock lock(wake_mu_);
      wake_cv_.wait(lock, [&] { return stop_ || wake_; });
      if (stop_) return;
      wake_ = false;
    }
    run_compaction(false);
    bool due = false;
    {
      std::lock_guard lock(mu_);
      due = compaction_due();
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

std::size_t FileTier::run_compaction(bool rewrite_any) {
  std::lock_guard one(compact_mu_);
  std::size_t rewritten = 0;
  {
    auto ring = rings_->take();
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (!compaction_due()) break;
      }
      {
        std::lock_guard lock(wake_mu_);
        if (stop_) break;
      }
      const std::size_t n = compact_once(*ring);
      if (n == 0) break;
      rewritten += n;
    }
  }
  if (tombstones_due(rewrite_any ? 0 : kTombstoneSlack)) rewrite_tombstones();
  return rewritten;
}

std::size_t FileTier::compact_once(Uring& ring) {
  // Victims: the packs with the smallest live share, as many as fit in one new
  // pack; or, when the dead bytes are within bounds but small packs are too
  // many, the small packs with the fewest live bytes, merged.
  std::vector<std::shared_ptr<PackFile>> victims;
  {
    std::lock_guard lock(mu_);
    if (!sparse_packs_due()) {
      std::vector<const PackState*> small;
      for (const auto& [seq, p] : packs_)
        if (is_small(*p.file) && !p.pinned && !p.unreadable) small.push_back(&p);
      std::sort(small.begin(), small.end(),
                [](const PackState* a, const PackState* b) { return a->live_bytes < b->live_bytes; });
      std::uint64_t copy = 0;
      for (const PackState* p : small) {
        if (!victims.empty() && copy + p->live_bytes > opts_.pack_max) break;
        victims.push_back(p->file);
        copy += p->live_bytes;
      }
      if (victims.size() < 2) return 0;  // nothing to merge
    }
  }
  if (victims.empty()) {
    std::lock_guard lock(mu_);
    std::vector<const PackState*> cands;
    for (const auto& [seq, p] : packs_)
      if (p.dead_bytes > 0 && !p.pinned && !p.unreadable) cands.push_back(&p);
    std::sort(cands.begin(), cands.end(), [](const PackState* a, const PackState* b) {
      // live_a / total_a < live_b / total_b, without division
      return static_cast<unsigned __int128>(a->live_bytes) * (b->live_bytes + b->dead_bytes) <
             static_cast<unsigned __int128>(b->live_bytes) * (a->live_bytes + a->dead_bytes);
    });
    std::uint64_t copy = 0;
    for (const PackState* p : cands) {
      if (!victims.empty() && copy + p->live_bytes > opts_.pack_max) break;
      victims.push_back(p->file);
      copy += p->live_bytes;
    }
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
    std::lock_guard lock(mu_);
    if (auto p = packs_.find(f->seq); p != packs_.end()) p->second.unreadable = true;
  };
  // Each victim's descriptor, held until its objects are read.
  std::vector<PackFds::Lease> leases(victims.size());
  for (std::size_t k = 0; k < victims.size(); ++k) {
    const auto& v = victims[k];
    leases[k] = pack_fds_->acquire(*v);
    if (leases[k].fd() < 0) {
      // ENOENT: every object in it died since the victims were picked, and it
      // was unlinked; nothing to copy.
      if (leases[k].error() != ENOENT) {
        log::app().error("file tier {}: compaction cannot open {}: {}; leaving it as it is", opts_.dir, v->name,
                         std::strerror(leases[k].error()));
        mark_unreadable(v);
      }
      continue;
    }
    PackHeader h{};
    std::vector<PackRecord> records;
    if (auto why = read_pack_index(leases[k].fd(), v->size, &h, &records); !why.empty()) {
      log::app().error("file tier {}: compaction cannot read the index of {}: {}; leaving it as it is", opts_.dir,
                       v->name, why);
      mark_unreadable(v);
      continue;
    }
    std::lock_guard lock(mu_);
    for (auto& r : records) {
      auto it = index_.find(r.key);
      if (it == index_.end() || it->second.pack != v || it->second.offset != r.offset) continue;
      live.push_back({std::move(r.key), r.seq, r.size, r.checksum, it->second.generation, r.offset,
                      r.whole_sum, v});
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
                         opts_.dir, quote_key(l.key), v->name,
                         ranges[i].result < 0 ? std::strerror(static_cast<int>(-ranges[i].result)) : "short read");
        mark_unreadable(v);
        continue;
      }
      const ByteView bytes{reinterpret_cast<const std::uint8_t*>(staging.data() + l.at), l.size};
      const std::uint64_t got = checksum_of_kind(bytes, l.whole_sum);
      if (got != l.checksum) {
        // Never spread a corrupt object: drop it (a get would fail on it anyway).
        log::app().error("file tier {}: key {} in pack {} fails its checksum (stored {}, computed {}); removing it",
                         opts_.dir, quote_key(l.key), v->name, checksum_hex(l.checksum), checksum_hex(got));
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
  std::vector<std::shared_ptr<PackFile>> emptied;
  if (!items.empty()) {
    const std::uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
    PackWriteResult w = write_pack(ring, dir_fd_, opts_.dir, seq, items, opts_.direct, opts_.fsync);
    if (w.fd < 0) {
      log::app().warn("file tier {}: compaction of {} pack(s) failed: {}", opts_.dir, victims.size(), w.error);
      return 0;
    }
    auto file = std::make_shared<PackFile>(pack_fds_.get(), seq, pack_file_name(seq), w.fd, w.file_size);
    {
      std::lock_guard lock(mu_);
      add_pack(file, items);
    }
    // Move each key still holding the version copied; a key overwritten or
    // removed meanwhile leaves its copy dead in the new pack. Neither the
    // generation (the bytes are the same) nor the LRU order (not a use) changes.
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Live& l = *copied[i];
      std::lock_guard key_lock(stripe(l.key));
      std::lock_guard lock(mu_);
      auto it = index_.find(l.key);
      if (it == index_.end() || it->second.generation != l.generation || it->second.pack != l.from) continue;
      make_dead(it->second, &emptied);
      it->second.pack = file;
      it->second.offset = items[i].offset;
      it->second.checksum = items[i].checksum;  // re-summed if an older build's (whole_sum)
      it->second.whole_sum = false;
      make_live(it->second);
    }
    std::lock_guard lock(mu_);
    unpin_pack(seq, &emptied);
    compactions_ += victims.size();
  }
  unlink_packs(emptied);
  log::app().debug("file tier {}: compaction copied {} object(s) ({}) out of {} pack(s), removed {} pack(s)",
                   opts_.dir, items.size(), format_size(image), victims.size(), emptied.size());
  return emptied.size();
}

void FileTier::drop_corrupt(const std::string& key, std::uint64_t generation,
                            const std::shared_ptr<PackFile>& from) {
  std::vector<std::shared_ptr<PackFile>> emptied;
  {
    std::lock_guard key_lock(stripe(key));
    std::uint64_t seq = 0;
    {
      std::lock_guard lock(mu_);
      auto it = index_.find(key);
      if (it == index_.end() || it->second.generation != generation || it->second.pack != from) return;
      seq = it->second.seq;
    }
    // Its bytes are lost either way: without the tombstone it comes back after
    // a restart as the same damaged object, which its next get reports again.
    if (std::string why; tombstones_->append(key, seq, &why) != 0)
      log::app().warn("{}; the damaged object {} comes back after a restart", why, quote_key(key));
    std::lock_guard lock(mu_);
    erase_entry(index_.find(key), &emptied);
  }
  unlink_packs(emptied);
}

void FileTier::rewrite_tombstones() {
  // A tombstone is needed while some pack holds a record of its key that it
  // hides. Keys are compared by hash: a collision only keeps a tombstone longer.
  std::unordered_map<std::size_t, std::uint64_t> oldest;  // key hash -> lowest record seq
  bool built = false;
  const std::string why = tombstones_->rewrite([&](const Tombstone& t) {
    if (!built) {  // under the log's lock, so no removal slips between this and the rename
      std::lock_guard lock(mu_);
      for (const auto& [seq, p] : packs_)
        for (const auto& [hash, rseq] : p.records) {
          auto [it, fresh] = oldest.try_emplace(hash, rseq);
          if (!fresh) it->second = std::min(it->second, rseq);
        }
      built = true;
    }
    auto it = oldest.find(KeyHash{}(t.key));
    return it != oldest.end() && it->second <= t.seq;
  });
  if (!why.empty()) {
    log::app().warn("{}", why);
    return;
  }
  const std::uint64_t kept = tombstones_->records();
  std::lock_guard lock(mu_);
  tombstones_kept_ = kept;
}

}  // namespace ferry::xfer::store
