#include "xfer/store/tier_chain.h"

#include <algorithm>
#include <bitset>

#include "core/log.h"
#include "ferry/core/status.h"
#include "ferry/xfer/checksum.h"
#include "ferry/xfer/tier_registry.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/tier_chain_job.h"

namespace ferry::xfer::store {
namespace {

// Rounds of "put, make room, put again" in one tier before an object goes down.
// Each round asks for twice as many victim bytes, which also gets past the dram
// tier's fragmentation (freed ranges that are not contiguous).
constexpr int kRounds = 4;

}  // namespace

TierChain::TierChain(std::vector<std::unique_ptr<Tier>> tiers) : tiers_(std::move(tiers)) {
  if (tiers_.empty()) throw Error("tier chain: no tiers (give AgentServiceOptions::tiers at least one)");
  if (tiers_.size() > 32) throw Error("tier chain: at most 32 tiers");
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (!tiers_[i]) throw Error("tier chain: tier " + std::to_string(i) + " is null");
    std::vector<std::pair<std::string, ObjectMeta>> listed;
    Fault why;  // the tier raised (and logged) the cause
    if (tiers_[i]->list(&listed, why) != XferStatus::Ok) {
      unlisted_.fetch_or(1u << i, std::memory_order_relaxed);
      log::app().warn(
          "tier chain: cannot list {}; until it can, each put also removes its keys there, and "
          "fails while it cannot (an older copy there would be served after a restart)",
          tiers_[i]->describe());
      continue;
    }
    for (const auto& [key, meta] : listed) stripes_[stripe_of(key)].where[key] |= 1u << i;
  }
  std::size_t dup = 0;
  for (const auto& s : stripes_)
    for (const auto& [key, mask] : s.where) dup += (mask & (mask - 1)) != 0;
  if (dup > 0)
    log::app().warn(
        "tier chain: {} key(s) are in more than one tier (a move was cut short); the topmost copy wins", dup);
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (!tiers_[i]->shared()) continue;
    if (i + 1 != tiers_.size())
      throw Error("tier chain: the shared tier " + tiers_[i]->describe() +
                  " must be the last: a tier below it would hold objects the other agents cannot see");
    shared_ = static_cast<int>(i);
  }
  zero_copy_ = tiers_[0]->reservable();
  streaming_ = tiers_[0]->streamable();
}

TierChain::~TierChain() = default;

std::size_t TierChain::stripe_of(std::string_view key) const {
  return KeyHash{}(key) % kStripes;
}

std::uint32_t TierChain::where(std::string_view key) {
  const auto& map = stripes_[stripe_of(key)].where;
  auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

void TierChain::set_where(std::string_view key, std::uint32_t mask) {
  auto& map = stripes_[stripe_of(key)].where;
  auto it = map.find(key);
  if (mask == 0) {
    if (it != map.end()) map.erase(it);
  } else if (it == map.end()) {
    map.emplace(std::string(key), mask);
  } else {
    it->second = mask;
  }
}

TierChain::Stats TierChain::stats() const {
  return Stats{moved_objects_.load(),   moved_bytes_.load(),    failed_moves_.load(),
               dropped_corrupt_.load(), dropped_shared_.load(), dropped_stale_.load()};
}

// ---- put ----------------------------------------------------------------------

// Lists the tiers that could not be listed before, and merges what they hold
// into the map. From put(), before it takes any stripe; at most once every
// kRelistInterval (a Redis that is down costs a connect attempt, or its
// timeout), and by one thread at a time.
void TierChain::relist() {
  const std::uint32_t unlisted = unlisted_.load(std::memory_order_acquire);
  if (unlisted == 0) return;
  std::unique_lock lock(relist_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_relist_) return;
  next_relist_ = now + kRelistInterval;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    const std::uint32_t bit = 1u << i;
    if (!(unlisted & bit)) continue;
    std::vector<std::pair<std::string, ObjectMeta>> listed;
    Fault why;
    if (tiers_[i]->list(&listed, why) != XferStatus::Ok) continue;
    // A key removed there since the listing gets a bit it no longer deserves:
    // that costs one removal later, never a stale copy.
    for (const auto& [key, meta] : listed) {
      Stripe& stripe = stripes_[stripe_of(key)];
      std::lock_guard stripe_lock(stripe.mu);
      stripe.where[key] |= bit;
    }
    unlisted_.fetch_and(~bit, std::memory_order_release);
    log::app().info(
        "tier chain: {} can be listed now ({} object(s)); puts remove their keys there only where it "
        "holds them",
        tiers_[i]->describe(), listed.size());
  }
}

// ---- the zero-copy door --------------------------------------------------------

void TierChain::reserve(std::span<const std::uint64_t> sizes, Lease& lease) noexcept {
  LeaseFiller::fill(lease, zero_copy_, sizes);
}

void TierChain::borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out) noexcept {
  if (zero_copy_ == nullptr) {
    for (auto& o : out) o.reset();
    return;
  }
  zero_copy_->borrow(keys, out);
  if (shared_ <= 0) return;
  // Above a shared tier a borrowed copy is lent only once it is checked: the
  // caller get()s what is taken back here, and get() reads on down.
  std::vector<std::string_view> lent;
  std::vector<ObjectMeta> metas;
  std::vector<std::size_t> at;
  for (std::size_t k = 0; k < keys.size() && k < out.size(); ++k) {
    if (!out[k]) continue;
    lent.push_back(keys[k]);
    metas.push_back(ObjectMeta{out[k]->bytes.size, out[k]->checksum, false});
    at.push_back(k);
  }
  std::vector<std::size_t> current, stale;
  validate(0, lent, metas, &current, &stale);
  std::vector<bool> keep(at.size(), false);
  for (const std::size_t c : current) keep[c] = true;
  for (std::size_t c = 0; c < at.size(); ++c)
    if (!keep[c]) out[at[c]].reset();
}

std::span<std::byte> TierChain::dma_memory() const noexcept {
  return zero_copy_ != nullptr ? zero_copy_->memory() : std::span<std::byte>{};
}

// ---- the streaming door ----------------------------------------------------------

std::uint64_t TierChain::stream_above() const noexcept {
  return streaming_ != nullptr ? streaming_->stream_above() : kUnbounded;
}

// One object into the top tier, under its stripe as put() places it, with the
// same invariants: older copies elsewhere are removed once it is placed (and it
// is taken out again if one cannot be). The stripe is held while the object is
// written: a put of another key of the same stripe (1 in 4096) waits for it.
std::optional<XferStatus> TierChain::put_streamed(std::string_view key, std::uint64_t size,
                                                  const PieceSource& source, int* tier, Fault& fault) noexcept {
  // Above a shared tier every put is written through from a whole buffer: put().
  if (streaming_ == nullptr || shared_ >= 0 || size <= streaming_->stream_above() ||
      size > tiers_[0]->capacity() || key.empty())
    return std::nullopt;
  relist();
  Op op(fault);
  PutItem item;
  item.key = key;
  item.data = ByteView{nullptr, size};
  Job job;
  job.key = key;
  job.stripe = stripe_of(key);
  job.data = item.data;
  job.item = &item;
  std::lock_guard stripe_lock(stripes_[job.stripe].mu);
  op.held.set(job.stripe);
  const std::uint32_t unlisted = unlisted_.load(std::memory_order_acquire);
  if (unlisted != 0 && !remove_from_unlisted(job, unlisted, op)) return job.hard;
  // Full: make room below, as place() does, and try again.
  XferStatus s = XferStatus::NoSpace;
  for (int round = 0; round < kRounds; ++round) {
    s = streaming_->put_streamed(key, size, source, &job.checksum, fault);
    if (s != XferStatus::NoSpace || tiers_.size() < 2 || !make_room(0, size << round, op)) break;
  }
  if (s == XferStatus::NoSpace) return std::nullopt;  // put() goes on down the chain
  if (s != XferStatus::Ok) return s;                   // raised by the tier
  placed(job, 0, op);
  if (job.failed) return job.hard;
  *tier = 0;
  return XferStatus::Ok;
}

// Top-down, as get(): a tier that does not stream may hold the key, so the
// object then goes by get().
std::optional<XferStatus> TierChain::get_streamed(std::string_view key, std::uint64_t capacity,
                                                  const PieceSink& sink, std::uint64_t* size, int* tier,
                                                  Fault& fault) noexcept {
  // Above a shared tier a hit is checked before any of it is served: get().
  if (key.empty() || shared_ >= 0) return std::nullopt;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    Streamable* st = tiers_[i]->streamable();
    if (st == nullptr) {
      // get() can read it from here on, if any tier still below has it.
      for (std::size_t j = i; j < tiers_.size(); ++j)
        if (tiers_[j]->stat(key)) return std::nullopt;
      return XferStatus::NotFound;
    }
    const std::optional<XferStatus> s = st->get_streamed(key, capacity, sink, size, fault);
    if (s && *s == XferStatus::NotFound) continue;
    if (s) *tier = static_cast<int>(i);
    return s;
  }
  return XferStatus::NotFound;
}

void TierChain::put(std::span<PutItem> items, Fault& fault) noexcept {
  relist();
  Op op(fault);
  std::vector<Job> jobs;
  jobs.reserve(items.size());
  for (auto& item : items) {
    if (item.key.empty()) {
      item.status = fault.raise(XferStatus::InvalidDesc, "tier chain: empty key");
      continue;
    }
    Job j;
    j.key = item.key;
    j.stripe = stripe_of(item.key);
    j.data = item.data;
    j.checksum = item.checksum;
    j.item = &item;
    jobs.push_back(j);
  }
  // By stripe, ascending, so that each window locks in order and two puts that
  // share stripes cannot wait for each other. Stable: a key given twice in one
  // batch keeps its order (the later one wins), and stays in one window.
  std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.stripe < b.stripe; });
  std::vector<Job*> todo;
  const std::uint64_t window_bytes = tiers_[0]->put_window_bytes();
  for (std::size_t at = 0; at < jobs.size();) {
    std::size_t end = at;
    std::uint64_t bytes = 0;
    const auto wants_more = [&] {
      const std::size_t n = end - at;
      return n < kWindow || (n < kMaxWindow && bytes < window_bytes) || jobs[end].stripe == jobs[end - 1].stripe;
    };
    while (end < jobs.size() && wants_more()) bytes += jobs[end++].data.size;
    todo.clear();
    const std::uint32_t unlisted = unlisted_.load(std::memory_order_acquire);
    for (std::size_t k = at; k < end; ++k) {
      if (!op.held.test(jobs[k].stripe)) {
        stripes_[jobs[k].stripe].mu.lock();
        op.held.set(jobs[k].stripe);
      }
      if (unlisted != 0 && !remove_from_unlisted(jobs[k], unlisted, op)) continue;
      todo.push_back(&jobs[k]);
    }
    place(0, todo, op);
    for (std::size_t k = at; k < end; ++k) {
      if (!op.held.test(jobs[k].stripe)) continue;
      op.held.reset(jobs[k].stripe);
      stripes_[jobs[k].stripe].mu.unlock();
    }
    at = end;
  }

  for (auto& j : jobs) {
    if (j.placed >= 0) {
      j.item->status = XferStatus::Ok;
      j.item->tier = j.placed;
      continue;
    }
    if (j.failed) {
      j.item->status = j.hard;
      continue;
    }
    // Refused everywhere: NoSpace when every tier was full, else the first other
    // reason (a broken disk, Redis down ...), which that tier raised.
    j.item->status = fault.raise(j.hard == XferStatus::Ok ? XferStatus::NoSpace : j.hard,
                                 "no tier took " + quote_key(j.key) + " (" + format_size(j.data.size) + "): " + j.errors,
                                 j.key);
  }
}

// Offers the jobs to tiers `level`, `level + 1`, ... in turn.
void TierChain::place(std::size_t level, std::vector<Job*> jobs, Op& op) {
  for (std::size_t i = level; i < tiers_.size() && !jobs.empty(); ++i) {
    Tier& t = *tiers_[i];
    std::vector<Job*> fits, down;
    const auto refused = [&](Job* j, XferStatus s, std::string_view why) {
      if (s != XferStatus::NoSpace && j->hard == XferStatus::Ok) j->hard = s;
      if (!j->errors.empty()) j->errors += "; ";
      j->errors += t.describe() + ": ";
      j->errors += why;
    };
    for (Job* j : jobs) {
      if (j->data.size > t.capacity()) {
        refused(j, XferStatus::NoSpace, "larger than its capacity " + format_size(t.capacity()));
        down.push_back(j);
      } else {
        fits.push_back(j);
      }
    }
    for (int round = 0; !fits.empty(); ++round) {
      std::vector<PutItem> batch(fits.size());
      for (std::size_t k = 0; k < fits.size(); ++k) {
        batch[k].key = fits[k]->key;
        batch[k].data = fits[k]->data;
        batch[k].checksum = fits[k]->checksum;
      }
      t.put(batch, op.fault);
      std::vector<Job*> full, through;
      std::uint64_t need = 0;
      for (std::size_t k = 0; k < fits.size(); ++k) {
        Job* j = fits[k];
        if (batch[k].status == XferStatus::Ok) {
          // A new object above the shared tier goes there too before it counts.
          if (j->source < 0 && static_cast<int>(i) < shared_)
            through.push_back(j);
          else
            placed(*j, i, op);
        } else if (batch[k].status == XferStatus::NoSpace) {
          full.push_back(j);
          need += std::max<std::uint64_t>(j->data.size, 1);
        } else {
          refused(j, batch[k].status, to_string(batch[k].status));  // the tier raised why
          down.push_back(j);
        }
      }
      for (Job* j : write_through(i, std::move(through), op)) placed(*j, i, op, 1u << shared_);
      fits.clear();
      if (full.empty()) break;
      // The last tier has nowhere to send victims; past kRounds, give up here.
      if (i + 1 < tiers_.size() && round + 1 < kRounds && make_room(i, need << round, op)) {
        fits = std::move(full);
        continue;
      }
      for (Job* j : full) {
        refused(j, XferStatus::NoSpace, "full");
        down.push_back(j);
      }
    }
    // A new object going below this tier must not leave its old version here,
    // above it: one that cannot be removed fails the object. A victim keeps its
    // source copy until it is placed.
    jobs.clear();
    for (Job* j : down) {
      Fault why;  // the tier's cause, logged there; the job's failure names it
      const XferStatus s = j->source >= 0 ? XferStatus::Ok : drop_copy(j->key, i, op, why);
      if (s == XferStatus::Ok) {
        jobs.push_back(j);
        continue;
      }
      j->failed = true;
      j->hard = op.fault.raise(s,
                               "cannot store " + quote_key(j->key) + " (" + format_size(j->data.size) +
                                   "): " + j->errors + "; and its older copy in " + t.describe() +
                                   " could not be removed (" + why.detail() +
                                   "): below it, the new version would be hidden by the older one",
                               j->key);
    }
  }
}

// Removes the key from tier `level`, or says at once that the tier was found
// Unavailable earlier in this call.
XferStatus TierChain::remove_from(std::size_t level, std::string_view key, Op& op, Fault& fault) noexcept {
  if (op.unavailable & (1u << level)) {
    return fault.raise(XferStatus::Unavailable, tiers_[level]->describe() + " is unavailable", key);
  }
  const XferStatus s = tiers_[level]->remove(key, fault);
  if (s == XferStatus::Unavailable) op.unavailable |= 1u << level;
  return s;
}

// Before a new object is placed: removes its key from the tiers that could not
// be listed (bits of `unlisted`), which may hold an older version of it that the
// map does not know of. Before, not after the object is placed: a failure then
// leaves every tier as it was. Returns false, with the job failed, when one of
// them cannot (a Redis that is down at start-up fails every put until it is back).
bool TierChain::remove_from_unlisted(Job& job, std::uint32_t unlisted, Op& op) {
  std::uint32_t mask = where(job.key);
  for (std::size_t b = 0; b < tiers_.size(); ++b) {
    const std::uint32_t bit = 1u << b;
    if (!(unlisted & bit)) continue;
    Fault why;
    const XferStatus s = remove_from(b, job.key, op, why);
    if (s == XferStatus::Ok || s == XferStatus::NotFound) {
      mask &= ~bit;
      continue;
    }
    set_where(job.key, mask | bit);  // it may be there: the next put or remove of the key tries again
    job.failed = true;
    job.hard = job.item->status = op.fault.raise(s,
                   "cannot store " + quote_key(job.key) + ": " + tiers_[b]->describe() +
                       " could not be listed at start-up and may hold an older copy, which could not be removed (" +
                       why.detail() + "); not stored, so that a restart cannot serve that copy",
                   job.key);
    return false;
  }
  set_where(job.key, mask);
  return true;
}

// The job is in tier `level`: remove every other copy the map names (the
// source of a move, or older versions of a new object). A new object whose
// older copy stays is not acknowledged: after a restart the tiers above may
// start empty, and that copy would be served. It is taken out of `level` again
// and fails with the status of the tier that kept the older copy. (That older
// copy is the key's acknowledged version, or the same version as one in
// `level`, so taking the new one out loses nothing acknowledged.) A move whose
// source copy stays is still a move: both copies are the same version, and the
// upper one is found first.
void TierChain::placed(Job& job, std::size_t level, Op& op, std::uint32_t kept) {
  const std::uint32_t bit = 1u << level;
  // One lookup for the read and the update (a tier's remove does not touch the map).
  auto& map = stripes_[stripe_of(job.key)].where;
  auto it = map.find(job.key);
  std::uint32_t mask = (it == map.end() ? 0 : it->second) | bit | kept;
  const std::uint32_t others = mask & ~bit & ~kept;
  XferStatus stale = XferStatus::Ok;
  std::string stale_why;
  for (std::size_t b = 0; b < tiers_.size(); ++b) {
    if (!(others & (1u << b))) continue;
    Fault why;
    const XferStatus s = remove_from(b, job.key, op, why);
    if (s == XferStatus::Ok || s == XferStatus::NotFound) {
      mask &= ~(1u << b);
      continue;
    }
    mask |= 1u << b;  // it may still be there: the next put or remove of the key tries again
    if (job.source >= 0) {
      log::app().warn("tier chain: {} moved to {}; its copy in {} stays: {}", quote_key(job.key),
                      tiers_[level]->describe(), tiers_[b]->describe(), why.detail());
    } else if (stale == XferStatus::Ok) {
      stale = s;
      stale_why = tiers_[b]->describe() + ": " + why.detail();
    }
  }
  if (stale == XferStatus::Ok) {
    job.placed = static_cast<int>(level);
  } else {
    Fault why;
    const XferStatus s = tiers_[level]->remove(job.key, why);
    if (s == XferStatus::Ok || s == XferStatus::NotFound) {
      mask &= ~bit;
    } else {
      log::app().error("tier chain: cannot take the unacknowledged new version of {} out of {} again: {}",
                       quote_key(job.key), tiers_[level]->describe(), why.detail());
    }
    job.failed = true;
    job.hard = op.fault.raise(stale,
                   "cannot store " + quote_key(job.key) + ": its older copy could not be removed (" + stale_why +
                       "); the new version was not kept, so that a restart cannot serve the older one",
                   job.key);
  }
  if (it != map.end() && mask == 0) {
    map.erase(it);
  } else if (it != map.end()) {
    it->second = mask;
  } else if (mask != 0) {
    map.emplace(std::string(job.key), mask);
  }
}

// Removes the key's copy in tier `level`, if the map names one. Ok when none is
// left; else why not.
XferStatus TierChain::drop_copy(std::string_view key, std::size_t level, Op& op, Fault& fault) noexcept {
  const std::uint32_t bit = 1u << level;
  const std::uint32_t mask = where(key);
  if (!(mask & bit)) return XferStatus::Ok;
  const XferStatus s = remove_from(level, key, op, fault);
  if (s != XferStatus::Ok && s != XferStatus::NotFound) {
    set_where(key, mask | bit);  // it may still be there
    return s;
  }
  set_where(key, mask & ~bit);
  return XferStatus::Ok;
}

// Moves least recently used objects of tier `level` down until about `bytes`
// are free. Returns whether anything left the tier.
bool TierChain::make_room(std::size_t level, std::uint64_t bytes, Op& op) {
  Tier& t = *tiers_[level];
  std::vector<std::string> victims = t.lru_victims(bytes);
  std::vector<std::size_t> locked_here;
  std::vector<std::string> keys;
  bool progress = false;
  for (auto& v : victims) {
    const std::size_t s = stripe_of(v);
    if (!op.held.test(s)) {
      // Busy with another put, move or remove: it is not idle, leave it.
      if (!stripes_[s].mu.try_lock()) continue;
      op.held.set(s);
      locked_here.push_back(s);
    }
    if (drop_not_move(level, v)) {
      // The shared tier below holds it already: moving it there would only
      // write it again.
      Fault why;
      if (drop_copy(v, level, op, why) == XferStatus::Ok) {
        dropped_shared_.fetch_add(1, std::memory_order_relaxed);
        progress = true;
      } else {
        log::app().warn("tier chain: cannot drop {} from {}: {}", quote_key(v), t.describe(), why.detail());
      }
      continue;
    }
    keys.push_back(std::move(v));
  }

  // Read the victims (a get verifies each one's checksum on the way).
  std::vector<std::vector<std::uint8_t>> bufs;
  std::vector<GetItem> reads;
  std::vector<ObjectMeta> metas;
  bufs.reserve(keys.size());
  for (const auto& k : keys) {
    const auto meta = t.stat(k);  // stable: we hold the key's stripe
    if (!meta) continue;          // already gone
    metas.push_back(*meta);
    bufs.emplace_back(meta->size);
    GetItem g;
    g.key = k;
    g.out = {bufs.back().data(), bufs.back().size()};
    reads.push_back(g);
  }
  Fault victims_fault;  // a victim that cannot be read stays (or, corrupt, goes): the caller's put goes on
  t.get(reads, victims_fault);

  std::vector<Job> moves;
  moves.reserve(reads.size());
  for (std::size_t k = 0; k < reads.size(); ++k) {
    const GetItem& g = reads[k];
    if (g.status == XferStatus::Ok) {
      Job j;
      j.key = g.key;
      j.data = {g.out.data, g.size};
      // An older build's object (whole_sum): get verified it as such; its copy
      // below is stored with today's checksum.
      j.checksum = metas[k].whole_sum ? checksum(ByteView{g.out.data, g.size}) : metas[k].checksum;
      j.source = static_cast<int>(level);
      moves.push_back(j);
    } else if (g.status == XferStatus::ChecksumMismatch) {
      // Its bytes are lost already; moving them would only spread the damage.
      log::app().error("tier chain: dropping {} from {}: it fails its checksum", quote_key(g.key), t.describe());
      if (Fault why; drop_copy(g.key, level, op, why) != XferStatus::Ok)
        log::app().warn("tier chain: cannot drop {} from {}: {}", quote_key(g.key), t.describe(), why.detail());
      dropped_corrupt_.fetch_add(1, std::memory_order_relaxed);
      progress = true;
    }
  }
  std::vector<Job*> todo;
  for (auto& j : moves) todo.push_back(&j);
  // The moves' own failures are not the caller's: they go to a fault of their own.
  Fault moves_fault;
  Op moves_op(moves_fault);
  moves_op.held = op.held;
  moves_op.unavailable = op.unavailable;
  place(level + 1, todo, moves_op);
  op.unavailable |= moves_op.unavailable;
  std::string first_error;
  for (const auto& j : moves) {
    if (j.placed >= 0) {
      progress = true;
      moved_objects_.fetch_add(1, std::memory_order_relaxed);
      moved_bytes_.fetch_add(j.data.size, std::memory_order_relaxed);
    } else {
      failed_moves_.fetch_add(1, std::memory_order_relaxed);
      if (first_error.empty()) first_error = j.errors;
    }
  }
  if (!first_error.empty())
    log::app().warn("tier chain: cannot move victims out of {}: {}", t.describe(), first_error);
  for (const std::size_t s : locked_here) {
    op.held.reset(s);
    stripes_[s].mu.unlock();
  }
  return progress;
}

// ---- get, stat, remove, list ----------------------------------------------------

void TierChain::get(std::span<GetItem> items, Fault& fault) noexcept {
  std::vector<std::size_t> pending;
  for (std::size_t k = 0; k < items.size(); ++k) {
    items[k].tier = -1;
    if (items[k].key.empty()) {
      items[k].status = fault.raise(XferStatus::InvalidDesc, "tier chain: empty key");
    } else {
      pending.push_back(k);
    }
  }
  // Top-down: a move puts the lower copy before it removes the upper one, so a
  // key that is moving is always found in one of the two.
  for (std::size_t i = 0; i < tiers_.size() && !pending.empty(); ++i) {
    std::vector<GetItem> batch(pending.size());
    for (std::size_t k = 0; k < pending.size(); ++k) {
      batch[k].key = items[pending[k]].key;
      batch[k].out = items[pending[k]].out;
    }
    // Above a shared tier: the version each hit is, read before the get, so
    // that a put of this agent in between reads as stale (read on down), never
    // as checked.
    const bool check = static_cast<int>(i) < shared_;
    std::vector<std::optional<ObjectMeta>> local(check ? batch.size() : 0);
    for (std::size_t k = 0; k < local.size(); ++k) local[k] = tiers_[i]->stat(batch[k].key);
    tiers_[i]->get(batch, fault);
    const std::vector<bool> missed = check ? check_hits(i, batch, local) : std::vector<bool>{};
    std::vector<std::size_t> next;
    for (std::size_t k = 0; k < pending.size(); ++k) {
      GetItem& item = items[pending[k]];
      if (check && missed[k]) {
        item.status = XferStatus::NotFound;
        continue;
      }
      if (batch[k].status == XferStatus::NotFound) {
        next.push_back(pending[k]);
        continue;
      }
      item.status = batch[k].status;
      item.size = batch[k].size;
      item.tier = static_cast<int>(i);
    }
    pending = std::move(next);
  }
  for (const std::size_t k : pending) items[k].status = XferStatus::NotFound;
}

std::optional<TierChain::Found> TierChain::stat(std::string_view key) noexcept {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    auto meta = tiers_[i]->stat(key);
    if (!meta) continue;
    if (static_cast<int>(i) >= shared_) return Found{static_cast<int>(i), *meta};
    // Above a shared tier, as a get's hit: current, stale (on down), or a miss.
    std::vector<std::size_t> current, stale;
    validate(i, std::span<const std::string_view>(&key, 1), std::span<const ObjectMeta>(&*meta, 1), &current,
             &stale);
    if (!current.empty()) return Found{static_cast<int>(i), *meta};
    if (stale.empty()) return std::nullopt;
  }
  return std::nullopt;
}

XferStatus TierChain::remove(std::string_view key, Fault& fault) noexcept {
  std::lock_guard lock(stripes_[stripe_of(key)].mu);
  bool any = false;
  std::uint32_t left = 0;  // tiers whose copy may still be there
  XferStatus failed = XferStatus::Ok;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {  // every tier, whatever the map says
    Fault why;
    const XferStatus s = tiers_[i]->remove(key, why);
    if (s == XferStatus::Ok) {
      any = true;
    } else if (s != XferStatus::NotFound) {
      left |= 1u << i;
      if (failed == XferStatus::Ok)
        failed = fault.raise(s, "cannot remove " + quote_key(key) + " from " + tiers_[i]->describe() + ": " + why.detail(),
                             key);
    }
  }
  set_where(key, left);
  if (failed != XferStatus::Ok) return failed;
  return any ? XferStatus::Ok : XferStatus::NotFound;
}

std::vector<TierChain::Listed> TierChain::list(Fault& fault) {
  std::vector<Listed> out;
  KeyMap<std::size_t> seen;
  std::vector<std::pair<std::string, ObjectMeta>> listed;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->list(&listed, fault) != XferStatus::Ok) continue;
    for (auto& [key, meta] : listed) {
      if (seen.find(key) != seen.end()) continue;  // a copy above wins
      seen.emplace(key, out.size());
      out.push_back(Listed{std::move(key), meta, static_cast<int>(i)});
    }
  }
  return out;
}

std::unique_ptr<TierChain> make_chain(const std::vector<std::string>& specs) {
  std::vector<std::unique_ptr<Tier>> tiers;
  for (const auto& s : specs) tiers.push_back(make_tier(s));
  return std::make_unique<TierChain>(std::move(tiers));
}

}  // namespace ferry::xfer::store
