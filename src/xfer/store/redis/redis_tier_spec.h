#pragma once
// The redis and redis-cluster tiers' specs (docs/xfer-tiers.md):
//
//   redis://127.0.0.1:6379                     host and port (default 127.0.0.1:6379)
//   redis://cache:6380/2?prefix=llama:&connections=8&timeout_ms=500
//   redis://cache:6380?user=ferry&password_file=/etc/ferry/redis.pw&tls_ca=/etc/ferry/ca.pem
//   redis-cluster://10.0.0.1:7000,10.0.0.2:7000?password_env=REDIS_PW&wait_replicas=1
//
// and their kinds for the registry (ferry/xfer/tier_registry.h).

#include <string_view>

#include "ferry/xfer/tier_registry.h"
#include "xfer/store/redis/redis_cluster_tier.h"
#include "xfer/store/redis/redis_tier.h"

namespace ferry::xfer::store {

// Throw ferry::Error naming the spec and what is wrong.
RedisTierOptions parse_redis_tier_spec(std::string_view spec);
RedisClusterTierOptions parse_redis_cluster_tier_spec(std::string_view spec);

TierKind redis_tier_kind();
TierKind redis_cluster_tier_kind();

}  // namespace ferry::xfer::store
