#include "xfer/store/redis/redis_value.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "ferry/xfer/checksum.h"
#include "xfer/store/quote_key.h"

namespace ferry::xfer::store {

bool parse_header(const char* s, std::size_t len, ValueHeader* h) noexcept {
  if (len < kValueHeader) return false;
  std::memcpy(h, s, kValueHeader);
  return h->magic == kValueMagic && (h->flags & ~kValueLeafSums) == 0;
}

std::optional<ObjectMeta> header_meta(const RespValue& reply) noexcept {
  ValueHeader h;
  if (reply.kind != RespReader::Kind::Bulk || !parse_header(reply.str.data(), reply.str.size(), &h))
    return std::nullopt;
  return ObjectMeta{h.size, h.checksum, h.whole_sum()};
}

XferStatus error_reply_status(std::string_view text) noexcept {
  const auto first_word_is = [&](std::string_view word) {
    return text.substr(0, word.size()) == word && (text.size() == word.size() || text[word.size()] == ' ');
  };
  if (first_word_is("LOADING") || first_word_is("BUSY") || first_word_is("MASTERDOWN") ||
      first_word_is("CLUSTERDOWN") || first_word_is("TRYAGAIN"))
    return XferStatus::Unavailable;
  if (first_word_is("OOM")) return XferStatus::NoSpace;
  return XferStatus::IoError;
}

std::string error_reply_message(const std::string& address, std::string_view command, std::string_view key,
                                std::string_view text) {
  std::string m =
      "redis " + address + ": " + std::string(command) + " " + quote_key(key) + ": " + std::string(text);
  if (error_reply_status(text) == XferStatus::Unavailable)
    m += " (not ready: the tier tries again on its next call)";
  return m;
}

void Window::clear() {
  iov.clear();
  text.clear();
  sent.clear();
  bytes = 0;
}

std::string& Window::add_text() {
  text.emplace_back();
  return text.back();
}

void Window::add(const void* p, std::size_t n) {
  if (n > 0) iov.push_back({const_cast<void*>(p), n});
}

void Window::add_command(std::initializer_list<std::string_view> args) {
  std::string& t = add_text();
  append_command(t, args);
  add(t.data(), t.size());
}

void Window::add_set(std::string_view prefix, const PutItem& item, ValueHeader* header) {
  *header = ValueHeader{kValueMagic, item.data.size, item.checksum, kValueLeafSums};
  std::string& t = add_text();
  t = "*3\r\n$3\r\nSET\r\n";
  append_bulk_head(t, prefix.size() + item.key.size());
  t += prefix;
  t += item.key;
  t += "\r\n";
  append_bulk_head(t, kValueHeader + item.data.size);
  add(t.data(), t.size());
  add(header, kValueHeader);
  add(item.data.data, item.data.size);
  add("\r\n", 2);
  bytes += item.data.size;
}

RespError read_get_reply(RespReader& reader, RespSocket fd, GetItem& item, const std::string& address,
                         std::string_view prefix, Fault& fault, std::string* error_reply) noexcept {
  RespReader::Head head;
  if (auto why = reader.read_head(fd, &head); why.failed()) return why;
  switch (head.kind) {
    case RespReader::Kind::Nil:
      item.status = XferStatus::NotFound;  // a miss: an answer, not raised
      return {};
    case RespReader::Kind::Error: *error_reply = std::move(head.text); return {};
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
    return "redis " + address + ": key " + quote_key(std::string(prefix) + std::string(item.key));
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
    return finish(rest, XferStatus::ChecksumMismatch, where() + ": unknown flags " + std::to_string(h.flags));
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
  return {};
}

namespace {

// Escapes glob characters, so the prefix matches itself in SCAN MATCH.
std::string glob_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

XferStatus scan_headers(RedisConn& c, const std::string& address, std::string_view prefix,
                        std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault,
                        bool* lost) noexcept {
  *lost = false;
  const auto failed = [&](const RespError& e) {
    *lost = true;
    return fault.raise(XferStatus::Unavailable, "redis " + address + " unavailable: " + describe(e) +
                                                    "; the tier reconnects on its next call");
  };
  // An error reply: Unavailable when Redis is not ready yet (LOADING ...), else IoError.
  const auto refused = [&](const char* command, std::string_view text) {
    const XferStatus s =
        error_reply_status(text) == XferStatus::Unavailable ? XferStatus::Unavailable : XferStatus::IoError;
    return fault.raise(s, "redis " + address + ": " + command + ": " + std::string(text));
  };
  try {
    const std::string pattern = glob_escape(prefix) + "*";
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
      RespValue r;
      if (auto e = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, &r); e.failed())
        return failed(e);
      if (r.kind != RespReader::Kind::Array || r.elements.size() != 2 ||
          r.elements[0].kind != RespReader::Kind::Bulk || r.elements[1].kind != RespReader::Kind::Array)
        return refused("SCAN", r.is_error() ? std::string_view(r.str) : std::string_view("unexpected reply"));
      cursor = r.elements[0].str;
      for (RespValue& k : r.elements[1].elements)
        if (k.kind == RespReader::Kind::Bulk && k.str.size() >= prefix.size())
          keys.push_back(std::move(k.str));
    } while (cursor != "0");

    // One GETRANGE of the header per key, pipelined. Every reply is read, so that
    // the connection stays in step even when one of them is refused.
    for (std::size_t at = 0; at < keys.size(); at += kWindowItems) {
      const std::size_t end = std::min(keys.size(), at + kWindowItems);
      std::string text;
      for (std::size_t i = at; i < end; ++i) append_command(text, {"GETRANGE", keys[i], "0", kHeaderLast});
      if (auto e = c.send(text); e.failed()) return failed(e);
      std::string refusal;
      for (std::size_t i = at; i < end; ++i) {
        RespValue r;
        if (auto e = read_reply(c.reader(), c.socket(), &r); e.failed()) return failed(e);
        ValueHeader h;
        if (r.is_error() && refusal.empty()) refusal = r.str;
        if (r.kind == RespReader::Kind::Bulk && parse_header(r.str.data(), r.str.size(), &h))
          out->emplace_back(keys[i].substr(prefix.size()), ObjectMeta{h.size, h.checksum, h.whole_sum()});
      }
      if (!refusal.empty()) return refused("GETRANGE", refusal);
    }
  } catch (const std::bad_alloc&) {
    return fault.raise(XferStatus::IoError, "redis " + address + ": out of memory listing the keys");
  }
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::store
