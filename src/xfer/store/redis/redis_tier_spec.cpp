#include "xfer/store/redis/redis_tier_spec.h"

#include "xfer/store/spec_parse.h"

namespace ferry::xfer::store {
namespace {

constexpr std::string_view kRedisUsage = "redis://<host>:<port>[/<db>][?<options>]";
constexpr std::string_view kClusterUsage = "redis-cluster://<host>:<port>[,<host>:<port>...][?<options>]";

// The options both redis tiers take (docs/xfer-tiers.md).
constexpr const char* kRedisOptions =
    "shared, prefix, connections, timeout_ms, user, password_file, password_env, tls, tls_ca, tls_cert, "
    "tls_key, tls_name";

// What follows "<scheme>://".
std::string_view after_scheme(const SpecReader& r, std::string_view scheme) {
  const std::string prefix = std::string(scheme) + "://";
  if (r.spec().substr(0, prefix.size()) != prefix) r.fail("expected '" + prefix + "' at the start");
  return r.spec().substr(prefix.size());
}

// "host:port", "host", "[v6]:port", ":port": the parts given, the rest left as they were.
void parse_host_port(const SpecReader& r, std::string_view authority, std::string* host, int* port) {
  std::string_view h = authority, p;
  if (authority.substr(0, 1) == "[") {  // [::1]:6379
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) r.fail("unclosed '[' in the host");
    h = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') r.fail("expected ':<port>' after the host");
      p = after.substr(1);
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    h = authority.substr(0, colon);
    p = authority.substr(colon + 1);
  }
  if (!h.empty()) *host = std::string(h);
  if (!p.empty()) *port = static_cast<int>(r.whole_number(p, "port", 1, 65535));
}

// One option both redis tiers take; false when `name` is not one of them.
bool parse_redis_option(const SpecReader& r, std::string_view name, std::string_view value, std::string* prefix,
                        unsigned* connections, int* timeout_ms, RedisAuthOptions* auth, RedisTlsOptions* tls,
                        bool* shared) {
  const auto path = [&] {
    if (value.empty()) r.fail(std::string(name) + " needs a value");
    return std::string(value);
  };
  if (name == "shared") {
    *shared = r.yes_no(name, value);
  } else if (name == "prefix") {
    *prefix = std::string(value);
  } else if (name == "connections") {
    *connections = static_cast<unsigned>(r.whole_number(value, "connections", 1, 256));
  } else if (name == "timeout_ms") {
    *timeout_ms = static_cast<int>(r.whole_number(value, "timeout_ms", 1, 600000));
  } else if (name == "user") {
    auth->user = path();
  } else if (name == "password_file") {
    auth->password_file = path();
  } else if (name == "password_env") {
    auth->password_env = path();
  } else if (name == "password") {
    r.fail(
        "a password on the command line can be read by every user of the host: give password_file or "
        "password_env");
  } else if (name == "tls") {
    tls->enabled = r.yes_no(name, value);
  } else if (name == "tls_ca") {
    tls->ca_file = path();
    tls->enabled = true;
  } else if (name == "tls_cert") {
    tls->cert_file = path();
    tls->enabled = true;
  } else if (name == "tls_key") {
    tls->key_file = path();
    tls->enabled = true;
  } else if (name == "tls_name") {
    tls->name = path();
    tls->enabled = true;
  } else {
    return false;
  }
  return true;
}

// "name=value&..." into calls of `option(name, value)`.
template <class Option>
void parse_query(const SpecReader& r, std::string_view query, Option option) {
  if (query.empty()) return;
  for (const std::string_view kv : split(query, '&')) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) r.fail("query parameter '" + std::string(kv) + "' has no '='");
    option(kv.substr(0, eq), kv.substr(eq + 1));
  }
}

// Splits "<authority>[/...][?query]" at the '?'; refuses a password in the
// authority ("user:pw@host").
std::string_view take_query(const SpecReader& r, std::string_view* rest) {
  if (rest->substr(0, rest->find('?')).find('@') != std::string_view::npos)
    r.fail("passwords in redis URLs are not supported (give password_file or password_env)");
  std::string_view query;
  if (const std::size_t q = rest->find('?'); q != std::string_view::npos) {
    query = rest->substr(q + 1);
    *rest = rest->substr(0, q);
  }
  return query;
}

}  // namespace

RedisTierOptions parse_redis_tier_spec(std::string_view spec) {
  const SpecReader r(spec, kRedisUsage);
  std::string_view rest = after_scheme(r, "redis");
  RedisTierOptions o;
  o.spec = std::string(spec);
  const std::string_view query = take_query(r, &rest);
  std::string_view authority = rest;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) o.endpoint.db = static_cast<int>(r.whole_number(db, "database", 0, 1 << 20));
  }
  parse_host_port(r, authority, &o.endpoint.host, &o.endpoint.port);
  parse_query(r, query, [&](std::string_view name, std::string_view value) {
    if (!parse_redis_option(r, name, value, &o.prefix, &o.connections, &o.endpoint.timeout_ms, &o.auth, &o.tls,
                            &o.shared))
      r.fail("unknown redis parameter '" + std::string(name) + "' (parameters: " + kRedisOptions + ")");
  });
  return o;
}

RedisClusterTierOptions parse_redis_cluster_tier_spec(std::string_view spec) {
  const SpecReader r(spec, kClusterUsage);
  std::string_view rest = after_scheme(r, "redis-cluster");
  RedisClusterTierOptions o;
  o.spec = std::string(spec);
  const std::string_view query = take_query(r, &rest);
  if (rest.find('/') != std::string_view::npos) r.fail("a Redis Cluster has no databases: no '/<db>'");
  for (const std::string_view node : split(rest, ',')) {
    if (node.empty()) r.fail("an empty node in the seed list");
    ClusterAddress a{"127.0.0.1", 6379};
    parse_host_port(r, node, &a.host, &a.port);
    o.seeds.push_back(std::move(a));
  }
  parse_query(r, query, [&](std::string_view name, std::string_view value) {
    if (parse_redis_option(r, name, value, &o.prefix, &o.connections, &o.timeout_ms, &o.auth, &o.tls, &o.shared))
      return;
    if (name == "attempts") {
      o.attempts = static_cast<unsigned>(r.whole_number(value, "attempts", 1, 1000));
    } else if (name == "retry_ms") {
      o.retry_ms = static_cast<int>(r.whole_number(value, "retry_ms", 0, 600000));
    } else if (name == "wait_replicas") {
      o.wait_replicas = static_cast<unsigned>(r.whole_number(value, "wait_replicas", 0, 64));
    } else {
      r.fail("unknown redis-cluster parameter '" + std::string(name) + "' (parameters: " + kRedisOptions +
             ", attempts, retry_ms, wait_replicas)");
    }
  });
  return o;
}

TierKind redis_tier_kind() {
  return {"redis", std::string(kRedisUsage),
          [](std::string_view spec) { return std::make_unique<RedisTier>(parse_redis_tier_spec(spec)); }};
}

TierKind redis_cluster_tier_kind() {
  return {"redis-cluster", std::string(kClusterUsage), [](std::string_view spec) {
            return std::make_unique<RedisClusterTier>(parse_redis_cluster_tier_spec(spec));
          }};
}

}  // namespace ferry::xfer::store
