#pragma once
// The redis tier: each object is one Redis string under "<prefix><key>" (prefix
// "ferry:" by default), its value a 32-byte header and then the bytes
// (redis_value.h).
//
// Batches are pipelined on one connection (all commands of a window written,
// then all replies read); concurrent calls use a small pool of connections
// (redis_pool.h), each with a connect and I/O timeout, optionally TLS and AUTH
// (redis_conn.h). When Redis goes away the
// items in flight (and the rest of that call) are Unavailable, the connection is
// dropped, and the next call connects again: the tier keeps working when Redis
// comes back. Redis errors "OOM ..." (maxmemory reached) are NoSpace; "LOADING
// ..." (a Redis reading its data set at start-up), "BUSY ..." (a script past its
// time limit) and "MASTERDOWN ..." are Unavailable: Redis is there, but cannot
// answer yet.
//
// Capacity: Redis's own maxmemory is the bound, so capacity() is kUnbounded (the
// chain never evicts from Redis to make room) and capacity_now() asks Redis
// ("INFO memory"): the bytes of this tier plus Redis's free room under
// maxmemory, or kUnbounded where Redis has no maxmemory or cannot be asked.
//
// LRU and used(): recent_keys.h.
//
// Errors (ferry/xfer/fault.h): a lost connection is raised once per call (Unavailable,
// naming the server and why), and every item it leaves unanswered is
// Unavailable; an error reply, a value that is not ours or does not verify, is
// raised for its key. A miss (NotFound) and a full Redis (NoSpace) are answers,
// not raised. stat cannot report an outage (it has no status): while Redis is
// down it answers "not here" and logs a warning. remove and list do report it,
// and the chain relies on them (tier_chain.h).

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/xfer/tier.h"
#include "xfer/store/redis/recent_keys.h"
#include "xfer/store/redis/redis_pool.h"

namespace ferry::xfer::store {

struct RedisTierOptions {
  RedisEndpoint endpoint;  // its security is made from auth and tls by the constructor
  RedisAuthOptions auth;
  RedisTlsOptions tls;
  std::string prefix = "ferry:";
  unsigned connections = 4;
  // Other agents write the same keys (one Redis for several hosts, one prefix):
  // the chain keeps the tiers above it coherent (ferry/xfer/tier.h, shared()). Off by
  // default: a single Redis is usually one agent's, under its own prefix.
  bool shared = false;
  std::string spec;  // for describe(); made from the options when empty
};

class RedisTier final : public Tier {
 public:
  // Reads the password and loads the TLS files, then tries one connection: a
  // refused password, an untrusted certificate or a server that wants a password
  // it was not given throws ferry::Error. A Redis that is down at start-up is
  // only logged, then reported per item, and the tier works once it is up.
  explicit RedisTier(RedisTierOptions options);
  ~RedisTier() override;

  std::string_view kind() const override { return "redis"; }
  std::string describe() const override { return spec_; }
  std::uint64_t capacity() const override { return kUnbounded; }
  std::uint64_t capacity_now() const override;
  std::uint64_t used() const override;

  void put(std::span<PutItem> items, Fault& fault) noexcept override;
  void get(std::span<GetItem> items, Fault& fault) noexcept override;
  std::optional<ObjectMeta> stat(std::string_view key) noexcept override;
  // Unavailable while Redis is down or not ready (LOADING ...).
  XferStatus remove(std::string_view key, Fault& fault) noexcept override;
  // Unavailable (raised) while Redis is down: the chain must then assume it holds any key.
  XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept override;
  // Lists Redis: while it is down, only the keys this process touched.
  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override;
  bool shared() const noexcept override { return opts_.shared; }
  // GETRANGE of each header, in one pipeline.
  XferStatus headers(std::span<const std::string_view> keys, std::span<std::optional<ObjectMeta>> out,
                     Fault& fault) noexcept override;

 private:
  std::string full_key(std::string_view key) const;

  RedisTierOptions opts_;
  std::string spec_;
  std::unique_ptr<RedisPool> pool_;
  RecentKeys recent_;
};

}  // namespace ferry::xfer::store
