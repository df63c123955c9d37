#pragma once
// The agent's tiers in order (fastest first): dram -> file -> redis, say.
//
// put: an object goes to the first tier that takes it. A tier that is full makes
// room by moving its least recently used objects down to the next tier (which
// may in turn move its own, recursively); an object larger than a tier's
// capacity, or refused by a tier for another reason, goes further down. NoSpace
// only when no tier can take it; the message names every tier's answer.
//
// Invariants, and why they hold:
// - At most one version of a key is visible, and never an old one above a new
//   one. A new object about to go below a tier first removes its old copy there
//   (so a crash in between cannot leave the old version shadowing the new one);
//   once it is placed, copies of it in other tiers are removed.
// - A move never loses an object and never exposes a half-written one: the copy
//   is put into the lower tier (atomically, by the tier's contract) before it is
//   removed from the upper one. A get searches top-down, so a reader that misses
//   the upper copy finds the lower one.
// - Puts, moves and removes of one key never interleave: each holds the key's
//   stripe lock (4096 stripes). A put sorts its batch by stripe and places it in
//   windows of up to kWindow keys, each window's stripes locked in ascending
//   order and released before the next window's are taken; a move only
//   try-locks its victims' stripes and skips a victim that is busy, so no thread
//   ever waits while holding a lock out of order: no deadlock. (A whole batch of
//   256 keys under its stripes held most of them: the agent's lanes' puts ran one
//   at a time. With windows, two lanes' puts pipeline behind each other.) A top
//   tier that drains its queue at the end of each call (the file tier) asks for
//   windows of enough bytes to keep its disk busy (Tier::put_window_bytes):
//   larger windows let the file tier write larger packs, nearer fio's rate
//   (docs/bench/store.md).
// - Gets take no chain lock: they see the old object, the new one, or (while a
//   put moves a key to a lower tier) briefly neither: a cache miss, never stale
//   or torn data.
//
// The chain remembers which tiers hold each key (rebuilt from every tier's list()
// at construction), so that removing stale copies costs nothing when there are
// none (no Redis round trip per put). The map is split by stripe and guarded by
// the stripe's lock, which every writer of a key holds anyway: no global lock. It assumes it is the only
// writer of its tiers: the file tier locks its directory; give each agent its own Redis prefix.
//
// A shared tier (Tier::shared(): a Redis or Redis Cluster that the agents of
// several hosts write) breaks that assumption for the tiers above it, so with
// one in the chain (the last tier; it is refused anywhere else, since a tier
// below it would hold what no other agent can see) the chain keeps them
// coherent with it (tier_chain_shared.cpp):
// - A put is acknowledged only once the shared tier has it (write-through);
//   the tier above that took it keeps a copy. A put the shared tier refuses is
//   taken out of the tier above again and fails with the shared tier's status.
// - A tier above that is full drops its victims that the shared tier holds
//   instead of moving them down.
// - A hit above is served only after the shared tier's header of the key
//   (size, checksum) matches the local copy's: one header read per batch of
//   hits (a pipelined GETRANGE), on the get, borrow and stat paths. A mismatch
//   drops the local copy and reads on down; an absent key drops it and is a
//   miss (another agent removed it). A shared tier that cannot answer makes
//   the hits misses, logged with the cause: never an unchecked copy.
// - remove() reaches every tier anyway.
//
// A restart never serves an older version than the one acknowledged. After a
// restart the tiers above may start empty (dram), so a put is acknowledged only
// once no older copy of its key is left in any tier: a copy that cannot be
// removed (Redis down, no room for the file tier's tombstone) fails the put with
// that tier's status, and the new version is taken out again. A tier that could
// not be listed at construction (Redis down at start-up) may hold any key: until
// a later attempt lists it (at most once a second, from a put), every put first
// removes its keys there, and fails while it cannot.

#include <array>
#include <atomic>
#include <bitset>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/spin_mutex.h"
#include "ferry/xfer/tier.h"
#include "xfer/store/key_map.h"
#include "xfer/store/storage.h"

namespace ferry::xfer::store {

// The agent's one door to its tiers (storage.h): the data path's puts and gets,
// and the top tier's zero-copy capability where it offers one.
class TierChain final : public Storage {
 public:
  // Takes ownership; throws ferry::Error for no tiers or more than 32.
  explicit TierChain(std::vector<std::unique_ptr<Tier>> tiers);
  ~TierChain() override;

  // Stores each item (a status per item; the first failure's text in `fault`).
  void put(std::span<PutItem> items, Fault& fault) noexcept override;
  // Reads each item from the topmost tier that has it; sets item.tier.
  void get(std::span<GetItem> items, Fault& fault) noexcept override;
  // The top tier's Reservable, when it has one (the dram tier).
  void reserve(std::span<const std::uint64_t> sizes, Lease& lease) noexcept override;
  void borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out) noexcept override;
  int zero_copy_tier() const noexcept override { return 0; }
  std::span<std::byte> dma_memory() const noexcept override;
  // Streaming reaches the top tier only, where it streams (the file tier). A
  // full top tier makes room below as put() does; a put it still cannot take
  // goes by put(), which moves on down. A get streams through the tiers from
  // the top while they stream; below, get() reads it (NotFound when no tier
  // there has it). The key's stripe is held while its object streams in.
  std::uint64_t stream_above() const noexcept override;
  std::optional<XferStatus> put_streamed(std::string_view key, std::uint64_t size, const PieceSource& source,
                                         int* tier, Fault& fault) noexcept override;
  std::optional<XferStatus> get_streamed(std::string_view key, std::uint64_t capacity, const PieceSink& sink,
                                         std::uint64_t* size, int* tier, Fault& fault) noexcept override;

  struct Found {
    int tier = -1;
    ObjectMeta meta;
  };
  std::optional<Found> stat(std::string_view key) noexcept;
  // Removes the key from every tier. Ok: some tier had it, and none has now;
  // NotFound: no tier had it; any other status (raised, naming the tier and
  // the cause): a tier could not remove its copy (Redis down, a full disk for
  // the file tier's tombstone), which may still be read, also after a restart.
  XferStatus remove(std::string_view key, Fault& fault) noexcept;

  struct Listed {
    std::string key;
    ObjectMeta meta;
    int tier = -1;
  };
  // Every key once, with the topmost tier that holds it. A tier that cannot be
  // listed (Redis down) is raised and skipped: the listing holds the others.
  std::vector<Listed> list(Fault& fault);

  std::size_t size() const { return tiers_.size(); }
  Tier& tier(std::size_t i) const { return *tiers_.at(i); }

  struct Stats {
    std::uint64_t moved_objects = 0;  // moved down to make room
    std::uint64_t moved_bytes = 0;
    std::uint64_t failed_moves = 0;     // victims no lower tier would take (they stay put)
    std::uint64_t dropped_corrupt = 0;  // victims that failed their checksum (removed)
    std::uint64_t dropped_shared = 0;   // victims above a shared tier that holds them (dropped, not moved)
    std::uint64_t dropped_stale = 0;    // copies above a shared tier that it no longer holds in that version
  };
  Stats stats() const;

 private:
  // 4096: a lane's batch of 256 keys locks ~250 of them, 32 at a time, so two
  // lanes' windows rarely share a stripe (with 1024 they often did, and the
  // later lane waited for the earlier one's whole window).
  static constexpr std::size_t kStripes = 4096;
  static constexpr std::size_t kWindow = 32;  // keys placed under one set of stripe locks
  // A window grows past kWindow keys while it holds fewer than the top tier's
  // put_window_bytes(), up to this many keys (a quarter of the stripes).
  static constexpr std::size_t kMaxWindow = kStripes / 4;
  struct Job;
  struct Op;

  // How often a put tries again to list the tiers that could not be listed.
  static constexpr std::chrono::seconds kRelistInterval{1};

  std::size_t stripe_of(std::string_view key) const;
  void place(std::size_t level, std::vector<Job*> jobs, Op& op);
  bool make_room(std::size_t level, std::uint64_t bytes, Op& op);
  bool remove_from_unlisted(Job& job, std::uint32_t unlisted, Op& op);
  // `kept`: tiers that also hold this version (the shared tier, written
  // through), whose copy stays.
  void placed(Job& job, std::size_t level, Op& op, std::uint32_t kept = 0);
  XferStatus drop_copy(std::string_view key, std::size_t level, Op& op, Fault& fault) noexcept;
  XferStatus remove_from(std::size_t level, std::string_view key, Op& op, Fault& fault) noexcept;
  void relist();

  // A shared tier's part (tier_chain_shared.cpp).
  // Puts jobs just placed in tier `level` (above the shared tier) into the
  // shared tier too; a job it refuses is taken out of `level` again and failed.
  // Returns the jobs both tiers hold.
  std::vector<Job*> write_through(std::size_t level, std::vector<Job*> jobs, Op& op);
  // Checks hits in tier `level` (above the shared tier) against it: *current
  // gets those to serve, *stale those whose key has another version there
  // (read on down), and the rest (absent there, or it cannot say) are misses.
  // Local copies that are not current are dropped.
  void validate(std::size_t level, std::span<const std::string_view> keys, std::span<const ObjectMeta> local,
                std::vector<std::size_t>* current, std::vector<std::size_t>* stale) noexcept;
  // Checks a get's hits in tier `level` (above the shared tier), whose versions
  // `local` were read before it: a stale hit becomes NotFound (read on down);
  // true where the key is a miss outright (absent from the shared tier, or it
  // cannot say).
  std::vector<bool> check_hits(std::size_t level, std::span<GetItem> batch,
                               std::span<const std::optional<ObjectMeta>> local) noexcept;
  // Removes the key's copy in tier `level` if it still is the version `seen`.
  void drop_stale(std::size_t level, std::string_view key, const ObjectMeta& seen) noexcept;
  // Whether the object is one the tiers above the shared tier should drop, not move.
  bool drop_not_move(std::size_t level, std::string_view key);

  // The key's mask (bit i: tier i holds it); the caller holds the key's stripe.
  std::uint32_t where(std::string_view key);
  void set_where(std::string_view key, std::uint32_t mask);

  struct Stripe {
    // A window's section is the top tier's put of up to kWindow keys (tens of
    // microseconds); a parked std::mutex waiter woke later than that, and each
    // late wake-up delayed every lane queued behind it.
    SpinMutex mu;
    KeyMap<std::uint32_t> where;  // guarded by mu: the masks of this stripe's keys
  };

  std::vector<std::unique_ptr<Tier>> tiers_;
  Reservable* zero_copy_ = nullptr;  // the top tier's capability, or none
  Streamable* streaming_ = nullptr;  // the top tier's, or none
  int shared_ = -1;                  // the shared tier's index (the last tier), or none
  std::array<Stripe, kStripes> stripes_;

  // Bit i: tier i could not be listed (Redis down at start-up), so the map does
  // not say which keys it holds. Cleared by relist() once it has merged the
  // tier's keys into the map; release there pairs with the acquire load in
  // put(), which then finds those keys' bits in the map.
  std::atomic<std::uint32_t> unlisted_{0};
  std::mutex relist_mu_;                                 // one relist() at a time; the others go on without
  std::chrono::steady_clock::time_point next_relist_{};  // guarded by relist_mu_

  std::atomic<std::uint64_t> moved_objects_{0}, moved_bytes_{0}, failed_moves_{0}, dropped_corrupt_{0};
  std::atomic<std::uint64_t> dropped_shared_{0}, dropped_stale_{0};
};

// The chain of the tiers these specs name (ferry/xfer/tier_registry.h), top
// first. Throws ferry::Error.
std::unique_ptr<TierChain> make_chain(const std::vector<std::string>& specs);

}  // namespace ferry::xfer::store
