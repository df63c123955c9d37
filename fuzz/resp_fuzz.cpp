// The Redis tier's RESP reader (src/xfer/store/resp_io.cpp) on the bytes a
// server sends: a Redis server is a peer too, and may be another user's, or not
// Redis at all.
//
// Input: one byte of options (bit 0: discard bulk payloads, as the tier does for
// a value it does not want), then the reply stream. The reader reads the stream
// from a memfd: read(2) there returns what is asked for, as a socket with that
// much buffered does, and the stream is deterministic (a socket written from a
// thread would not be), so a crash replays. Beside ASan/UBSan, it checks the
// reader against a model of RESP written here independently: each reply's kind,
// text, integer and payload, the error where the model says the stream goes
// wrong, and after each reply that what the reader consumed (the memfd's offset
// less what it buffers) is where the model is.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "xfer/store/redis/resp_io.h"

using ferry::xfer::store::RespReader;

namespace {

// RESP's integers: an optional '-' then decimal digits, in int64 range.
std::optional<std::int64_t> model_integer(std::string_view s) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  // Accumulate as a negative number: its range is one wider.
  std::int64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_sub_overflow(v, c - '0', &v)) return std::nullopt;
  }
  if (negative) return v;
  if (v == INT64_MIN) return std::nullopt;
  return -v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool discard = data[0] & 1;
  const std::string_view s(reinterpret_cast<const char*>(data + 1), size - 1);
  // The reader grows its line buffer to 1 MiB: keep the model out of that corner.
  if (s.size() > 512 * 1024) return 0;

  const int fd = memfd_create("resp-fuzz", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(s.empty() || write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);
  const auto consumed = [&](const RespReader& r) {
    return static_cast<std::size_t>(lseek(fd, 0, SEEK_CUR)) - r.buffered();
  };

  RespReader reader;
  std::size_t pos = 0;  // the model's place in s
  std::vector<char> payload;
  for (;;) {
    RespReader::Head head;
    const ferry::xfer::store::RespError err = reader.read_head(fd, &head);
    const std::size_t nl = s.find('\n', pos);
    if (nl == std::string_view::npos || nl - pos < 2 || s[nl - 1] != '\r') {
      FUZZ_CHECK(err.failed());  // end of stream, or a line not ended by \r\n
      break;
    }
    const char type = s[pos];
    const std::string_view text = s.substr(pos + 1, nl - 1 - (pos + 1));
    pos = nl + 1;
    if (type == '+' || type == '-') {
      FUZZ_CHECK(!err.failed());
      FUZZ_CHECK(head.kind == (type == '+' ? RespReader::Kind::Status : RespReader::Kind::Error));
      FUZZ_CHECK(head.text == text);
      FUZZ_CHECK(consumed(reader) == pos);
      continue;
    }
    if (type != ':' && type != '$' && type != '*') {
      FUZZ_CHECK(err.failed());
      break;
    }
    const std::optional<std::int64_t> n = model_integer(text);
    if (!n) {
      FUZZ_CHECK(err.failed());
      break;
    }
    FUZZ_CHECK(!err.failed());
    FUZZ_CHECK(head.n == *n);
    FUZZ_CHECK(consumed(reader) == pos);
    if (type == ':') {
      FUZZ_CHECK(head.kind == RespReader::Kind::Integer);
      continue;
    }
    if (type == '*') {  // an array's head: its elements are the replies that follow
      FUZZ_CHECK(head.kind == (*n < 0 ? RespReader::Kind::Nil : RespReader::Kind::Array));
      continue;
    }
    if (*n < 0) {
      FUZZ_CHECK(head.kind == RespReader::Kind::Nil);
      continue;
    }
    FUZZ_CHECK(head.kind == RespReader::Kind::Bulk);
    const auto len = static_cast<std::uint64_t>(*n);
    const std::size_t left = s.size() - pos;
    if (len > left) {
      // Cut short: the reader must say so (discarding: no buffer of len bytes).
      FUZZ_CHECK(reader.read_payload(fd, nullptr, len).failed());
      break;
    }
    if (discard) {
      FUZZ_CHECK(!reader.read_payload(fd, nullptr, len).failed());
    } else {
      payload.assign(len + 1, '\x5a');  // one guard byte past the payload
      FUZZ_CHECK(!reader.read_payload(fd, payload.data(), len).failed());
      FUZZ_CHECK(std::memcmp(payload.data(), s.data() + pos, len) == 0);
      FUZZ_CHECK(payload[len] == '\x5a');
    }
    pos += len;
    FUZZ_CHECK(consumed(reader) == pos);
    const ferry::xfer::store::RespError crlf = reader.read_crlf(fd);
    if (s.size() - pos < 2 || s[pos] != '\r' || s[pos + 1] != '\n') {
      FUZZ_CHECK(crlf.failed());
      break;
    }
    FUZZ_CHECK(!crlf.failed());
    pos += 2;
    FUZZ_CHECK(consumed(reader) == pos);
  }
  ::close(fd);
  return 0;
}
