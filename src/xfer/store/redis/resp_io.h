#pragma once
// The redis tiers speak RESP on the connection's socket themselves: a SET is
// written with writev straight from the caller's bytes, and a GET's value is read
// straight into the caller's buffer. A client library (hiredis) would copy each
// value twice more (into its output buffer, then into its reader buffer and a
// reply object), and on this path those copies cost more than Redis's own work
// (docs/bench/store.md). The other commands (stat, remove, list, INFO, CLUSTER
// SHARDS) read whole replies with read_reply() on the same connection: a pipeline
// always reads every reply it asked for, so nothing is left in the socket.
//
// The connection may be TLS (redis_conn.h): RespSocket names the socket and, for
// TLS, the OpenSSL session over it; every read and write goes through it.
//
// Errors (ferry/xfer/fault.h): these calls are noexcept and compose no text. They
// return a RespError, which names the failure with static words and an errno;
// the tier, which knows the server's address and what it was doing, composes the
// message once (describe()) and raises it.

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

struct ssl_st;  // OpenSSL's SSL

namespace ferry::xfer::store {

// Where a connection's bytes go: the socket, or the TLS session over it.
struct RespSocket {
  RespSocket(int f = -1, ssl_st* s = nullptr) : fd(f), ssl(s) {}  // NOLINT: an fd is a plain socket
  int fd;
  ssl_st* ssl;  // not null: TLS; reads and writes go through OpenSSL
};

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

// Writes every byte of iov, in as many writev (or, for TLS, SSL_write) calls as
// it takes. May change iov.
RespError resp_write_all(RespSocket s, std::vector<iovec>& iov) noexcept;
// Reads what there is, up to n bytes (at least one); *got is the count.
RespError resp_read_some(RespSocket s, void* dst, std::size_t n, std::size_t* got) noexcept;

// Buffered reading of replies. Reads what the socket has (up to the buffer) for
// reply headers and small values; a large value goes straight to its destination.
class RespReader {
 public:
  enum class Kind { Status, Error, Integer, Bulk, Nil, Array };
  struct Head {
    Kind kind = Kind::Nil;
    std::string text;    // Status and Error: the line after the type byte
    std::int64_t n = 0;  // Integer: the value; Bulk: the payload length; Array: the count
  };

  // The next reply's first line, or why it failed (I/O error, end of stream,
  // timeout, or bytes that are not RESP).
  RespError read_head(RespSocket s, Head* head) noexcept;
  // Exactly n payload bytes into dst (nullptr: discard them).
  RespError read_payload(RespSocket s, void* dst, std::size_t n) noexcept;
  // The "\r\n" that ends a bulk payload.
  RespError read_crlf(RespSocket s) noexcept;
  // Bytes received but not yet consumed (after a pipeline: must be none).
  std::size_t buffered() const { return end_ - begin_; }
  void clear() { begin_ = end_ = 0; }

 private:
  RespError fill(RespSocket s) noexcept;  // reads more into buf_

  std::vector<char> buf_ = std::vector<char>(64 << 10);
  std::size_t begin_ = 0, end_ = 0;
};

// A whole reply, for the commands off the data path (INFO, SCAN, CLUSTER SHARDS,
// ...): Status and Error keep their text in str, Bulk its payload, Integer and
// Array their n, Array its elements.
struct RespValue {
  RespReader::Kind kind = RespReader::Kind::Nil;
  std::string str;
  std::int64_t n = 0;
  std::vector<RespValue> elements;

  bool is_error() const { return kind == RespReader::Kind::Error; }
};

// Reads one whole reply. Bulk strings up to 512 MiB (Redis's own bound), arrays
// nested up to 8 deep and up to 1M elements in all: a peer that sends more is
// not a Redis this tier reads.
RespError read_reply(RespReader& reader, RespSocket s, RespValue* out) noexcept;

// Appends the RESP of a command (an array of bulk strings) to out.
void append_command(std::string& out, std::initializer_list<std::string_view> args);
// "$<n>\r\n": a bulk string's head.
void append_bulk_head(std::string& out, std::size_t n);

}  // namespace ferry::xfer::store
