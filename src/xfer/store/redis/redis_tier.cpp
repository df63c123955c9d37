#include "xfer/store/redis/redis_tier.h"

#include <hiredis/hiredis.h>

#include <cstring>
#include <deque>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/checksum/checksum.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/redis/redis_info.h"
#include "xfer/store/redis/resp_io.h"

namespace ferry::xfer::store {
namespace {

constexpr std::uint64_t kValueMagic = 0x3156525952524546ull;  // "FERRYRV1"
constexpr std::size_t kValueHeader = 32;
constexpr std::uint64_t kValueLeafSums = 1;  // the checksum is checksum()'s (checksum.h)
// A pipeline window: commands written before their replies are read. Bounded in
// bytes too, so that a batch of large objects does not sit in hiredis's output
// buffer all at once.
constexpr std::size_t kWindowItems = 128;
constexpr std::uint64_t kWindowBytes = 64ull << 20;

struct ValueHeader {
  std::uint64_t magic;
  std::uint64_t size;
  std::uint64_t checksum;
  std::uint64_t flags;  // kValueLeafSums, or 0 in values of older builds (whole_checksum())
  bool whole_sum() const { return (flags & kValueLeafSums) == 0; }
};
static_assert(sizeof(ValueHeader) == kValueHeader);

// Parses a value's header; false when it is not one of ours (too short, bad
// magic, unknown flags).
bool parse_header(const char* s, std::size_t len, ValueHeader* h) noexcept {
  if (len < kValueHeader) return false;
  std::memcpy(h, s, kValueHeader);
  return h->magic == kValueMagic && (h->flags & ~kValueLeafSums) == 0;
}

// The status of an error reply. A Redis that is there but cannot answer yet
// says so with the first word: LOADING (it is reading its data set at start-up),
// BUSY (a script runs past its time limit), MASTERDOWN (a replica that lost its
// master); the caller should try again later, as when Redis is down:
// Unavailable. OOM (maxmemory reached, noeviction): NoSpace, so that the chain
// moves on. Any other error: IoError.
XferStatus error_reply_status(std::string_view text) noexcept {
  const auto first_word_is = [&](std::string_view word) {
    return text.substr(0, word.size()) == word && (text.size() == word.size() || text[word.size()] == ' ');
  };
  if (first_word_is("LOADING") || first_word_is("BUSY") || first_word_is("MASTERDOWN"))
    return XferStatus::Unavailable;
  if (first_word_is("OOM")) return XferStatus::NoSpace;
  return XferStatus::IoError;
}

// The message for an error reply to `command`.
std::string error_reply_message(const std::string& address, std::string_view command, std::string_view key,
                                std::string_view text) {
  std::string m =
      "redis " + address + ": " + std::string(command) + " " + quote_key(key) + ": " + std::string(text);
  if (error_reply_status(text) == XferStatus::Unavailable)
    m += " (not ready: the tier tries again on its next call)";
  return m;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Reads the next pipelined reply through hiredis; nullptr when the connection failed.
Reply next_reply(redisContext* c) noexcept {
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

// RESP bulk string header: "$<n>\r\n".
void append_bulk_head(std::string& out, std::size_t n) {
  out += '$';
  out += std::to_string(n);
  out += "\r\n";
}

// The commands of one pipeline window, written with one writev (resp_io.h).
struct Window {
  std::vector<iovec> iov;
  std::deque<std::string> text;  // command text the iovecs point into (a deque never moves it)
  std::vector<std::size_t> sent;
  std::uint64_t bytes = 0;

  void clear() {
    iov.clear();
    text.clear();
    sent.clear();
    bytes = 0;
  }
  std::string& add_text() {
    text.emplace_back();
    return text.back();
  }
  void add(const void* p, std::size_t n) {
    if (n > 0) iov.push_back({const_cast<void*>(p), n});
  }
};

// Runs n items through one connection in pipeline windows. queue(i, window)
// adds item i's command and returns true, or settles the item without one and
// returns false; settle(i, reader, fd) reads item i's reply and returns why the
// connection failed, if it did. When the connection fails (or cannot be made),
// the cause is raised into `fault` once, and every item not yet answered gets
// fail(i), and so does the rest of the call: the next call connects again.
template <class Queue, class Settle, class Fail>
void pipeline(RedisPool::Lease& lease, const std::string& address, std::size_t n, Fault& fault, Queue queue,
              Settle settle, Fail fail) noexcept {
  redisContext* c = lease.connect(fault);  // raises why not
  RespReader& reader = lease.reader();
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
    if (auto why = resp_write_all(c->fd, w.iov); why.failed()) {
      lost(why);
      for (const std::size_t k : w.sent) fail(k);
      continue;
    }
    for (std::size_t k = 0; k < w.sent.size(); ++k) {
      if (auto why = settle(w.sent[k], reader, c->fd); why.failed()) {
        lost(why);
        for (; k < w.sent.size(); ++k) fail(w.sent[k]);
        break;
      }
    }
  }
  // Every reply was read: anything more would put hiredis out of step. Every
  // item has its answer, so nothing failed: the next call just connects again.
  if (c != nullptr && reader.buffered() != 0) lease.drop();
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

std::string RedisTier::full_key(std::string_view key) const {
  return opts_.prefix + std::string(key);
}

std::uint64_t RedisTier::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

std::uint64_t RedisTier::capacity_now() const {
  Fault fault;  // an outage is logged by its raise; the answer is then "nobody can say"
  auto lease = pool_->lease();
  redisContext* c = lease.connect(fault);
  if (c == nullptr) return kUnbounded;
  Reply r(static_cast<redisReply*>(redisCommand(c, "INFO memory")));
  if (!r) {
    (void)fault.raise(XferStatus::Unavailable, "redis " + pool_->address() + ": INFO memory: " + c->errstr +
                                                   "; the tier reconnects on its next call");
    lease.drop();
    return kUnbounded;
  }
  const std::optional<RedisMemory> m =
      r->type == REDIS_REPLY_STRING ? parse_info_memory(std::string_view(r->str, r->len)) : std::nullopt;
  if (!m) {
    (void)fault.raise(XferStatus::IoError, "redis " + pool_->address() +
                                               ": INFO memory has no used_memory and maxmemory figures; "
                                               "the tier's capacity is reported as unknown");
    return kUnbounded;
  }
  if (m->max == 0) return kUnbounded;
  return used() + (m->max > m->used ? m->max - m->used : 0);
}

void RedisTier::touch(std::string_view key, std::uint64_t size) noexcept {
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

void RedisTier::forget(std::string_view key) noexcept {
  std::lock_guard lock(mu_);
  auto it = tracked_.find(key);
  if (it == tracked_.end()) return;
  used_ -= it->second.size;
  lru_.erase(it->second.lru);
  tracked_.erase(it);
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
        // SET <prefix><key> <header><data>: the data goes from the caller's
        // buffer to the socket, uncopied.
        headers[i] = ValueHeader{kValueMagic, item.data.size, item.checksum, kValueLeafSums};
        std::string& t = w.add_text();
        t = "*3\r\n$3\r\nSET\r\n";
        append_bulk_head(t, opts_.prefix.size() + item.key.size());
        t += opts_.prefix;
        t += item.key;
        t += "\r\n";
        append_bulk_head(t, kValueHeader + item.data.size);
        w.add(t.data(), t.size());
        w.add(&headers[i], kValueHeader);
        w.add(item.data.data, item.data.size);
        w.add("\r\n", 2);
        w.bytes += item.data.size;
        return true;
      },
      [&](std::size_t i, RespReader& reader, int fd) -> RespError {
        PutItem& item = items[i];
        RespReader::Head h;
        if (auto why = reader.read_head(fd, &h); why.failed()) return why;
        if (h.kind == RespReader::Kind::Status) {
          item.status = XferStatus::Ok;
          touch(item.key, item.data.size);
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
        std::string& t = w.add_text();
        t = "*2\r\n$3\r\nGET\r\n";
        append_bulk_head(t, opts_.prefix.size() + item.key.size());
        t += opts_.prefix;
        t += item.key;
        t += "\r\n";
        w.add(t.data(), t.size());
        w.bytes += item.out.size;
        return true;
      },
      [&](std::size_t i, RespReader& reader, int fd) -> RespError {
        GetItem& item = items[i];
        RespReader::Head head;
        if (auto why = reader.read_head(fd, &head); why.failed()) return why;
        switch (head.kind) {
          case RespReader::Kind::Nil:
            item.status = XferStatus::NotFound;  // a miss: an answer, not raised
            forget(item.key);
            return {};
          case RespReader::Kind::Error:
            item.status =
                fault.raise(error_reply_status(head.text),
                            error_reply_message(pool_->address(), "GET", item.key, head.text), item.key);
            return {};
          case RespReader::Kind::Bulk: break;
          default: return RespError{"unexpected reply to GET"};
        }
        const auto len = static_cast<std::uint64_t>(head.n);
        // Settles the item with `status`, raising `why`, after reading (or
        // discarding) the rest of the value, so the next reply starts where it should.
        const auto finish = [&](std::uint64_t rest, XferStatus status, std::string why) -> RespError {
          if (auto e = reader.read_payload(fd, nullptr, rest); e.failed()) return e;
          if (auto e = reader.read_crlf(fd); e.failed()) return e;
          item.status = fault.raise(status, std::move(why), item.key);
          return {};
        };
        const auto where = [&] {
          return "redis " + pool_->address() + ": key " + quote_key(opts_.prefix + std::string(item.key));
        };
        if (len < kValueHeader)
          return finish(len, XferStatus::ChecksumMismatch,
                        where() + ": value of " + std::to_string(len) + " bytes is shorter than a header");
        ValueHeader h;
        if (auto e = reader.read_payload(fd, &h, kValueHeader); e.failed()) return e;
        const std::uint64_t rest = len - kValueHeader;
        if (h.magic != kValueMagic)
          return finish(rest, XferStatus::ChecksumMismatch, where() + ": not a ferry value (bad magic)");
        if ((h.flags & ~kValueLeafSums) != 0)
          return finish(rest, XferStatus::ChecksumMismatch,
                        where() + ": unknown flags " + std::to_string(h.flags));
        if (h.size != rest)
          return finish(rest, XferStatus::ChecksumMismatch,
                        where() + ": the header says " + std::to_string(h.size) + " bytes, the value holds " +
                            std::to_string(rest));
        item.size = h.size;
        if (item.out.size < h.size)
          return finish(rest, XferStatus::TooLarge,
                        "redis tier: object " + quote_key(item.key) + " has " + std::to_string(h.size) +
                            " bytes, the buffer holds " + std::to_string(item.out.size));
        if (auto e = reader.read_payload(fd, item.out.data, h.size); e.failed()) return e;
        if (auto e = reader.read_crlf(fd); e.failed()) return e;
        const std::uint64_t got = checksum_of_kind({item.out.data, h.size}, h.whole_sum());
        if (got != h.checksum) {
          item.status = fault.raise(XferStatus::ChecksumMismatch,
                                    where() + ": checksum mismatch (stored " + checksum_hex(h.checksum) +
                                        ", computed " + checksum_hex(got) + ")",
                                    item.key);
          return {};
        }
        item.status = XferStatus::Ok;
        touch(item.key, h.size);
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
  redisContext* c = lease.connect(fault);
  if (c == nullptr) return std::nullopt;
  const std::string k = full_key(key);
  Reply r(static_cast<redisReply*>(
      redisCommand(c, "GETRANGE %b 0 %d", k.data(), k.size(), int(kValueHeader) - 1)));
  if (!r) {
    (void)fault.raise(XferStatus::Unavailable, "redis " + pool_->address() + ": stat " + quote_key(key) +
                                                   ": " + c->errstr +
                                                   "; the tier reconnects on its next call");
    lease.drop();
    return std::nullopt;
  }
  ValueHeader h;
  if (r->type != REDIS_REPLY_STRING || r->len == 0 || !parse_header(r->str, r->len, &h)) return std::nullopt;
  return ObjectMeta{h.size, h.checksum, h.whole_sum()};
}

XferStatus RedisTier::remove(std::string_view key, Fault& fault) noexcept {
  if (key.empty()) return XferStatus::NotFound;
  auto lease = pool_->lease();
  redisContext* c = lease.connect(fault);
  if (c == nullptr) return XferStatus::Unavailable;
  const std::string k = full_key(key);
  // UNLINK frees a large value in the background instead of blocking Redis.
  Reply r(static_cast<redisReply*>(redisCommand(c, "UNLINK %b", k.data(), k.size())));
  if (!r) {
    std::string why =
        "redis " + pool_->address() + " unavailable: " + c->errstr + "; the tier reconnects on its next call";
    lease.drop();
    return fault.raise(XferStatus::Unavailable, std::move(why), key);
  }
  if (r->type == REDIS_REPLY_ERROR) {
    const std::string_view text(r->str, r->len);
    const XferStatus s =
        error_reply_status(text) == XferStatus::Unavailable ? XferStatus::Unavailable : XferStatus::IoError;
    return fault.raise(s, error_reply_message(pool_->address(), "UNLINK", key, text), key);
  }
  forget(key);
  if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) return XferStatus::Ok;
  return XferStatus::NotFound;
}

XferStatus RedisTier::list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept {
  out->clear();
  auto lease = pool_->lease();
  redisContext* c = lease.connect(fault);
  if (c == nullptr) return XferStatus::Unavailable;
  const auto lost = [&] {
    std::string why =
        "redis " + pool_->address() + " unavailable: " + c->errstr + "; the tier reconnects on its next call";
    lease.drop();
    out->clear();
    return fault.raise(XferStatus::Unavailable, std::move(why));
  };
  // An error reply: Unavailable when Redis is not ready yet (LOADING ...), else IoError.
  const auto refused = [&](const char* command, std::string_view text) {
    out->clear();
    const XferStatus s =
        error_reply_status(text) == XferStatus::Unavailable ? XferStatus::Unavailable : XferStatus::IoError;
    return fault.raise(s, "redis " + pool_->address() + ": " + command + ": " + std::string(text));
  };
  const std::string pattern = glob_escape(opts_.prefix) + "*";
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    Reply r(static_cast<redisReply*>(
        redisCommand(c, "SCAN %s MATCH %b COUNT 1000", cursor.c_str(), pattern.data(), pattern.size())));
    if (!r) return lost();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
      return refused("SCAN", r->type == REDIS_REPLY_ERROR ? std::string_view(r->str, r->len)
                                                          : std::string_view("unexpected reply"));
    cursor.assign(r->element[0]->str, r->element[0]->len);
    for (std::size_t i = 0; i < r->element[1]->elements; ++i)
      keys.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
  } while (cursor != "0");

  // One GETRANGE of the header per key, pipelined. Every reply is read, so that
  // the connection stays in step even when one of them is refused.
  for (std::size_t at = 0; at < keys.size(); at += kWindowItems) {
    const std::size_t end = std::min(keys.size(), at + kWindowItems);
    for (std::size_t i = at; i < end; ++i)
      redisAppendCommand(c, "GETRANGE %b 0 %d", keys[i].data(), keys[i].size(), int(kValueHeader) - 1);
    std::string refusal;
    for (std::size_t i = at; i < end; ++i) {
      Reply r = next_reply(c);
      if (!r) return lost();
      ValueHeader h;
      if (r->type == REDIS_REPLY_ERROR && refusal.empty()) refusal = std::string(r->str, r->len);
      if (r->type == REDIS_REPLY_STRING && parse_header(r->str, r->len, &h))
        out->emplace_back(keys[i].substr(opts_.prefix.size()), ObjectMeta{h.size, h.checksum, h.whole_sum()});
    }
    if (!refusal.empty()) return refused("GETRANGE", refusal);
  }
  return XferStatus::Ok;
}

std::vector<std::string> RedisTier::lru_victims(std::uint64_t bytes) noexcept {
  std::vector<std::string> out;
  std::uint64_t sum = 0;
  // Keys this process never touched first (older than anything it did touch) ...
  // While Redis is down there are none to name (the fault of its own logs why).
  std::vector<std::pair<std::string, ObjectMeta>> listed;
  Fault fault;
  (void)list(&listed, fault);
  for (auto& [key, meta] : listed) {
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
