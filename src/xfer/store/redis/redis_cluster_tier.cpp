#include "xfer/store/redis/redis_cluster_tier.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <thread>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/redis/redis_info.h"
#include "xfer/store/redis/redis_value.h"

namespace ferry::xfer::store {
namespace {

constexpr int kFirstBackoffMs = 10;
constexpr int kMaxBackoffMs = 200;

bool unknown_command(const RespValue& r) {
  return r.is_error() && (r.str.find("nknown subcommand") != std::string::npos ||
                          r.str.find("nknown command") != std::string::npos);
}

}  // namespace

// One call's items through the cluster. run() routes, writes and reads; the
// Op knows the command: queue(i, w) adds item i's command, settle(i, ...) reads
// its reply (an error reply's text to *error_reply, for run() to judge),
// refused(i, text, address) settles an item whose error reply is final, and
// give_up(i) one that ran out of rounds.
struct RedisClusterTier::Op {
  const char* name;  // "SET", "GET"
  bool is_put = false;
  std::function<std::string_view(std::size_t)> key;
  std::function<void(std::size_t, Window&)> queue;
  std::function<RespError(std::size_t, RespReader&, RespSocket, const std::string&, std::string*)> settle;
  std::function<void(std::size_t, const std::string&, const std::string&)> refused;
  std::function<void(std::size_t, XferStatus)> give_up;
};

RedisClusterTier::RedisClusterTier(RedisClusterTierOptions options) : opts_(std::move(options)) {
  if (opts_.seeds.empty()) throw Error("redis-cluster tier: no seed node");
  if (opts_.connections == 0)
    throw Error("redis-cluster tier: the connection pool needs at least one connection");
  spec_ = opts_.spec;
  if (spec_.empty()) {
    spec_ = "redis-cluster://";
    for (std::size_t i = 0; i < opts_.seeds.size(); ++i) spec_ += (i ? "," : "") + opts_.seeds[i].text();
    if (opts_.prefix != "ferry:") spec_ += "?prefix=" + opts_.prefix;
  }
  if (opts_.auth.any() || opts_.tls.enabled)
    security_ = std::make_shared<RedisSecurity>(opts_.auth, opts_.tls);
  owner_.fill(kNoNode);
  {
    std::unique_lock lock(map_mu_);
    for (const ClusterAddress& a : opts_.seeds) (void)node_locked(a);
  }
  // A refused password or certificate is an error now; an unreachable seed is
  // logged, and the next one is tried.
  for (const ClusterAddress& a : opts_.seeds) {
    RedisEndpoint ep{a.host, a.port, 0, opts_.timeout_ms, security_};
    check_redis_access(ep);
  }
  std::string why;
  if (!refresh(0, &why))
    log::app().warn("redis-cluster tier {}: no slot map yet ({}); the first call asks again", spec_, why);
}

RedisClusterTier::~RedisClusterTier() = default;

std::uint16_t RedisClusterTier::node_locked(const ClusterAddress& a) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i]->address == a) return static_cast<std::uint16_t>(i);
  if (nodes_.size() >= kNoNode) throw Error("redis-cluster tier: too many nodes");
  auto n = std::make_unique<Node>();
  n->address = a;
  n->pool = std::make_unique<RedisPool>(RedisEndpoint{a.host, a.port, 0, opts_.timeout_ms, security_},
                                        opts_.connections);
  nodes_.push_back(std::move(n));
  return static_cast<std::uint16_t>(nodes_.size() - 1);
}

RedisClusterTier::Node* RedisClusterTier::node(std::uint16_t index) const {
  std::shared_lock lock(map_mu_);
  return nodes_[index].get();
}

std::vector<std::uint16_t> RedisClusterTier::primaries() const {
  std::shared_lock lock(map_mu_);
  std::vector<std::uint16_t> out;
  for (const std::uint16_t o : owner_)
    if (o != kNoNode && std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
  std::sort(out.begin(), out.end());
  return out;
}

bool RedisClusterTier::refresh(std::uint64_t seen, std::string* why) const noexcept {
  try {
    std::lock_guard one(refresh_mu_);
    if (epoch_.load() != seen) return true;        // another call read it since
    std::vector<std::uint16_t> ask = primaries();  // those that served last: most likely up to date
    {
      std::shared_lock lock(map_mu_);
      for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (std::find(ask.begin(), ask.end(), i) == ask.end()) ask.push_back(static_cast<std::uint16_t>(i));
    }
    std::string causes;
    for (const std::uint16_t index : ask) {
      Node* n = node(index);
      auto lease = n->pool->lease();
      RedisConnectError error;
      RedisConn* c = lease.connect(&error);
      if (c == nullptr) {
        causes += (causes.empty() ? "" : "; ") + error.why;
        continue;
      }
      RespValue r;
      std::optional<std::vector<SlotRange>> ranges;
      std::string bad;
      RespError e = c->command({"CLUSTER", "SHARDS"}, &r);
      if (!e.failed() && unknown_command(r)) {
        e = c->command({"CLUSTER", "SLOTS"}, &r);  // a server before 7.0
        if (!e.failed() && !r.is_error()) ranges = parse_cluster_slots(r, n->address.host, &bad);
      } else if (!e.failed() && !r.is_error()) {
        ranges = parse_cluster_shards(r, n->address.host, opts_.tls.enabled, &bad);
      }
      if (e.failed()) {
        lease.drop();
        bad = store::describe(e);
      } else if (r.is_error()) {
        bad = r.str;
      }
      if (!ranges || ranges->empty()) {
        causes += (causes.empty() ? "" : "; ") + n->address.text() + ": " + (bad.empty() ? "no slots" : bad);
        continue;
      }
      std::unique_lock lock(map_mu_);
      owner_.fill(kNoNode);
      for (const SlotRange& range : *ranges) {
        const std::uint16_t o = node_locked(range.primary);
        std::fill(owner_.begin() + range.first, owner_.begin() + range.last + 1, o);
      }
      epoch_.fetch_add(1);
      refreshes_.fetch_add(1);
      return true;
    }
    *why = "no node gave the slot map: " + causes;
    return false;
  } catch (const std::exception& e) {
    *why = std::string("reading the slot map: ") + e.what();
    return false;
  }
}

void RedisClusterTier::run(Op& op, std::size_t n, Fault& fault) noexcept {
  try {
    std::vector<unsigned> slot(n);
    // After a redirect, the node the item goes to next (once), whatever the map
    // says: a map read from a node that has not heard of the move yet cannot
    // send it back. After ASK, preceded by ASKING.
    std::vector<std::uint16_t> redirected(n, kNoNode);
    std::vector<bool> ask(n, false);
    std::vector<std::size_t> pending;
    for (std::size_t i = 0; i < n; ++i) {
      if (op.key(i).empty()) continue;  // settled by the caller
      slot[i] = key_hash_slot(full_key(op.key(i)));
      pending.push_back(i);
    }
    std::string last_cause;
    bool stale = false, wait = false;
    // retry_ms bounds the time from the first failure on, connect timeouts included.
    using Clock = std::chrono::steady_clock;
    std::optional<Clock::time_point> first_failure;
    const auto retried_ms = [&] {
      return first_failure
                 ? std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *first_failure)
                       .count()
                 : 0;
    };
    // A failure: the map is read again, and the next round waits.
    const auto note_failure = [&] {
      stale = wait = true;
      if (!first_failure) first_failure = Clock::now();
    };
    int backoff_ms = kFirstBackoffMs;
    unsigned round = 0;
    for (; !pending.empty() && round < opts_.attempts; ++round) {
      if (wait) {
        if (retried_ms() >= opts_.retry_ms) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
        backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
        wait = false;
      }
      const std::uint64_t seen = epoch_.load();
      if (seen == 0 || stale) {
        std::string why;
        if (!refresh(seen, &why)) {
          last_cause = why;
          note_failure();
          continue;
        }
        stale = false;
      }
      // Route: the items per node, in the order of the nodes' indices.
      struct Group {
        std::uint16_t node = kNoNode;
        std::vector<std::size_t> items;
        std::size_t at = 0;  // items[0..at) were sent
        std::unique_ptr<RedisPool::Lease> lease;
        RedisConn* conn = nullptr;
        Window window;
        std::vector<bool> asking;  // per window.sent: preceded by ASKING
        bool wrote = false;
      };
      std::vector<Group> groups;
      std::vector<std::size_t> next;
      {
        std::shared_lock lock(map_mu_);
        for (const std::size_t i : pending) {
          const std::uint16_t to = redirected[i] != kNoNode ? redirected[i] : owner_[slot[i]];
          if (to == kNoNode) {
            last_cause = "slot " + std::to_string(slot[i]) + " has no primary in the slot map";
            note_failure();
            next.push_back(i);
            continue;
          }
          auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.node == to; });
          if (g == groups.end()) {
            groups.emplace_back();
            g = groups.end() - 1;
            g->node = to;
          }
          g->items.push_back(i);
        }
      }
      std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.node < b.node; });
      // A group whose connection failed: its unanswered items go to the next round.
      const auto lost = [&](Group& g, std::size_t from_sent, const std::string& why) {
        for (std::size_t k = from_sent; k < g.window.sent.size(); ++k) next.push_back(g.window.sent[k]);
        for (; g.at < g.items.size(); ++g.at) next.push_back(g.items[g.at]);
        g.window.sent.clear();
        if (g.lease) g.lease->drop();
        g.conn = nullptr;
        last_cause = why;
        note_failure();
      };
      for (Group& g : groups) {
        Node* nd = node(g.node);
        g.lease.reset(new RedisPool::Lease(nd->pool->lease()));
        RedisConnectError error;
        g.conn = g.lease->connect(&error);
        if (g.conn == nullptr) lost(g, 0, error.why);
      }
      const std::string wait_n = std::to_string(opts_.wait_replicas);
      const std::string wait_ms = std::to_string(std::max(1, opts_.timeout_ms / 2));
      for (bool more = true; more;) {
        more = false;
        // Write every node's window ...
        for (Group& g : groups) {
          g.wrote = false;
          if (g.conn == nullptr || g.at == g.items.size()) continue;
          g.window.clear();
          g.asking.clear();
          while (g.at < g.items.size() && g.window.sent.size() < kWindowItems &&
                 g.window.bytes < kWindowBytes) {
            const std::size_t i = g.items[g.at++];
            g.asking.push_back(ask[i]);
            if (ask[i]) g.window.add_command({"ASKING"});
            redirected[i] = kNoNode;  // once
            ask[i] = false;
            op.queue(i, g.window);
            g.window.sent.push_back(i);
          }
          if (op.is_put && opts_.wait_replicas > 0) g.window.add_command({"WAIT", wait_n, wait_ms});
          const std::string& address = node(g.node)->address.text();
          if (auto e = resp_write_all(g.conn->socket(), g.window.iov); e.failed()) {
            lost(g, 0, "redis " + address + ": " + store::describe(e));
            continue;
          }
          g.wrote = true;
          more = more || g.at < g.items.size();
        }
        // ... then read their replies.
        for (Group& g : groups) {
          if (!g.wrote) continue;
          const std::string address = node(g.node)->address.text();
          RespReader& reader = g.conn->reader();
          const RespSocket sock = g.conn->socket();
          std::vector<std::size_t> acked;
          bool failed = false;
          for (std::size_t k = 0; k < g.window.sent.size() && !failed; ++k) {
            const std::size_t i = g.window.sent[k];
            RespValue asking;
            if (g.asking[k]) {
              if (auto e = read_reply(reader, sock, &asking); e.failed()) {
                lost(g, k, "redis " + address + ": " + store::describe(e));
                failed = true;
                break;
              }
            }
            std::string error_reply;
            if (auto e = op.settle(i, reader, sock, address, &error_reply); e.failed()) {
              lost(g, k, "redis " + address + ": " + store::describe(e));
              failed = true;
              break;
            }
            if (error_reply.empty()) {
              acked.push_back(i);
              continue;
            }
            if (const auto redirect = parse_redirect(error_reply, node(g.node)->address.host)) {
              redirects_.fetch_add(1);
              std::unique_lock lock(map_mu_);
              redirected[i] = node_locked(redirect->to);
              ask[i] = redirect->ask;
              if (!redirect->ask) {
                owner_[redirect->slot] = redirected[i];
                stale = true;  // more slots may have moved with it
              }
              next.push_back(i);
              continue;
            }
            if (error_reply_status(error_reply) == XferStatus::Unavailable) {
              last_cause = error_reply_message(address, op.name, op.key(i), error_reply);
              note_failure();
              next.push_back(i);
              continue;
            }
            op.refused(i, error_reply, address);
          }
          if (failed) continue;
          if (op.is_put && opts_.wait_replicas > 0) {
            RespValue w;
            if (auto e = read_reply(reader, sock, &w); e.failed()) {
              // The SETs were answered, but not whether they reached the replicas.
              for (const std::size_t i : acked) op.give_up(i, XferStatus::Unavailable);
              last_cause = "redis " + address + ": WAIT: " + store::describe(e);
              (void)fault.raise(XferStatus::Unavailable, last_cause);
              g.window.sent.clear();
              lost(g, 0, last_cause);
              continue;
            }
            if (w.kind != RespReader::Kind::Integer || w.n < static_cast<std::int64_t>(opts_.wait_replicas)) {
              for (const std::size_t i : acked) op.give_up(i, XferStatus::Unavailable);
              (void)fault.raise(
                  XferStatus::Unavailable,
                  "redis " + address + ": " +
                      (w.kind == RespReader::Kind::Integer ? std::to_string(w.n) : std::string("no")) +
                      " of the " + wait_n + " replicas wanted confirmed the puts in time; they " +
                      "may be stored, but are not acknowledged");
            }
          }
        }
      }
      // Every reply was read: bytes left over would put the next call out of step.
      for (Group& g : groups)
        if (g.conn != nullptr && g.conn->reader().buffered() != 0) g.lease->drop();
      pending = std::move(next);
    }
    if (!pending.empty()) {
      (void)fault.raise(XferStatus::Unavailable,
                        "redis-cluster " + spec_ + ": " + std::to_string(pending.size()) + " " + op.name +
                            (pending.size() == 1 ? " was" : "s were") + " not answered after " +
                            std::to_string(round) + " rounds and " + std::to_string(retried_ms()) +
                            " ms of retries: " + last_cause);
      for (const std::size_t i : pending) op.give_up(i, XferStatus::Unavailable);
    }
  } catch (const std::exception& e) {
    (void)fault.raise(XferStatus::IoError, "redis-cluster " + spec_ + ": " + e.what());
    for (std::size_t i = 0; i < n; ++i) op.give_up(i, XferStatus::IoError);
  }
}

void RedisClusterTier::put(std::span<PutItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  std::vector<ValueHeader> headers(items.size());
  for (PutItem& item : items)
    if (item.key.empty()) item.status = fault.raise(XferStatus::InvalidDesc, "redis-cluster tier: empty key");
  Op op;
  op.name = "SET";
  op.is_put = true;
  op.key = [&](std::size_t i) { return items[i].key; };
  op.queue = [&](std::size_t i, Window& w) { w.add_set(opts_.prefix, items[i], &headers[i]); };
  op.settle = [&](std::size_t i, RespReader& reader, RespSocket s, const std::string&,
                  std::string* error_reply) -> RespError {
    RespReader::Head h;
    if (auto e = reader.read_head(s, &h); e.failed()) return e;
    if (h.kind == RespReader::Kind::Status) {
      items[i].status = XferStatus::Ok;
      recent_.touch(items[i].key, items[i].data.size);
      return {};
    }
    if (h.kind != RespReader::Kind::Error) return RespError{"unexpected reply to SET"};
    *error_reply = std::move(h.text);
    return {};
  };
  op.refused = [&](std::size_t i, const std::string& text, const std::string& address) {
    PutItem& item = items[i];
    item.status = error_reply_status(text);
    if (item.status == XferStatus::NoSpace) {
      // OOM (maxmemory reached): an answer, not a fault (the chain moves on).
      log::app().debug("{}", error_reply_message(address, "SET", item.key, text));
      return;
    }
    (void)fault.raise(item.status, error_reply_message(address, "SET", item.key, text), item.key);
  };
  op.give_up = [&](std::size_t i, XferStatus s) {
    if (!items[i].key.empty()) items[i].status = s;
  };
  run(op, items.size(), fault);
}

void RedisClusterTier::get(std::span<GetItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  for (GetItem& item : items)
    if (item.key.empty()) item.status = fault.raise(XferStatus::InvalidDesc, "redis-cluster tier: empty key");
  Op op;
  op.name = "GET";
  op.key = [&](std::size_t i) { return items[i].key; };
  op.queue = [&](std::size_t i, Window& w) {
    w.add_command({"GET", full_key(items[i].key)});
    w.bytes += items[i].out.size;
  };
  op.settle = [&](std::size_t i, RespReader& reader, RespSocket s, const std::string& address,
                  std::string* error_reply) -> RespError {
    GetItem& item = items[i];
    if (auto e = read_get_reply(reader, s, item, address, opts_.prefix, fault, error_reply); e.failed())
      return e;
    if (!error_reply->empty()) return {};
    if (item.status == XferStatus::Ok) recent_.touch(item.key, item.size);
    if (item.status == XferStatus::NotFound) recent_.forget(item.key);
    return {};
  };
  op.refused = [&](std::size_t i, const std::string& text, const std::string& address) {
    items[i].status = fault.raise(error_reply_status(text),
                                  error_reply_message(address, "GET", items[i].key, text), items[i].key);
  };
  op.give_up = [&](std::size_t i, XferStatus s) {
    if (!items[i].key.empty()) items[i].status = s;
  };
  run(op, items.size(), fault);
}

XferStatus RedisClusterTier::one_key(const char* name, std::string_view key,
                                     const std::vector<std::string>& args, RespValue* reply,
                                     Fault& fault) noexcept {
  XferStatus status = XferStatus::InProgress;
  Op op;
  op.name = name;
  op.key = [&](std::size_t) { return key; };
  op.queue = [&](std::size_t, Window& w) {
    std::string& t = w.add_text();
    t = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args) {
      append_bulk_head(t, a.size());
      t += a;
      t += "\r\n";
    }
    w.add(t.data(), t.size());
  };
  op.settle = [&](std::size_t, RespReader& reader, RespSocket s, const std::string&,
                  std::string* error_reply) -> RespError {
    if (auto e = read_reply(reader, s, reply); e.failed()) return e;
    if (reply->is_error())
      *error_reply = std::move(reply->str);
    else
      status = XferStatus::Ok;
    return {};
  };
  op.refused = [&](std::size_t, const std::string& text, const std::string& address) {
    const XferStatus s =
        error_reply_status(text) == XferStatus::Unavailable ? XferStatus::Unavailable : XferStatus::IoError;
    status = fault.raise(s, error_reply_message(address, name, key, text), key);
  };
  op.give_up = [&](std::size_t, XferStatus s) { status = s; };
  run(op, 1, fault);
  return status;
}

std::optional<ObjectMeta> RedisClusterTier::stat(std::string_view key) noexcept {
  // stat has no status to report an outage with: it answers "not here", and the
  // fault of its own logs the warning.
  if (key.empty()) return std::nullopt;
  Fault fault;
  RespValue r;
  if (one_key("GETRANGE", key, {"GETRANGE", full_key(key), "0", kHeaderLast}, &r, fault) != XferStatus::Ok)
    return std::nullopt;
  return header_meta(r);
}

XferStatus RedisClusterTier::headers(std::span<const std::string_view> keys,
                                     std::span<std::optional<ObjectMeta>> out, Fault& fault) noexcept {
  XferStatus status = XferStatus::Ok;
  if (keys.empty()) return status;
  const auto failed = [&](XferStatus s) {
    if (status == XferStatus::Ok) status = s;
  };
  Op op;
  op.name = "GETRANGE";
  op.key = [&](std::size_t i) { return keys[i]; };
  op.queue = [&](std::size_t i, Window& w) {
    w.add_command({"GETRANGE", full_key(keys[i]), "0", kHeaderLast});
  };
  op.settle = [&](std::size_t i, RespReader& reader, RespSocket s, const std::string&,
                  std::string* error_reply) -> RespError {
    RespValue r;
    if (auto e = read_reply(reader, s, &r); e.failed()) return e;
    if (r.is_error())
      *error_reply = std::move(r.str);
    else
      out[i] = header_meta(r);
    return {};
  };
  op.refused = [&](std::size_t i, const std::string& text, const std::string& address) {
    failed(fault.raise(
        error_reply_status(text) == XferStatus::Unavailable ? XferStatus::Unavailable : XferStatus::IoError,
        error_reply_message(address, "GETRANGE", keys[i], text), keys[i]));
  };
  op.give_up = [&](std::size_t i, XferStatus s) {  // run() raised why
    if (!keys[i].empty()) failed(s);
  };
  for (auto& o : out) o.reset();
  run(op, keys.size(), fault);
  return status;
}

XferStatus RedisClusterTier::remove(std::string_view key, Fault& fault) noexcept {
  if (key.empty()) return XferStatus::NotFound;
  RespValue r;
  // UNLINK frees a large value in the background instead of blocking Redis.
  const XferStatus s = one_key("UNLINK", key, {"UNLINK", full_key(key)}, &r, fault);
  if (s != XferStatus::Ok) return s;
  recent_.forget(key);
  return r.kind == RespReader::Kind::Integer && r.n > 0 ? XferStatus::Ok : XferStatus::NotFound;
}

XferStatus RedisClusterTier::list(std::vector<std::pair<std::string, ObjectMeta>>* out,
                                  Fault& fault) noexcept {
  out->clear();
  std::string why;
  if (epoch_.load() == 0 && !refresh(0, &why))
    return fault.raise(XferStatus::Unavailable, "redis-cluster " + spec_ + ": " + why);
  try {
    std::set<std::string> seen;  // a key being migrated may be on two nodes for a moment
    for (const std::uint16_t index : primaries()) {
      Node* n = node(index);
      auto lease = n->pool->lease();
      RedisConn* c = lease.connect(fault);
      if (c == nullptr) {
        out->clear();
        return XferStatus::Unavailable;
      }
      std::vector<std::pair<std::string, ObjectMeta>> part;
      bool lost = false;
      const XferStatus s = scan_headers(*c, n->address.text(), opts_.prefix, &part, fault, &lost);
      if (lost) lease.drop();
      if (s != XferStatus::Ok) {
        out->clear();
        return s;
      }
      for (auto& kv : part)
        if (seen.insert(kv.first).second) out->push_back(std::move(kv));
    }
  } catch (const std::exception& e) {
    out->clear();
    return fault.raise(XferStatus::IoError, "redis-cluster " + spec_ + ": listing: " + e.what());
  }
  return XferStatus::Ok;
}

std::vector<std::string> RedisClusterTier::lru_victims(std::uint64_t bytes) noexcept {
  std::vector<std::pair<std::string, ObjectMeta>> listed;
  Fault fault;  // while the cluster cannot be listed, only the keys this process touched
  (void)list(&listed, fault);
  return recent_.victims(std::move(listed), bytes);
}

std::uint64_t RedisClusterTier::capacity_now() const {
  std::string why;
  if (epoch_.load() == 0 && !refresh(0, &why)) return kUnbounded;
  std::uint64_t room = 0;
  for (const std::uint16_t index : primaries()) {
    Node* n = node(index);
    Fault fault;  // an outage is logged by its raise; the answer is then "nobody can say"
    auto lease = n->pool->lease();
    RedisConn* c = lease.connect(fault);
    if (c == nullptr) return kUnbounded;
    RespValue r;
    if (auto e = c->command({"INFO", "memory"}, &r); e.failed()) {
      lease.drop();
      return kUnbounded;
    }
    const std::optional<RedisMemory> m =
        r.kind == RespReader::Kind::Bulk ? parse_info_memory(r.str) : std::nullopt;
    if (!m || m->max == 0) return kUnbounded;
    room += m->max > m->used ? m->max - m->used : 0;
  }
  return used() + room;
}

}  // namespace ferry::xfer::store
