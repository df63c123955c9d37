#pragma once
// The redis-cluster tier: the redis tier's values (redis_value.h) in a Redis
// Cluster, doing what a careful cluster client does:
//
// - Slots: the map of the 16384 hash slots to their primaries comes from
//   CLUSTER SHARDS (CLUSTER SLOTS on servers before 7.0), asked of any node it
//   knows, the seeds first. A key goes to its slot's primary (cluster_slots.h:
//   CRC16, hash tags honoured).
// - Batches: a call's items are split per primary, and each primary gets a
//   pipeline on a connection from its own pool (redis_pool.h). The windows of
//   all the primaries are written before any of their replies are read, so the
//   primaries work at once. Pools are leased in one order (the node's index), so
//   concurrent calls never wait on each other in a cycle.
// - Redirects: MOVED points the slot at its new primary, sends the item there
//   next and marks the map stale; ASK sends the item once to the named node,
//   after ASKING. A lost
//   connection, CLUSTERDOWN, TRYAGAIN, LOADING or MASTERDOWN marks the map stale
//   and the items try again after a backoff (10 ms, doubling to 200 ms).
//   Before each new round a stale map is asked again. A SET sent twice stores
//   the same value: retrying a put is safe.
// - Bounds: an item gets at most `attempts` rounds, and `retry_ms` from the
//   call's first failure (backoffs and connect timeouts together); then it is
//   Unavailable, raised once with the last cause.
// - An object is one value in one slot: it is served whole or not at all, never
//   in part (no striping; Cluster has no atomic write across slots).
// - Replication is asynchronous: after a failover, what the promoted replica
//   had not yet received is gone, and a get of it is a miss. Every value read
//   is checked against its checksum, so a miss is never wrong data.
//   wait_replicas=N makes a put acknowledged only once N replicas have it
//   (WAIT), so a failover loses nothing acknowledged; a put that N replicas did
//   not confirm in time is Unavailable (it may be stored all the same).
//
// Capacity: capacity_now() adds each primary's room under its maxmemory (INFO
// memory, as the redis tier asks one server) to used(); kUnbounded when a
// primary has no maxmemory or cannot be asked. LRU and used(): recent_keys.h.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "ferry/xfer/tier.h"
#include "xfer/store/redis/cluster_slots.h"
#include "xfer/store/redis/recent_keys.h"
#include "xfer/store/redis/redis_pool.h"

namespace ferry::xfer::store {

struct RedisClusterTierOptions {
  std::vector<ClusterAddress> seeds;  // any nodes of the cluster
  std::string prefix = "ferry:";
  unsigned connections = 4;    // per node
  int timeout_ms = 2000;       // connect, and every read or write
  unsigned attempts = 16;      // rounds an item may take (redirects and retries)
  int retry_ms = 3000;         // how long an item may wait in backoffs, in all
  unsigned wait_replicas = 0;  // WAIT for this many replicas after each window of puts
  // Other agents write the same keys: the chain keeps the tiers above it
  // coherent (ferry/xfer/tier.h, shared()). On by default: a cluster is what several
  // hosts share, and a tier above it that assumed otherwise would serve stale
  // copies. shared=0 for a cluster one agent has to itself (under its own prefix).
  bool shared = true;
  RedisAuthOptions auth;
  RedisTlsOptions tls;
  std::string spec;  // for describe(); made from the options when empty
};

class RedisClusterTier final : public Tier {
 public:
  // Reads the password and loads the TLS files, checks the seeds (as
  // RedisTier: a refused password or an untrusted certificate throws
  // ferry::Error) and asks for the slot map. A cluster that cannot be reached
  // at start-up is only logged: the first call asks again.
  explicit RedisClusterTier(RedisClusterTierOptions options);
  ~RedisClusterTier() override;

  std::string_view kind() const override { return "redis-cluster"; }
  std::string describe() const override { return spec_; }
  std::uint64_t capacity() const override { return kUnbounded; }
  std::uint64_t capacity_now() const override;
  std::uint64_t used() const override { return recent_.used(); }

  void put(std::span<PutItem> items, Fault& fault) noexcept override;
  void get(std::span<GetItem> items, Fault& fault) noexcept override;
  std::optional<ObjectMeta> stat(std::string_view key) noexcept override;
  XferStatus remove(std::string_view key, Fault& fault) noexcept override;
  // Every primary's keys; Unavailable (raised) when any primary cannot be listed.
  XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept override;
  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override;
  bool shared() const noexcept override { return opts_.shared; }
  // GETRANGE of each header, pipelined per primary as get() is.
  XferStatus headers(std::span<const std::string_view> keys, std::span<std::optional<ObjectMeta>> out,
                     Fault& fault) noexcept override;

  // For tests: how many times the slot map was read, and redirects followed.
  std::uint64_t map_refreshes() const { return refreshes_.load(); }
  std::uint64_t redirects() const { return redirects_.load(); }

 private:
  struct Node {
    ClusterAddress address;
    std::unique_ptr<RedisPool> pool;
  };
  static constexpr std::uint16_t kNoNode = 0xffff;

  // One call's items through the cluster (the definition says how).
  struct Op;
  void run(Op& op, std::size_t n, Fault& fault) noexcept;
  // One command on one key through run(): Ok with its reply in *reply; an error
  // reply that is no redirect is raised and its status returned (Unavailable
  // or IoError); Unavailable (raised) when the rounds ran out.
  XferStatus one_key(const char* name, std::string_view key, const std::vector<std::string>& args,
                     RespValue* reply, Fault& fault) noexcept;

  // Reads the slot map again, unless another thread did since `seen` (the
  // epoch the caller routed with). False, with *why, when no node answered.
  bool refresh(std::uint64_t seen, std::string* why) const noexcept;
  // The node's index, adding it when new. Caller holds map_mu_ exclusively.
  std::uint16_t node_locked(const ClusterAddress& a) const;
  Node* node(std::uint16_t index) const;
  // The primaries (indices) the map names now.
  std::vector<std::uint16_t> primaries() const;
  std::string full_key(std::string_view key) const { return opts_.prefix + std::string(key); }

  RedisClusterTierOptions opts_;
  std::string spec_;
  std::shared_ptr<const RedisSecurity> security_;
  RecentKeys recent_;

  // The slot map. Read by every call (shared), written by refresh() and by a
  // MOVED (exclusive). Nodes are only ever added: an index stays valid.
  mutable std::shared_mutex map_mu_;
  mutable std::vector<std::unique_ptr<Node>> nodes_;
  mutable std::array<std::uint16_t, kClusterSlots> owner_;
  mutable std::atomic<std::uint64_t> epoch_{0};  // bumped by each refresh; 0: never read
  mutable std::mutex refresh_mu_;                // one refresh at a time
  mutable std::atomic<std::uint64_t> refreshes_{0};
  std::atomic<std::uint64_t> redirects_{0};
};

}  // namespace ferry::xfer::store
