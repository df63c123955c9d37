#pragma once
// The redis tier: each object is one Redis string under "<prefix><key>" (prefix
// "ferry:" by default), its value a 32-byte header and then the bytes:
//
//   +0   magic     u64  "FERRYRV1" (little-endian)
//   +8   size      u64  object bytes (the value is 32 + size bytes long)
//   +16  checksum  u64  the object's checksum (checksum.h)
//   +24  flags     u64  1: the checksum is checksum()'s; 0 in values of older
//                       builds, whose checksum is XXH3-64 of all the bytes
//   +32  data
//
// Batches are pipelined on one connection (all commands of a window written,
// then all replies read); concurrent calls use a small pool of connections
// (redis_pool.h), each with a connect and I/O timeout. When Redis goes away the
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
// LRU: Redis is normally the last tier, so victims are rarely asked for. The tier keeps the
// order of last use, in memory, for the keys this process put or got; keys it has
// not touched (stored before a restart, or by another agent) count as older than
// all of those. It does not use OBJECT IDLETIME: any command on a key (stat's
// GETRANGE included) resets it, and it fails under an LFU maxmemory-policy.
// used() is the bytes of the keys this process knows of.
//
// Errors (base/fault.h): a lost connection is raised once per call (Unavailable,
// naming the server and why), and every item it leaves unanswered is
// Unavailable; an error reply, a value that is not ours or does not verify, is
// raised for its key. A miss (NotFound) and a full Redis (NoSpace) are answers,
// not raised. stat cannot report an outage (it has no status): while Redis is
// down it answers "not here" and logs a warning. remove and list do report it,
// and the chain relies on them (tier_chain.h).

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "xfer/store/key_map.h"
#include "xfer/store/redis/redis_pool.h"
#include "xfer/store/tier.h"

namespace ferry::xfer::store {

struct RedisTierOptions {
  RedisEndpoint endpoint;
  std::string prefix = "ferry:";
  unsigned connections = 4;
  std::string spec;  // for describe(); made from the options when empty
};

class RedisTier final : public Tier {
 public:
  // Does not connect: a Redis that is down at start-up is reported per item, and
  // the tier works once it is up.
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

 private:
  struct Tracked {
    std::uint64_t size = 0;
    std::list<std::string>::iterator lru;
  };

  std::string full_key(std::string_view key) const;
  void touch(std::string_view key, std::uint64_t size) noexcept;
  void forget(std::string_view key) noexcept;

  RedisTierOptions opts_;
  std::string spec_;
  std::unique_ptr<RedisPool> pool_;

  mutable std::mutex mu_;  // guards tracked_, lru_, used_
  KeyMap<Tracked> tracked_;
  std::list<std::string> lru_;  // front = most recently used
  std::uint64_t used_ = 0;
};

}  // namespace ferry::xfer::store
