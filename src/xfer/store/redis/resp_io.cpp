#include "xfer/store/redis/resp_io.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

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
  // The socket has SO_RCVTIMEO/SO_SNDTIMEO (hiredis's redisSetTimeout): a timeout
  // comes back as EAGAIN.
  if (e.err == EAGAIN || e.err == EWOULDBLOCK) return std::string(e.what) + " timed out";
  return std::string(e.what) + ": " + std::strerror(e.err);
}

RespError resp_write_all(int fd, std::vector<iovec>& iov) noexcept {
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

RespError RespReader::fill(int fd) noexcept {
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
  for (;;) {
    const ssize_t n = read(fd, buf_.data() + end_, buf_.size() - end_);
    if (n > 0) {
      end_ += static_cast<std::size_t>(n);
      return {};
    }
    if (n == 0) return RespError{"connection closed by the server"};
    if (errno != EINTR) return io_error("read", errno);
  }
}

RespError RespReader::read_head(int fd, Head* head) noexcept {
  for (;;) {
    const char* b = buf_.data() + begin_;
    const char* e = buf_.data() + end_;
    const char* nl = static_cast<const char*>(std::memchr(b, '\n', static_cast<std::size_t>(e - b)));
    if (nl == nullptr) {
      if (auto err = fill(fd); err.failed()) return err;
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
      case '$': {
        std::int64_t v = 0;
        const auto [p, ec] = std::from_chars(text, text_end, v);
        if (ec != std::errc() || p != text_end)
          return not_resp("a bad length or integer in a reply: not RESP");
        head->n = v;
        head->kind = type == ':' ? Kind::Integer : (v < 0 ? Kind::Nil : Kind::Bulk);
        return {};
      }
      default: return RespError{"unexpected reply type", 0, type};
    }
  }
}

RespError RespReader::read_payload(int fd, void* dst, std::size_t n) noexcept {
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
      if (auto err = fill(fd); err.failed()) return err;
      const std::size_t take = std::min(n - done, end_);
      std::memcpy(out + done, buf_.data(), take);
      begin_ = take;
      done += take;
      continue;
    }
    ssize_t r;
    if (out != nullptr) {
      r = read(fd, out + done, n - done);
    } else {
      r = read(fd, buf_.data(), std::min(n - done, buf_.size()));
      begin_ = end_ = 0;
    }
    if (r > 0) {
      done += static_cast<std::size_t>(r);
    } else if (r == 0) {
      return RespError{"connection closed by the server"};
    } else if (errno != EINTR) {
      return io_error("read", errno);
    }
  }
  return {};
}

RespError RespReader::read_crlf(int fd) noexcept {
  char crlf[2];
  if (auto err = read_payload(fd, crlf, 2); err.failed()) return err;
  if (crlf[0] != '\r' || crlf[1] != '\n') return not_resp("a value not followed by \\r\\n: not RESP");
  return {};
}

}  // namespace ferry::xfer::store
