#include "xfer/store/file/pack_accounting.h"

#include <algorithm>

#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/key_map.h"

namespace ferry::xfer::store {

void PackAccounting::add_new(const std::shared_ptr<PackFile>& file, std::span<const PackItem> items) {
  PackState p;
  p.file = file;
  p.pinned = true;
  p.records.reserve(items.size());
  for (const auto& item : items) {
    p.dead_bytes += io_round_up(item.data.size);
    p.records.emplace_back(KeyHash{}(item.key), item.seq);
  }
  dead_bytes_ += p.dead_bytes;
  small_packs_ += is_small(*file);
  packs_.emplace(file->seq, std::move(p));
}

void PackAccounting::unpin(std::uint64_t seq, EmptiedPacks* emptied) {
  auto p = packs_.find(seq);
  p->second.pinned = false;
  if (p->second.live_objects == 0) drop(p, emptied);
}

void PackAccounting::add_loaded(PackState state) {
  live_bytes_ += state.live_bytes;
  dead_bytes_ += state.dead_bytes;
  packed_objects_ += state.live_objects;
  small_packs_ += is_small(*state.file);
  const std::uint64_t seq = state.file->seq;
  packs_.emplace(seq, std::move(state));
}

void PackAccounting::object_died(std::uint64_t seq, std::uint64_t size, EmptiedPacks* emptied) {
  auto p = packs_.find(seq);
  const std::uint64_t bytes = io_round_up(size);
  p->second.live_objects -= 1;
  p->second.live_bytes -= bytes;
  p->second.dead_bytes += bytes;
  live_bytes_ -= bytes;
  dead_bytes_ += bytes;
  packed_objects_ -= 1;
  if (p->second.live_objects == 0 && !p->second.pinned) drop(p, emptied);
}

void PackAccounting::object_lives(std::uint64_t seq, std::uint64_t size) {
  auto& p = packs_.find(seq)->second;
  const std::uint64_t bytes = io_round_up(size);
  p.live_objects += 1;
  p.live_bytes += bytes;
  p.dead_bytes -= bytes;
  live_bytes_ += bytes;
  dead_bytes_ -= bytes;
  packed_objects_ += 1;
}

void PackAccounting::drop(std::map<std::uint64_t, PackState>::iterator p, EmptiedPacks* emptied) {
  dead_bytes_ -= p->second.dead_bytes;
  small_packs_ -= is_small(*p->second.file);
  emptied->push_back(p->second.file);
  packs_.erase(p);
}

void PackAccounting::mark_unreadable(std::uint64_t seq) {
  if (auto p = packs_.find(seq); p != packs_.end()) p->second.unreadable = true;
}

const PackState* PackAccounting::find(std::uint64_t seq) const {
  auto p = packs_.find(seq);
  return p == packs_.end() ? nullptr : &p->second;
}

EmptiedPacks PackAccounting::pick_victims() const {
  EmptiedPacks victims;
  if (!sparse_packs_due()) {
    std::vector<const PackState*> small;
    for (const auto& [seq, p] : packs_)
      if (is_small(*p.file) && !p.pinned && !p.unreadable) small.push_back(&p);
    std::sort(small.begin(), small.end(),
              [](const PackState* a, const PackState* b) { return a->live_bytes < b->live_bytes; });
    std::uint64_t copy = 0;
    for (const PackState* p : small) {
      if (!victims.empty() && copy + p->live_bytes > limits_.pack_max) break;
      victims.push_back(p->file);
      copy += p->live_bytes;
    }
    if (victims.size() < 2) victims.clear();  // nothing to merge
    return victims;
  }
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
    if (!victims.empty() && copy + p->live_bytes > limits_.pack_max) break;
    victims.push_back(p->file);
    copy += p->live_bytes;
  }
  return victims;
}

void PackAccounting::oldest_records(std::unordered_map<std::size_t, std::uint64_t>* out) const {
  for (const auto& [seq, p] : packs_)
    for (const auto& [hash, rseq] : p.records) {
      auto [it, fresh] = out->try_emplace(hash, rseq);
      if (!fresh) it->second = std::min(it->second, rseq);
    }
}

}  // namespace ferry::xfer::store
