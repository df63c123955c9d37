#pragma once
// How both redis tiers store an object: one Redis string under
// "<prefix><key>", its value a 32-byte header and then the bytes:
//
//   +0   magic     u64  "FERRYRV1" (little-endian)
//   +8   size      u64  object bytes (the value is 32 + size bytes long)
//   +16  checksum  u64  the object's checksum (checksum.h)
//   +24  flags     u64  1: the checksum is checksum()'s; 0 in values of older
//                       builds, whose checksum is XXH3-64 of all the bytes
//   +32  data
//
// An object is one value, written by one SET and read by one GET: Redis applies
// each atomically, so a reader gets all of an object or none of it, on one
// server as in a cluster (where the value lives in one slot). And here are the
// pieces of the pipelines both tiers write and read.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/xfer/fault.h"
#include "ferry/xfer/tier.h"
#include "xfer/store/redis/redis_conn.h"
#include "xfer/store/redis/resp_io.h"

namespace ferry::xfer::store {

inline constexpr std::uint64_t kValueMagic = 0x3156525952524546ull;  // "FERRYRV1"
inline constexpr std::size_t kValueHeader = 32;
inline constexpr const char* kHeaderLast = "31";    // GETRANGE <key> 0 31 reads the header
inline constexpr std::uint64_t kValueLeafSums = 1;  // the checksum is checksum()'s (checksum.h)
// A pipeline window: commands written before their replies are read. Bounded in
// bytes too, so that a batch of large objects does not sit in the socket's
// buffers all at once.
inline constexpr std::size_t kWindowItems = 128;
inline constexpr std::uint64_t kWindowBytes = 64ull << 20;

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
bool parse_header(const char* s, std::size_t len, ValueHeader* h) noexcept;

// The meta in a GETRANGE <key> 0 31 reply: nullopt for an absent key (an
// empty string) or a value that is not ours.
std::optional<ObjectMeta> header_meta(const RespValue& reply) noexcept;

// The status of an error reply. A Redis that is there but cannot answer yet
// says so with the first word: LOADING (it is reading its data set at start-up),
// BUSY (a script runs past its time limit), MASTERDOWN (a replica that lost its
// master), and in a cluster CLUSTERDOWN and TRYAGAIN; the caller should try
// again later, as when Redis is down: Unavailable. OOM (maxmemory reached,
// noeviction): NoSpace, so that the chain moves on. Any other error: IoError.
XferStatus error_reply_status(std::string_view text) noexcept;
// The message for an error reply to `command` on `key`.
std::string error_reply_message(const std::string& address, std::string_view command, std::string_view key,
                                std::string_view text);

// The commands of one pipeline window, written with one writev (resp_io.h).
struct Window {
  std::vector<iovec> iov;
  std::deque<std::string> text;  // command text the iovecs point into (a deque never moves it)
  std::vector<std::size_t> sent;
  std::uint64_t bytes = 0;

  void clear();
  std::string& add_text();
  void add(const void* p, std::size_t n);
  // A command of a few short arguments (ASKING, GET ...).
  void add_command(std::initializer_list<std::string_view> args);
  // SET <prefix><key> <header><data>: the data goes from the caller's buffer to
  // the socket, uncopied; *header must stay until the window is written.
  void add_set(std::string_view prefix, const PutItem& item, ValueHeader* header);
};

// Reads the reply to a GET of item.key into item.out and verifies it. Returns
// why the connection failed, if it did. Otherwise item.status is Ok, NotFound
// (not raised), or a failure it raised for the key (checksum, size, not ours,
// TooLarge) -- except for an error reply, whose text goes to *error_reply with
// item.status left as it was: the caller knows what it means (a redirect, in a
// cluster).
RespError read_get_reply(RespReader& reader, RespSocket s, GetItem& item, const std::string& address,
                         std::string_view prefix, Fault& fault, std::string* error_reply) noexcept;

// Every key "<prefix>*" on the server (SCAN), with its header (GETRANGE,
// pipelined), appended to *out as (key less the prefix, meta); values that are
// not ours are left out. Ok, or the status it raised: Unavailable when the
// connection failed (*lost: the caller drops it) or the server is not ready
// (LOADING ...), IoError for any other refusal.
XferStatus scan_headers(RedisConn& c, const std::string& address, std::string_view prefix,
                        std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault,
                        bool* lost) noexcept;

}  // namespace ferry::xfer::store
