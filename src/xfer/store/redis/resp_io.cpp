#include "xfer/store/redis/resp_io.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace ferry::xfer::store {
namespace {

// Payload rests at least this long are read straight into their destination.
constexpr std::size_t kDirectRead = 16 << 10;

RespError io_error(const char* what, int err) noexcept {
  return RespError{what, err};
}
RespError not_resp(const char* what) noexcept {
  return RespError{what};
}

}  // namespace

std::string describe(const RespError& e) {
  if (!e.failed()) return {};
  if (e.type != 0) return std::string(e.what) + " '" + e.type + "'";
  if (e.err == 0) return e.what;
  // The socket has SO_RCVTIMEO/SO_SNDTIMEO (redis_conn.cpp): a timeout
  // comes back as EAGAIN.
  if (e.err == EAGAIN || e.err == EWOULDBLOCK) return std::string(e.what) + " timed out";
  return std::string(e.what) + ": " + std::strerror(e.err);
}

namespace {

// OpenSSL's answer to a failed SSL_read_ex/SSL_write_ex, as a RespError. The
// socket has SO_RCVTIMEO/SO_SNDTIMEO: a timeout comes back as WANT_READ/WRITE,
// or as a syscall error with EAGAIN.
RespError tls_error(ssl_st* ssl, int ret, const char* what) noexcept {
  switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_ZERO_RETURN: return RespError{"connection closed by the server"};
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: return io_error(what, EAGAIN);
    case SSL_ERROR_SYSCALL:
      if (errno == 0) return RespError{"connection closed by the server"};
      return io_error(what, errno);
    default: return RespError{"TLS error on the connection"};  // the detail: OpenSSL's error queue
  }
}

RespError tls_write(ssl_st* ssl, const void* p, std::size_t n) noexcept {
  while (n > 0) {
    ERR_clear_error();
    std::size_t done = 0;
    const int ret = SSL_write_ex(ssl, p, n, &done);
    if (ret <= 0) {
      if (SSL_get_error(ssl, ret) == SSL_ERROR_SYSCALL && errno == EINTR) continue;
      return tls_error(ssl, ret, "write");
    }
    p = static_cast<const char*>(p) + done;
    n -= done;
  }
  return {};
}

// TLS has no writev: small pieces (command text, headers) are gathered into one
// record's worth, large ones (values) go to SSL_write as they are.
RespError tls_write_all(ssl_st* ssl, const std::vector<iovec>& iov) noexcept {
  constexpr std::size_t kGather = 16 << 10;  // one TLS record
  char gather[kGather];
  std::size_t held = 0;
  for (const iovec& v : iov) {
    if (v.iov_len > kGather - held) {
      if (auto e = tls_write(ssl, gather, held); e.failed()) return e;
      held = 0;
    }
    if (v.iov_len >= kGather) {
      if (auto e = tls_write(ssl, v.iov_base, v.iov_len); e.failed()) return e;
      continue;
    }
    std::memcpy(gather + held, v.iov_base, v.iov_len);
    held += v.iov_len;
  }
  return tls_write(ssl, gather, held);
}

}  // namespace

RespError resp_write_all(RespSocket s, std::vector<iovec>& iov) noexcept {
  if (s.ssl != nullptr) return tls_write_all(s.ssl, iov);
  const int fd = s.fd;
  std::size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = writev(fd, iov.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("write", errno);
    }
    // Skip what was written: whole iovecs, then part of the next one.
    std::size_t left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return {};
}

RespError resp_read_some(RespSocket s, void* dst, std::size_t n, std::size_t* got) noexcept {
  for (;;) {
    if (s.ssl != nullptr) {
      ERR_clear_error();
      const int ret = SSL_read_ex(s.ssl, dst, n, got);
      if (ret > 0) return {};
      if (SSL_get_error(s.ssl, ret) == SSL_ERROR_SYSCALL && errno == EINTR) continue;
      return tls_error(s.ssl, ret, "read");
    }
    const ssize_t r = read(s.fd, dst, n);
    if (r > 0) {
      *got = static_cast<std::size_t>(r);
      return {};
    }
    if (r == 0) return RespError{"connection closed by the server"};
    if (errno != EINTR) return io_error("read", errno);
  }
}

RespError RespReader::fill(RespSocket s) noexcept {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (end_ == buf_.size()) {
    // A line longer than what is left: move it to the front (or grow, for a huge line).
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    } else {
      if (buf_.size() >= (1u << 20)) return not_resp("a reply line longer than 1 MiB: not RESP");
      buf_.resize(buf_.size() * 2);
    }
  }
  std::size_t got = 0;
  if (auto err = resp_read_some(s, buf_.data() + end_, buf_.size() - end_, &got); err.failed()) return err;
  end_ += got;
  return {};
}

RespError RespReader::read_head(RespSocket s, Head* head) noexcept {
  for (;;) {
    const char* b = buf_.data() + begin_;
    const char* e = buf_.data() + end_;
    const char* nl = static_cast<const char*>(std::memchr(b, '\n', static_cast<std::size_t>(e - b)));
    if (nl == nullptr) {
      if (auto err = fill(s); err.failed()) return err;
      continue;
    }
    if (nl - b < 2 || nl[-1] != '\r') return not_resp("a reply line without \\r\\n: not RESP");
    const char type = b[0];
    const char* text = b + 1;
    const char* text_end = nl - 1;
    begin_ = static_cast<std::size_t>(nl + 1 - buf_.data());
    switch (type) {
      case '+':
      case '-':
        head->kind = type == '+' ? Kind::Status : Kind::Error;
        head->text.assign(text, text_end);
        return {};
      case ':':
      case '$':
      case '*': {
        std::int64_t v = 0;
        const auto [p, ec] = std::from_chars(text, text_end, v);
        if (ec != std::errc() || p != text_end)
          return not_resp("a bad length or integer in a reply: not RESP");
        head->n = v;
        head->kind =
            type == ':' ? Kind::Integer : (v < 0 ? Kind::Nil : (type == '$' ? Kind::Bulk : Kind::Array));
        return {};
      }
      default: return RespError{"unexpected reply type", 0, type};
    }
  }
}

RespError RespReader::read_payload(RespSocket s, void* dst, std::size_t n) noexcept {
  auto* out = static_cast<char*>(dst);
  // First what is buffered already ...
  const std::size_t have = std::min(n, end_ - begin_);
  if (out != nullptr && have > 0) std::memcpy(out, buf_.data() + begin_, have);
  begin_ += have;
  std::size_t done = have;
  // ... then straight from the socket into the destination (or the buffer, to discard).
  while (done < n) {
    if (out != nullptr && n - done < kDirectRead) {
      // A small rest: read into the buffer, which may also catch the next replies.
      begin_ = end_ = 0;
      if (auto err = fill(s); err.failed()) return err;
      const std::size_t take = std::min(n - done, end_);
      std::memcpy(out + done, buf_.data(), take);
      begin_ = take;
      done += take;
      continue;
    }
    std::size_t got = 0;
    RespError err;
    if (out != nullptr) {
      err = resp_read_some(s, out + done, n - done, &got);
    } else {
      err = resp_read_some(s, buf_.data(), std::min(n - done, buf_.size()), &got);
      begin_ = end_ = 0;
    }
    if (err.failed()) return err;
    done += got;
  }
  return {};
}

RespError RespReader::read_crlf(RespSocket s) noexcept {
  char crlf[2];
  if (auto err = read_payload(s, crlf, 2); err.failed()) return err;
  if (crlf[0] != '\r' || crlf[1] != '\n') return not_resp("a value not followed by \\r\\n: not RESP");
  return {};
}

namespace {

constexpr int kMaxDepth = 8;
constexpr std::int64_t kMaxElements = 1 << 20;
constexpr std::int64_t kMaxBulk = 512ll << 20;

RespError read_value(RespReader& reader, RespSocket s, RespValue* out, int depth,
                     std::int64_t* budget) noexcept {
  RespReader::Head head;
  if (auto e = reader.read_head(s, &head); e.failed()) return e;
  out->kind = head.kind;
  out->n = head.n;
  out->str.clear();
  out->elements.clear();
  switch (head.kind) {
    case RespReader::Kind::Status:
    case RespReader::Kind::Error: out->str = std::move(head.text); return {};
    case RespReader::Kind::Integer:
    case RespReader::Kind::Nil: return {};
    case RespReader::Kind::Bulk:
      if (head.n > kMaxBulk) return RespError{"a bulk reply over 512 MiB: not a reply this tier reads"};
      try {
        out->str.resize(static_cast<std::size_t>(head.n));
      } catch (...) {
        return RespError{"out of memory for a reply"};
      }
      if (auto e = reader.read_payload(s, out->str.data(), out->str.size()); e.failed()) return e;
      return reader.read_crlf(s);
    case RespReader::Kind::Array:
      if (depth >= kMaxDepth) return RespError{"a reply nested too deep: not a reply this tier reads"};
      if (head.n > *budget) return RespError{"a reply with too many elements: not a reply this tier reads"};
      *budget -= head.n;
      try {
        out->elements.resize(static_cast<std::size_t>(head.n));
      } catch (...) {
        return RespError{"out of memory for a reply"};
      }
      for (RespValue& v : out->elements)
        if (auto e = read_value(reader, s, &v, depth + 1, budget); e.failed()) return e;
      return {};
  }
  return {};
}

}  // namespace

RespError read_reply(RespReader& reader, RespSocket s, RespValue* out) noexcept {
  std::int64_t budget = kMaxElements;
  return read_value(reader, s, out, 0, &budget);
}

void append_bulk_head(std::string& out, std::size_t n) {
  out += '$';
  out += std::to_string(n);
  out += "\r\n";
}

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const std::string_view a : args) {
    append_bulk_head(out, a.size());
    out += a;
    out += "\r\n";
  }
}

}  // namespace ferry::xfer::store
