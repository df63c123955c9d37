#include "xfer/store/tier_spec.h"

#include <charconv>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/sizes.h"

namespace ferry::xfer::store {
namespace {

constexpr const char* kForms =
    "accepted forms: dram:<size>, "
    "file:<dir>[,direct][,fsync][,capacity=<size>][,qd=<n>][,pack=<size>][,threads=<n>][,cores=<n>], "
    "redis://<host>:<port>[/<db>][?<options>], redis-cluster://<host>:<port>[,<host>:<port>...][?<options>]";

// The options both redis tiers take (docs/xfer-tiers.md).
constexpr const char* kRedisOptions =
    "shared, prefix, connections, timeout_ms, user, password_file, password_env, tls, tls_ca, tls_cert, "
    "tls_key, "
    "tls_name";

[[noreturn]] void bad(std::string_view spec, const std::string& why) {
  throw Error("tier '" + std::string(spec) + "': " + why + " (" + kForms + ")");
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

long parse_int(std::string_view spec, std::string_view text, std::string_view what, long lo, long hi) {
  long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad(spec, std::string(what) + " '" + std::string(text) + "' is not a whole number");
  if (v < lo || v > hi)
    bad(spec, std::string(what) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
                  std::to_string(hi));
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t next = s.find(sep, at);
    out.push_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}

TierSpec parse_file(std::string_view spec, std::string_view rest) {
  TierSpec t;
  t.kind = TierSpec::Kind::File;
  const auto parts = split(rest, ',');
  if (parts[0].empty()) bad(spec, "no directory after 'file:'");
  t.file.dir = std::string(parts[0]);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    const std::size_t eq = p.find('=');
    const std::string_view name = p.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : p.substr(eq + 1);
    if (name == "direct" && eq == std::string_view::npos) {
      t.file.direct = true;
    } else if (name == "fsync" && eq == std::string_view::npos) {
      t.file.fsync = true;
    } else if (name == "capacity" && eq != std::string_view::npos) {
      t.file.capacity = parse_size(value, "tier '" + std::string(spec) + "' capacity");
      if (t.file.capacity == 0) bad(spec, "capacity must be more than 0 bytes");
    } else if (name == "qd" && eq != std::string_view::npos) {
      t.file.queue_depth = static_cast<unsigned>(parse_int(spec, value, "qd", 1, 4096));
    } else if (name == "threads" && eq != std::string_view::npos) {
      t.file.threads = static_cast<unsigned>(parse_int(spec, value, "threads", 1, 64));
    } else if (name == "cores" && eq != std::string_view::npos) {
      t.file.cores = static_cast<unsigned>(parse_int(spec, value, "cores", 1, 4096));
    } else if (name == "pack" && eq != std::string_view::npos) {
      t.file.pack_threshold = parse_size(value, "tier '" + std::string(spec) + "' pack");
      if (t.file.pack_threshold > t.file.pack_max)
        bad(spec, "pack=" + std::string(value) + " is larger than a pack file (" +
                      format_size(t.file.pack_max) + "); objects larger than pack= get a file each");
    } else {
      bad(spec,
          "unknown file tier option '" + std::string(p) +
              "' (options: direct, fsync, capacity=<size>, qd=<n>, pack=<size>, threads=<n>, cores=<n>)");
    }
  }
  return t;
}

// "host:port", "host", "[v6]:port", ":port": the parts given, the rest left as they were.
void parse_host_port(std::string_view spec, std::string_view authority, std::string* host, int* port) {
  std::string_view h = authority, p;
  if (starts_with(authority, "[")) {  // [::1]:6379
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad(spec, "unclosed '[' in the host");
    h = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad(spec, "expected ':<port>' after the host");
      p = after.substr(1);
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    h = authority.substr(0, colon);
    p = authority.substr(colon + 1);
  }
  if (!h.empty()) *host = std::string(h);
  if (!p.empty()) *port = static_cast<int>(parse_int(spec, p, "port", 1, 65535));
}

bool parse_switch(std::string_view spec, std::string_view name, std::string_view value) {
  if (value == "yes" || value == "on" || value == "1" || value == "true") return true;
  if (value == "no" || value == "off" || value == "0" || value == "false") return false;
  bad(spec, std::string(name) + "=" + std::string(value) + " is not yes or no");
}

// One option both redis tiers take; false when `name` is not one of them.
bool parse_redis_option(std::string_view spec, std::string_view name, std::string_view value,
                        std::string* prefix, unsigned* connections, int* timeout_ms, RedisAuthOptions* auth,
                        RedisTlsOptions* tls, bool* shared) {
  const auto path = [&] {
    if (value.empty()) bad(spec, std::string(name) + " needs a value");
    return std::string(value);
  };
  if (name == "shared") {
    *shared = parse_switch(spec, name, value);
  } else if (name == "prefix") {
    *prefix = std::string(value);
  } else if (name == "connections") {
    *connections = static_cast<unsigned>(parse_int(spec, value, "connections", 1, 256));
  } else if (name == "timeout_ms") {
    *timeout_ms = static_cast<int>(parse_int(spec, value, "timeout_ms", 1, 600000));
  } else if (name == "user") {
    auth->user = path();
  } else if (name == "password_file") {
    auth->password_file = path();
  } else if (name == "password_env") {
    auth->password_env = path();
  } else if (name == "password") {
    bad(spec,
        "a password on the command line can be read by every user of the host: give password_file or "
        "password_env");
  } else if (name == "tls") {
    tls->enabled = parse_switch(spec, name, value);
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
void parse_query(std::string_view spec, std::string_view query, Option option) {
  if (query.empty()) return;
  for (const std::string_view kv : split(query, '&')) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) bad(spec, "query parameter '" + std::string(kv) + "' has no '='");
    option(kv.substr(0, eq), kv.substr(eq + 1));
  }
}

// Splits "<authority>[/...][?query]" at the '?'; refuses a password in the
// authority ("user:pw@host").
std::string_view take_query(std::string_view spec, std::string_view* rest) {
  if (rest->substr(0, rest->find('?')).find('@') != std::string_view::npos)
    bad(spec, "passwords in redis URLs are not supported (give password_file or password_env)");
  std::string_view query;
  if (const std::size_t q = rest->find('?'); q != std::string_view::npos) {
    query = rest->substr(q + 1);
    *rest = rest->substr(0, q);
  }
  return query;
}

TierSpec parse_redis(std::string_view spec, std::string_view rest) {
  TierSpec t;
  t.kind = TierSpec::Kind::Redis;
  const std::string_view query = take_query(spec, &rest);
  std::string_view authority = rest;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) t.redis.endpoint.db = static_cast<int>(parse_int(spec, db, "database", 0, 1 << 20));
  }
  parse_host_port(spec, authority, &t.redis.endpoint.host, &t.redis.endpoint.port);
  RedisTierOptions& r = t.redis;
  parse_query(spec, query, [&](std::string_view name, std::string_view value) {
    if (!parse_redis_option(spec, name, value, &r.prefix, &r.connections, &r.endpoint.timeout_ms, &r.auth,
                            &r.tls, &r.shared))
      bad(spec, "unknown redis parameter '" + std::string(name) + "' (parameters: " + kRedisOptions + ")");
  });
  return t;
}

TierSpec parse_redis_cluster(std::string_view spec, std::string_view rest) {
  TierSpec t;
  t.kind = TierSpec::Kind::RedisCluster;
  const std::string_view query = take_query(spec, &rest);
  if (rest.find('/') != std::string_view::npos) bad(spec, "a Redis Cluster has no databases: no '/<db>'");
  RedisClusterTierOptions& c = t.redis_cluster;
  for (const std::string_view node : split(rest, ',')) {
    if (node.empty()) bad(spec, "an empty node in the seed list");
    ClusterAddress a{"127.0.0.1", 6379};
    parse_host_port(spec, node, &a.host, &a.port);
    c.seeds.push_back(std::move(a));
  }
  parse_query(spec, query, [&](std::string_view name, std::string_view value) {
    if (parse_redis_option(spec, name, value, &c.prefix, &c.connections, &c.timeout_ms, &c.auth, &c.tls,
                           &c.shared))
      return;
    if (name == "attempts") {
      c.attempts = static_cast<unsigned>(parse_int(spec, value, "attempts", 1, 1000));
    } else if (name == "retry_ms") {
      c.retry_ms = static_cast<int>(parse_int(spec, value, "retry_ms", 0, 600000));
    } else if (name == "wait_replicas") {
      c.wait_replicas = static_cast<unsigned>(parse_int(spec, value, "wait_replicas", 0, 64));
    } else {
      bad(spec, "unknown redis-cluster parameter '" + std::string(name) + "' (parameters: " + kRedisOptions +
                    ", attempts, retry_ms, wait_replicas)");
    }
  });
  return t;
}

}  // namespace

TierSpec parse_tier_spec(std::string_view spec) {
  TierSpec t;
  if (starts_with(spec, "dram:")) {
    t.kind = TierSpec::Kind::Dram;
    const std::string_view size = spec.substr(5);
    if (size.empty()) bad(spec, "no capacity after 'dram:'");
    t.dram_capacity = parse_size(size, "tier '" + std::string(spec) + "' capacity");
    if (t.dram_capacity == 0) bad(spec, "capacity must be more than 0 bytes");
  } else if (starts_with(spec, "file:")) {
    t = parse_file(spec, spec.substr(5));
  } else if (starts_with(spec, "redis://")) {
    t = parse_redis(spec, spec.substr(8));
  } else if (starts_with(spec, "redis-cluster://")) {
    t = parse_redis_cluster(spec, spec.substr(16));
  } else {
    const std::size_t colon = spec.find(':');
    bad(spec, colon == std::string_view::npos
                  ? "no tier kind"
                  : "unknown tier kind '" + std::string(spec.substr(0, colon)) + "'");
  }
  t.text = std::string(spec);
  t.file.spec = t.text;
  t.redis.spec = t.text;
  t.redis_cluster.spec = t.text;
  return t;
}

std::unique_ptr<Tier> make_tier(const TierSpec& spec) {
  switch (spec.kind) {
    case TierSpec::Kind::Dram: return std::make_unique<DramTier>(spec.dram_capacity, spec.text);
    case TierSpec::Kind::File: return std::make_unique<FileTier>(spec.file);
    case TierSpec::Kind::Redis: return std::make_unique<RedisTier>(spec.redis);
    case TierSpec::Kind::RedisCluster: return std::make_unique<RedisClusterTier>(spec.redis_cluster);
  }
  throw Error("tier '" + spec.text + "': unknown tier kind");
}

std::unique_ptr<Tier> make_tier(std::string_view spec) {
  return make_tier(parse_tier_spec(spec));
}

std::unique_ptr<TierChain> make_chain(const std::vector<std::string>& specs) {
  std::vector<std::unique_ptr<Tier>> tiers;
  for (const auto& s : specs) tiers.push_back(make_tier(s));
  return std::make_unique<TierChain>(std::move(tiers));
}

}  // namespace ferry::xfer::store
