#include "xfer/store/redis/redis_tier.h"

#include <cstring>

#include "core/log.h"
#include "ferry/core/status.h"
#include "ferry/xfer/checksum.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/redis/redis_info.h"
#include "xfer/store/redis/redis_value.h"
#include "xfer/store/redis/resp_io.h"

namespace ferry::xfer::store {
namespace {

// Runs n items through one connection in pipeline windows. queue(i, window)
// adds item i's command and returns true, or settles the item without one and
// returns false; settle(i, reader, fd) reads item i's reply and returns why the
// connection failed, if it did. When the connection fails (or cannot be made),
// the cause is raised into `fault` once, and every item not yet answered gets
// fail(i), and so does the rest of the call: the next call connects again.
template <class Queue, class Settle, class Fail>
void pipeline(RedisPool::Lease& lease, const std::string& address, std::size_t n, Fault& fault, Queue queue,
              Settle settle, Fail fail) noexcept {
  RedisConn* c = lease.connect(fault);  // raises why not
  Window w;
  std::size_t i = 0;
  const auto lost = [&](const RespError& why) {
    (void)fault.raise(XferStatus::Unavailable, "redis " + address + " unavailable: " + describe(why) +
                                                   "; the tier reconnects on its next call");
    lease.drop();
    c = nullptr;
  };
  while (i < n) {
    if (c == nullptr) {
      for (; i < n; ++i) fail(i);
      return;
    }
    w.clear();
    while (i < n && w.sent.size() < kWindowItems && w.bytes < kWindowBytes) {
      if (queue(i, w)) w.sent.push_back(i);
      ++i;
    }
    if (w.sent.empty()) continue;
    if (auto why = resp_write_all(c->socket(), w.iov); why.failed()) {
      lost(why);
      for (const std::size_t k : w.sent) fail(k);
      continue;
    }
    for (std::size_t k = 0; k < w.sent.size(); ++k) {
      if (auto why = settle(w.sent[k], c->reader(), c->socket()); why.failed()) {
        lost(why);
        for (; k < w.sent.size(); ++k) fail(w.sent[k]);
        break;
      }
    }
  }
  // Every reply was read: anything more would put the next call out of step.
  // Every item has its answer, so nothing failed: the next call just connects again.
  if (c != nullptr && c->reader().buffered() != 0) lease.drop();
}

}  // namespace

RedisTier::RedisTier(RedisTierOptions options) : opts_(std::move(options)) {
  spec_ = opts_.spec;
  if (spec_.empty()) {
    spec_ = "redis://" + opts_.endpoint.host + ":" + std::to_string(opts_.endpoint.port);
    if (opts_.endpoint.db != 0) spec_ += "/" + std::to_string(opts_.endpoint.db);
    if (opts_.prefix != "ferry:") spec_ += "?prefix=" + opts_.prefix;
  }
  if (opts_.auth.any() || opts_.tls.enabled)
    opts_.endpoint.security = std::make_shared<RedisSecurity>(opts_.auth, opts_.tls);
  check_redis_access(opts_.endpoint);
  pool_ = std::make_unique<RedisPool>(opts_.endpoint, opts_.connections);
}

RedisTier::~RedisTier() = default;

std::string RedisTier::full_key(std::string_view key) const {
  return opts_.prefix + std::string(key);
}

std::uint64_t RedisTier::used() const {
  return recent_.used();
}

std::uint64_t RedisTier::capacity_now() const {
  Fault fault;  // an outage is logged by its raise; the answer is then "nobody can say"
  auto lease = pool_->lease();
  RedisConn* c = lease.connect(fault);
  if (c == nullptr) return kUnbounded;
  RespValue r;
  if (auto e = c->command({"INFO", "memory"}, &r); e.failed()) {
    (void)fault.raise(XferStatus::Unavailable, "redis " + pool_->address() +
                                                   ": INFO memory: " + store::describe(e) +
                                                   "; the tier reconnects on its next call");
    lease.drop();
    return kUnbounded;
  }
  const std::optional<RedisMemory> m =
      r.kind == RespReader::Kind::Bulk ? parse_info_memory(r.str) : std::nullopt;
  if (!m) {
    (void)fault.raise(XferStatus::IoError, "redis " + pool_->address() +
                                               ": INFO memory has no used_memory and maxmemory figures; "
                                               "the tier's capacity is reported as unknown");
    return kUnbounded;
  }
  if (m->max == 0) return kUnbounded;
  return used() + (m->max > m->used ? m->max - m->used : 0);
}

void RedisTier::put(std::span<PutItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  auto lease = pool_->lease();
  std::vector<ValueHeader> headers(items.size());
  pipeline(
      lease, pool_->address(), items.size(), fault,
      [&](std::size_t i, Window& w) {
        PutItem& item = items[i];
        if (item.key.empty()) {
          item.status = fault.raise(XferStatus::InvalidDesc, "redis tier: empty key");
          return false;
        }
        w.add_set(opts_.prefix, item, &headers[i]);
        return true;
      },
      [&](std::size_t i, RespReader& reader, RespSocket fd) -> RespError {
        PutItem& item = items[i];
        RespReader::Head h;
        if (auto why = reader.read_head(fd, &h); why.failed()) return why;
        if (h.kind == RespReader::Kind::Status) {
          item.status = XferStatus::Ok;
          recent_.touch(item.key, item.data.size);
          return {};
        }
        if (h.kind != RespReader::Kind::Error) return RespError{"unexpected reply to SET"};
        item.status = error_reply_status(h.text);
        if (item.status == XferStatus::NoSpace) {
          // OOM (maxmemory reached): an answer, not a fault; the chain sends the
          // object (or victims) further down.
          log::app().debug("{}", error_reply_message(pool_->address(), "SET", item.key, h.text));
          return {};
        }
        (void)fault.raise(item.status, error_reply_message(pool_->address(), "SET", item.key, h.text),
                          item.key);
        return {};
      },
      [&](std::size_t i) { items[i].status = XferStatus::Unavailable; });
}

void RedisTier::get(std::span<GetItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  auto lease = pool_->lease();
  pipeline(
      lease, pool_->address(), items.size(), fault,
      [&](std::size_t i, Window& w) {
        GetItem& item = items[i];
        if (item.key.empty()) {
          item.status = fault.raise(XferStatus::InvalidDesc, "redis tier: empty key");
          return false;
        }
        w.add_command({"GET", full_key(item.key)});
        w.bytes += item.out.size;
        return true;
      },
      [&](std::size_t i, RespReader& reader, RespSocket fd) -> RespError {
        GetItem& item = items[i];
        std::string error_reply;
        if (auto why = read_get_reply(reader, fd, item, pool_->address(), opts_.prefix, fault, &error_reply);
            why.failed())
          return why;
        if (!error_reply.empty())
          item.status =
              fault.raise(error_reply_status(error_reply),
                          error_reply_message(pool_->address(), "GET", item.key, error_reply), item.key);
        else if (item.status == XferStatus::Ok)
          recent_.touch(item.key, item.size);
        else if (item.status == XferStatus::NotFound)
          recent_.forget(item.key);
        return {};
      },
      [&](std::size_t i) { items[i].status = XferStatus::Unavailable; });
}

std::optional<ObjectMeta> RedisTier::stat(std::string_view key) noexcept {
  if (key.empty()) return std::nullopt;
  // stat has no status to report an outage with: it answers "not here", and the
  // fault of its own logs the warning.
  Fault fault;
  auto lease = pool_->lease();
  RedisConn* c = lease.connect(fault);
  if (c == nullptr) return std::nullopt;
  RespValue r;
  if (auto e = c->command({"GETRANGE", full_key(key), "0", kHeaderLast}, &r); e.failed()) {
    (void)fault.raise(XferStatus::Unavailable, "redis " + pool_->address() + ": stat " + quote_key(key) +
                                                   ": " + store::describe(e) +
                                                   "; the tier reconnects on its next call");
    lease.drop();
    return std::nullopt;
  }
  return header_meta(r);
}

XferStatus RedisTier::headers(std::span<const std::string_view> keys,
                              std::span<std::optional<ObjectMeta>> out, Fault& fault) noexcept {
  XferStatus status = XferStatus::Ok;
  auto lease = pool_->lease();
  pipeline(
      lease, pool_->address(), keys.size(), fault,
      [&](std::size_t i, Window& w) {
        out[i].reset();
        if (keys[i].empty()) return false;
        w.add_command({"GETRANGE", full_key(keys[i]), "0", kHeaderLast});
        return true;
      },
      [&](std::size_t i, RespReader& reader, RespSocket fd) -> RespError {
        RespValue r;
        if (auto why = read_reply(reader, fd, &r); why.failed()) return why;
        if (r.is_error()) {
          if (status == XferStatus::Ok)
            status =
                fault.raise(error_reply_status(r.str) == XferStatus::Unavailable ? XferStatus::Unavailable
                                                                                 : XferStatus::IoError,
                            error_reply_message(pool_->address(), "GETRANGE", keys[i], r.str), keys[i]);
          return {};
        }
        out[i] = header_meta(r);
        return {};
      },
      [&](std::size_t) { status = XferStatus::Unavailable; });  // pipeline() raised why
  return status;
}

XferStatus RedisTier::remove(std::string_view key, Fault& fault) noexcept {
  if (key.empty()) return XferStatus::NotFound;
  auto lease = pool_->lease();
  RedisConn* c = lease.connect(fault);
  if (c == nullptr) return XferStatus::Unavailable;
  // UNLINK frees a large value in the background instead of blocking Redis.
  RespValue r;
  if (auto e = c->command({"UNLINK", full_key(key)}, &r); e.failed()) {
    std::string why = "redis " + pool_->address() + " unavailable: " + store::describe(e) +
                      "; the tier reconnects on its next call";
    lease.drop();
    return fault.raise(XferStatus::Unavailable, std::move(why), key);
  }
  if (r.is_error()) {
    const XferStatus s =
        error_reply_status(r.str) == XferStatus::Unavailable ? XferStatus::Unavailable : XferStatus::IoError;
    return fault.raise(s, error_reply_message(pool_->address(), "UNLINK", key, r.str), key);
  }
  recent_.forget(key);
  if (r.kind == RespReader::Kind::Integer && r.n > 0) return XferStatus::Ok;
  return XferStatus::NotFound;
}

XferStatus RedisTier::list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept {
  out->clear();
  auto lease = pool_->lease();
  RedisConn* c = lease.connect(fault);
  if (c == nullptr) return XferStatus::Unavailable;
  bool lost = false;
  const XferStatus s = scan_headers(*c, pool_->address(), opts_.prefix, out, fault, &lost);
  if (lost) lease.drop();
  if (s != XferStatus::Ok) out->clear();
  return s;
}

std::vector<std::string> RedisTier::lru_victims(std::uint64_t bytes) noexcept {
  // While Redis is down there are no listed keys to name (the fault of its own logs why).
  std::vector<std::pair<std::string, ObjectMeta>> listed;
  Fault fault;
  (void)list(&listed, fault);
  return recent_.victims(std::move(listed), bytes);
}

}  // namespace ferry::xfer::store
