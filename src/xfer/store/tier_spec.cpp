#include "xfer/store/tier_spec.h"

#include <charconv>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/sizes.h"

namespace ferry::xfer::store {
namespace {

constexpr const char* kForms =
    "accepted forms: dram:<size>, file:<dir>[,direct][,fsync][,capacity=<size>][,qd=<n>][,pack=<size>][,threads=<n>][,cores=<n>], "
    "redis://<host>:<port>[/<db>][?prefix=<p>&connections=<n>&timeout_ms=<ms>]";

[[noreturn]] void bad(std::string_view spec, const std::string& why) {
  throw Error("--tier '" + std::string(spec) + "': " + why + " (" + kForms + ")");
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
      t.file.capacity = parse_size(value, "--tier '" + std::string(spec) + "' capacity");
      if (t.file.capacity == 0) bad(spec, "capacity must be more than 0 bytes");
    } else if (name == "qd" && eq != std::string_view::npos) {
      t.file.queue_depth = static_cast<unsigned>(parse_int(spec, value, "qd", 1, 4096));
    } else if (name == "threads" && eq != std::string_view::npos) {
      t.file.threads = static_cast<unsigned>(parse_int(spec, value, "threads", 1, 64));
    } else if (name == "cores" && eq != std::string_view::npos) {
      t.file.cores = static_cast<unsigned>(parse_int(spec, value, "cores", 1, 4096));
    } else if (name == "pack" && eq != std::string_view::npos) {
      t.file.pack_threshold = parse_size(value, "--tier '" + std::string(spec) + "' pack");
      if (t.file.pack_threshold > t.file.pack_max)
        bad(spec, "pack=" + std::string(value) + " is larger than a pack file (" + format_size(t.file.pack_max) +
                      "); objects larger than pack= get a file each");
    } else {
      bad(spec, "unknown file tier option '" + std::string(p) +
                    "' (options: direct, fsync, capacity=<size>, qd=<n>, pack=<size>, threads=<n>, cores=<n>)");
    }
  }
  return t;
}

TierSpec parse_redis(std::string_view spec, std::string_view rest) {
  TierSpec t;
  t.kind = TierSpec::Kind::Redis;
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view authority = rest;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) t.redis.endpoint.db = static_cast<int>(parse_int(spec, db, "database", 0, 1 << 20));
  }
  if (authority.find('@') != std::string_view::npos) bad(spec, "passwords in redis URLs are not supported");
  std::string_view host = authority, port;
  if (starts_with(authority, "[")) {  // [::1]:6379
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad(spec, "unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad(spec, "expected ':<port>' after the host");
      port = after.substr(1);
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (!host.empty()) t.redis.endpoint.host = std::string(host);
  if (!port.empty()) t.redis.endpoint.port = static_cast<int>(parse_int(spec, port, "port", 1, 65535));
  if (!query.empty()) {
    for (const std::string_view kv : split(query, '&')) {
      const std::size_t eq = kv.find('=');
      if (eq == std::string_view::npos) bad(spec, "query parameter '" + std::string(kv) + "' has no '='");
      const std::string_view name = kv.substr(0, eq), value = kv.substr(eq + 1);
      if (name == "prefix") {
        t.redis.prefix = std::string(value);
      } else if (name == "connections") {
        t.redis.connections = static_cast<unsigned>(parse_int(spec, value, "connections", 1, 256));
      } else if (name == "timeout_ms") {
        t.redis.endpoint.timeout_ms = static_cast<int>(parse_int(spec, value, "timeout_ms", 1, 600000));
      } else {
        bad(spec, "unknown redis parameter '" + std::string(name) +
                      "' (parameters: prefix, connections, timeout_ms)");
      }
    }
  }
  return t;
}

}  // namespace

TierSpec parse_tier_spec(std::string_view spec) {
  TierSpec t;
  if (starts_with(spec, "dram:")) {
    t.kind = TierSpec::Kind::Dram;
    const std::string_view size = spec.substr(5);
    if (size.empty()) bad(spec, "no capacity after 'dram:'");
    t.dram_capacity = parse_size(size, "--tier '" + std::string(spec) + "' capacity");
    if (t.dram_capacity == 0) bad(spec, "capacity must be more than 0 bytes");
  } else if (starts_with(spec, "file:")) {
    t = parse_file(spec, spec.substr(5));
  } else if (starts_with(spec, "redis://")) {
    t = parse_redis(spec, spec.substr(8));
  } else {
    const std::size_t colon = spec.find(':');
    bad(spec, colon == std::string_view::npos
                  ? "no tier kind"
                  : "unknown tier kind '" + std::string(spec.substr(0, colon)) + "'");
  }
  t.text = std::string(spec);
  t.file.spec = t.text;
  t.redis.spec = t.text;
  return t;
}

std::unique_ptr<Tier> make_tier(const TierSpec& spec) {
  switch (spec.kind) {
    case TierSpec::Kind::Dram: return std::make_unique<DramTier>(spec.dram_capacity, spec.text);
    case TierSpec::Kind::File: return std::make_unique<FileTier>(spec.file);
    case TierSpec::Kind::Redis: return std::make_unique<RedisTier>(spec.redis);
  }
  throw Error("--tier '" + spec.text + "': unknown tier kind");
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
