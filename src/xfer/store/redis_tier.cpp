#include "xfer/store/redis_tier.h"

#include <hiredis/hiredis.h>

#include <cstring>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/checksum.h"
#include "xfer/store/quote_key.h"

namespace ferry::xfer::store {
namespace {

constexpr std::uint64_t kValueMagic = 0x3156525952524546ull;  // "FERRYRV1"
constexpr std::size_t kValueHeader = 32;
// A pipeline window: commands written before their replies are read. Bounded in
// bytes too, so that a batch of large objects does not sit in hiredis's output
// buffer all at once.
constexpr std::size_t kWindowItems = 128;
constexpr std::uint64_t kWindowBytes = 64ull << 20;

struct ValueHeader {
  std::uint64_t magic;
  std::uint64_t size;
  std::uint64_t checksum;
  std::uint64_t reserved;
};
static_assert(sizeof(ValueHeader) == kValueHeader);

// Parses a value's header; returns "" or why it is not one of ours.
std::string parse_header(const char* s, std::size_t len, ValueHeader* h) {
  if (len < kValueHeader) return "value of " + std::to_string(len) + " bytes is shorter than a header";
  std::memcpy(h, s, kValueHeader);
  if (h->magic != kValueMagic) return "not a ferry value (bad magic)";
  return {};
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Reads the next pipelined reply; nullptr when the connection failed.
Reply next_reply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK) return nullptr;
  return Reply(static_cast<redisReply*>(r));
}

// Escapes glob characters, so the prefix matches itself in SCAN MATCH.
std::string glob_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// Runs n items through one connection in pipeline windows. queue(i) appends item
// i's command and returns its payload bytes, or nullopt when it settled the item
// without a command; settle(i, reply) handles the reply. When the connection
// fails, every item not yet answered gets fail(i, message).
template <class Queue, class Settle, class Fail>
void pipeline(RedisPool::Lease& lease, const std::string& address, std::size_t n, Queue queue, Settle settle,
              Fail fail) {
  std::string error;
  redisContext* c = lease.connect(&error);
  std::size_t i = 0;
  std::vector<std::size_t> sent;
  while (i < n) {
    if (c == nullptr) {
      // Down: the rest of this call fails fast; the next call tries to connect.
      for (; i < n; ++i) fail(i, error);
      return;
    }
    sent.clear();
    std::uint64_t bytes = 0;
    while (i < n && sent.size() < kWindowItems && bytes < kWindowBytes) {
      if (const auto b = queue(c, i)) {
        sent.push_back(i);
        bytes += *b;
      }
      ++i;
    }
    for (std::size_t k = 0; k < sent.size(); ++k) {
      Reply r = next_reply(c);
      if (!r) {
        error = "redis " + address + " unavailable: " + (c->errstr[0] ? c->errstr : "connection lost") +
                "; the tier reconnects on its next call";
        for (; k < sent.size(); ++k) fail(sent[k], error);
        lease.drop();
        c = nullptr;
        break;
      }
      settle(sent[k], r.get());
    }
  }
}

}  // namespace

RedisTier::RedisTier(RedisTierOptions options) : opts_(std::move(options)) {
  spec_ = opts_.spec;
  if (spec_.empty()) {
    spec_ = "redis://" + opts_.endpoint.host + ":" + std::to_string(opts_.endpoint.port);
    if (opts_.endpoint.db != 0) spec_ += "/" + std::to_string(opts_.endpoint.db);
    if (opts_.prefix != "ferry:") spec_ += "?prefix=" + opts_.prefix;
  }
  pool_ = std::make_unique<RedisPool>(opts_.endpoint, opts_.connections);
}

RedisTier::~RedisTier() = default;

std::string RedisTier::full_key(std::string_view key) const { return opts_.prefix + std::string(key); }

std::string RedisTier::unavailable(const std::string& why) const {
  return why.find("unavailable") != std::string::npos ? why : why + "; the tier reconnects on its next call";
}

std::uint64_t RedisTier::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

void RedisTier::touch(std::string_view key, std::uint64_t size) {
  std::lock_guard lock(mu_);
  auto it = tracked_.find(key);
  if (it == tracked_.end()) {
    lru_.emplace_front(key);
    tracked_.emplace(std::string(key), Tracked{size, lru_.begin()});
  } else {
    used_ -= it->second.size;
    it->second.size = size;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  used_ += size;
}

void RedisTier::forget(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = tracked_.find(key);
  if (it == tracked_.end()) return;
  used_ -= it->second.size;
  lru_.erase(it->second.lru);
  tracked_.erase(it);
}

void RedisTier::put(std::span<PutItem> items) {
  if (items.empty()) return;
  auto lease = pool_->lease();
  std::vector<std::string> keys(items.size());
  pipeline(
      lease, pool_->address(), items.size(),
      [&](redisContext* c, std::size_t i) -> std::optional<std::uint64_t> {
        PutItem& item = items[i];
        if (item.key.empty()) {
          item.status = XferStatus::InvalidDesc;
          item.error = "redis tier: empty key";
          return std::nullopt;
        }
        keys[i] = full_key(item.key);
        // SET <key> <header + data>, written as RESP by hand so that the object's
        // bytes are copied once, straight into hiredis's output buffer (it appends
        // formatted commands as raw bytes, so one command may come in pieces).
        const ValueHeader h{kValueMagic, item.data.size, item.checksum, 0};
        std::string head = "*3\r\n$3\r\nSET\r\n$" + std::to_string(keys[i].size()) + "\r\n" + keys[i] + "\r\n$" +
                           std::to_string(kValueHeader + item.data.size) + "\r\n";
        head.append(reinterpret_cast<const char*>(&h), sizeof(h));
        redisAppendFormattedCommand(c, head.data(), head.size());
        if (item.data.size > 0)
          redisAppendFormattedCommand(c, reinterpret_cast<const char*>(item.data.data), item.data.size);
        redisAppendFormattedCommand(c, "\r\n", 2);
        return item.data.size;
      },
      [&](std::size_t i, redisReply* r) {
        PutItem& item = items[i];
        if (r->type == REDIS_REPLY_STATUS) {
          item.status = XferStatus::Ok;
          item.error.clear();
          touch(item.key, item.data.size);
          return;
        }
        const std::string msg = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply";
        // maxmemory reached: the chain sends the object (or victims) further down.
        item.status = msg.rfind("OOM", 0) == 0 ? XferStatus::NoSpace : XferStatus::IoError;
        item.error = "redis " + pool_->address() + ": SET " + quote_key(item.key) + ": " + msg;
      },
      [&](std::size_t i, const std::string& error) {
        items[i].status = XferStatus::Unavailable;
        items[i].error = unavailable(error);
      });
}

void RedisTier::get(std::span<GetItem> items) {
  if (items.empty()) return;
  auto lease = pool_->lease();
  pipeline(
      lease, pool_->address(), items.size(),
      [&](redisContext* c, std::size_t i) -> std::optional<std::uint64_t> {
        GetItem& item = items[i];
        if (item.key.empty()) {
          item.status = XferStatus::InvalidDesc;
          item.error = "redis tier: empty key";
          return std::nullopt;
        }
        const std::string k = full_key(item.key);
        redisAppendCommand(c, "GET %b", k.data(), k.size());
        return item.out.size;
      },
      [&](std::size_t i, redisReply* r) {
        GetItem& item = items[i];
        if (r->type == REDIS_REPLY_NIL) {
          item.status = XferStatus::NotFound;
          item.error = "redis tier: no object " + quote_key(item.key);
          forget(item.key);
          return;
        }
        if (r->type != REDIS_REPLY_STRING) {
          item.status = XferStatus::IoError;
          item.error = "redis " + pool_->address() + ": GET " + quote_key(item.key) + ": " +
                       (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "unexpected reply");
          return;
        }
        ValueHeader h;
        const auto corrupt = [&](const std::string& why) {
          item.status = XferStatus::ChecksumMismatch;
          item.error = "redis " + pool_->address() + ": key " + quote_key(opts_.prefix + std::string(item.key)) +
                       ": " + why;
        };
        if (auto why = parse_header(r->str, r->len, &h); !why.empty()) return corrupt(why);
        if (h.size != r->len - kValueHeader)
          return corrupt("the header says " + std::to_string(h.size) + " bytes, the value holds " +
                         std::to_string(r->len - kValueHeader));
        item.size = h.size;
        if (item.out.size < h.size) {
          item.status = XferStatus::TooLarge;
          item.error = "redis tier: object " + quote_key(item.key) + " has " + std::to_string(h.size) +
                       " bytes, the buffer holds " + std::to_string(item.out.size);
          return;
        }
        if (h.size > 0) std::memcpy(item.out.data, r->str + kValueHeader, h.size);
        const std::uint64_t got = checksum({item.out.data, h.size});
        if (got != h.checksum)
          return corrupt("checksum mismatch (stored " + checksum_hex(h.checksum) + ", computed " + checksum_hex(got) +
                         ")");
        item.status = XferStatus::Ok;
        item.error.clear();
        touch(item.key, h.size);
      },
      [&](std::size_t i, const std::string& error) {
        items[i].status = XferStatus::Unavailable;
        items[i].error = unavailable(error);
      });
}

std::optional<ObjectMeta> RedisTier::stat(std::string_view key) {
  if (key.empty()) return std::nullopt;
  auto lease = pool_->lease();
  std::string error;
  redisContext* c = lease.connect(&error);
  if (c == nullptr) {
    log::app().warn("redis tier: stat {}: {}", quote_key(key), error);
    return std::nullopt;
  }
  const std::string k = full_key(key);
  Reply r(static_cast<redisReply*>(redisCommand(c, "GETRANGE %b 0 %d", k.data(), k.size(), int(kValueHeader) - 1)));
  if (!r) {
    log::app().warn("redis tier: stat {}: {}", quote_key(key), c->errstr);
    lease.drop();
    return std::nullopt;
  }
  ValueHeader h;
  if (r->type != REDIS_REPLY_STRING || r->len == 0 || !parse_header(r->str, r->len, &h).empty()) return std::nullopt;
  return ObjectMeta{h.size, h.checksum};
}

bool RedisTier::remove(std::string_view key) {
  if (key.empty()) return false;
  auto lease = pool_->lease();
  std::string error;
  redisContext* c = lease.connect(&error);
  if (c == nullptr) {
    log::app().warn("redis tier: remove {}: {}", quote_key(key), error);
    return false;
  }
  const std::string k = full_key(key);
  // UNLINK frees a large value in the background instead of blocking Redis.
  Reply r(static_cast<redisReply*>(redisCommand(c, "UNLINK %b", k.data(), k.size())));
  if (!r) {
    log::app().warn("redis tier: remove {}: {}", quote_key(key), c->errstr);
    lease.drop();
    return false;
  }
  forget(key);
  return r->type == REDIS_REPLY_INTEGER && r->integer > 0;
}

std::vector<std::pair<std::string, ObjectMeta>> RedisTier::list() {
  std::vector<std::pair<std::string, ObjectMeta>> out;
  auto lease = pool_->lease();
  std::string error;
  redisContext* c = lease.connect(&error);
  if (c == nullptr) {
    log::app().warn("redis tier: list: {}", error);
    return out;
  }
  const auto lost = [&] {
    log::app().warn("redis tier: list: {}", c->errstr);
    lease.drop();
  };
  const std::string pattern = glob_escape(opts_.prefix) + "*";
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    Reply r(static_cast<redisReply*>(
        redisCommand(c, "SCAN %s MATCH %b COUNT 1000", cursor.c_str(), pattern.data(), pattern.size())));
    if (!r) return lost(), out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return out;
    cursor.assign(r->element[0]->str, r->element[0]->len);
    for (std::size_t i = 0; i < r->element[1]->elements; ++i)
      keys.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
  } while (cursor != "0");

  // One GETRANGE of the header per key, pipelined.
  for (std::size_t at = 0; at < keys.size(); at += kWindowItems) {
    const std::size_t end = std::min(keys.size(), at + kWindowItems);
    for (std::size_t i = at; i < end; ++i)
      redisAppendCommand(c, "GETRANGE %b 0 %d", keys[i].data(), keys[i].size(), int(kValueHeader) - 1);
    for (std::size_t i = at; i < end; ++i) {
      Reply r = next_reply(c);
      if (!r) return lost(), out;
      ValueHeader h;
      if (r->type == REDIS_REPLY_STRING && parse_header(r->str, r->len, &h).empty())
        out.emplace_back(keys[i].substr(opts_.prefix.size()), ObjectMeta{h.size, h.checksum});
    }
  }
  return out;
}

std::vector<std::string> RedisTier::lru_victims(std::uint64_t bytes) {
  std::vector<std::string> out;
  std::uint64_t sum = 0;
  // Keys this process never touched first (older than anything it did touch) ...
  for (auto& [key, meta] : list()) {
    if (sum >= bytes) return out;
    std::lock_guard lock(mu_);
    if (tracked_.find(key) != tracked_.end()) continue;
    out.push_back(std::move(key));
    sum += meta.size;
  }
  // ... then the tracked ones, least recently used first.
  std::lock_guard lock(mu_);
  for (auto it = lru_.rbegin(); it != lru_.rend() && sum < bytes; ++it) {
    out.push_back(*it);
    sum += tracked_.find(*it)->second.size;
  }
  return out;
}

}  // namespace ferry::xfer::store
