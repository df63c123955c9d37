#pragma once
// The redis tier's data path speaks RESP on the connection's socket itself,
// instead of through hiredis's buffers: a SET is written with writev straight from
// the caller's bytes, and a GET's value is read straight into the caller's buffer.
// hiredis would copy each value twice more (into its output buffer, then into its
// reader buffer and a reply object), and on this path those copies cost more than
// Redis's own work (docs/bench/store.md). hiredis still connects, sets the socket
// timeouts, and runs the tier's other commands (stat, remove, list) on the same
// connection: a pipeline always reads every reply it asked for, so hiredis finds
// nothing of ours left in the socket.
//
// Errors (base/fault.h): these calls are noexcept and compose no text. They
// return a RespError, which names the failure with static words and an errno;
// the tier, which knows the server's address and what it was doing, composes the
// message once (describe()) and raises it.

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::xfer::store {

// Why a read or write on the connection failed (the connection is then
// unusable), or nothing (what == nullptr).
struct [[nodiscard]] RespError {
  const char* what = nullptr;  // a static phrase: "read", "connection closed by the server", ...
  int err = 0;                 // the errno of a failed read or write; 0 otherwise
  char type = 0;               // not 0: the reply type byte that was unexpected

  bool failed() const noexcept { return what != nullptr; }
};

// "read timed out", "write: Broken pipe", "unexpected reply type 'x'", ...
std::string describe(const RespError& e);

// Writes every byte of iov[0..count), in as many writev calls as it takes.
RespError resp_write_all(int fd, std::vector<iovec>& iov) noexcept;

// Buffered reading of replies. Reads what the socket has (up to the buffer) for
// reply headers and small values; a large value goes straight to its destination.
class RespReader {
 public:
  enum class Kind { Status, Error, Integer, Bulk, Nil };
  struct Head {
    Kind kind = Kind::Nil;
    std::string text;    // Status and Error: the line after the type byte
    std::int64_t n = 0;  // Integer: the value; Bulk: the payload length
  };

  // The next reply's first line, or why it failed (I/O error, end of stream,
  // timeout, or bytes that are not RESP).
  RespError read_head(int fd, Head* head) noexcept;
  // Exactly n payload bytes into dst (nullptr: discard them).
  RespError read_payload(int fd, void* dst, std::size_t n) noexcept;
  // The "\r\n" that ends a bulk payload.
  RespError read_crlf(int fd) noexcept;
  // Bytes received but not yet consumed (after a pipeline: must be none).
  std::size_t buffered() const { return end_ - begin_; }
  void clear() { begin_ = end_ = 0; }

 private:
  RespError fill(int fd) noexcept;  // reads more into buf_

  std::vector<char> buf_ = std::vector<char>(64 << 10);
  std::size_t begin_ = 0, end_ = 0;
};

}  // namespace ferry::xfer::store
