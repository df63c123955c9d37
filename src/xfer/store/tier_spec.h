#pragma once
// The agent's --tier flags, one tier each, fastest first:
//
//   dram:8GiB                                  capacity (K/M/G/T = KiB/MiB/GiB/TiB, KB/MB/GB = 10^3...)
//   file:/var/lib/ferry                        a directory, unbounded, buffered, queue depth 32
//   file:/mnt/nvme/kv,direct,capacity=10GiB,qd=64,fsync
//   file:/mnt/nvme/kv,pack=256KiB              objects up to 256 KiB go into pack files (default
//                                              1MiB; pack=0: a file per object)
//   redis://127.0.0.1:6379                     host and port (default 127.0.0.1:6379)
//   redis://cache:6380/2?prefix=llama:&connections=8&timeout_ms=500
//   redis://cache:6380?user=ferry&password_file=/etc/ferry/redis.pw&tls_ca=/etc/ferry/ca.pem
//   redis-cluster://10.0.0.1:7000,10.0.0.2:7000?password_env=REDIS_PW&wait_replicas=1
//
// A spec that cannot be parsed throws ferry::Error with the spec, what is wrong
// and the accepted forms.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/store/file/file_tier.h"
#include "xfer/store/redis/redis_cluster_tier.h"
#include "xfer/store/redis/redis_tier.h"
#include "xfer/store/tier.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {

struct TierSpec {
  enum class Kind { Dram, File, Redis, RedisCluster } kind = Kind::Dram;
  std::uint64_t dram_capacity = 0;
  FileTierOptions file;
  RedisTierOptions redis;
  RedisClusterTierOptions redis_cluster;
  std::string text;  // the spec as given
};

TierSpec parse_tier_spec(std::string_view spec);

// Builds the tier (the file tier opens and scans its directory here). Throws
// ferry::Error.
std::unique_ptr<Tier> make_tier(const TierSpec& spec);
std::unique_ptr<Tier> make_tier(std::string_view spec);
std::unique_ptr<TierChain> make_chain(const std::vector<std::string>& specs);

}  // namespace ferry::xfer::store
