// The control link's messages (src/core/control_link.cpp) on the bytes a peer
// sends: the server reads them from the orchestrator and back.
//
// Input: the byte stream. Beside ASan/UBSan, it checks:
//  - body_size() refuses exactly the wire_sizes outside [8, 4096];
//  - decode() accepts exactly the messages the protocol defines (shutdown
//    messages with no body, consumer ids with 4 bytes, ferry_error with at least
//    4), and an accepted message re-encodes (encode(), wire::encode_error()) to
//    the same bytes;
//  - recv() on a socket carrying the stream returns those same messages, then
//    throws ferry::Error where the walk stopped (garbage, or the peer closing).
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/core/control_link.h"
#include "ferry/core/status.h"
#include "ferry/core/wire.h"
#include "fuzz_check.h"

using ferry::ControlLink;
using ferry::ControlMessage;
using namespace ferry::wire;

namespace {

bool defined(std::uint32_t id, std::size_t body_len) {
  switch (static_cast<MsgId>(id)) {
    case MsgId::StartShutdown:
    case MsgId::ShutdownComplete: return body_len == 0;
    case MsgId::ExchangeConsumerIdRequest:
    case MsgId::ExchangeConsumerIdResponse: return body_len == 4;
    case MsgId::FerryError: return body_len >= 4;
    default: return false;
  }
}

// The messages the stream starts with, up to the first it cannot decode.
std::vector<ControlMessage> walk(const std::uint8_t* data, std::size_t size) {
  std::vector<ControlMessage> out;
  std::size_t pos = 0;
  while (size - pos >= kHeaderSize) {
    const std::uint8_t* p = data + pos;
    const Header h = decode_header(p);
    std::size_t body_len = 0;
    try {
      body_len = ControlLink::body_size(p);
      FUZZ_CHECK(h.wire_size >= 8 && h.wire_size <= 4096 && body_len == h.wire_size - 8);
    } catch (const ferry::Error&) {
      FUZZ_CHECK(h.wire_size < 8 || h.wire_size > 4096);
      break;
    }
    if (size - pos - kHeaderSize < body_len) break;
    const std::uint8_t* body = p + kHeaderSize;
    ControlMessage m;
    try {
      m = ControlLink::decode(p, body, body_len);
    } catch (const ferry::Error&) {
      FUZZ_CHECK(!defined(h.msg_id, body_len));
      break;
    }
    FUZZ_CHECK(defined(h.msg_id, body_len));
    FUZZ_CHECK(m.fd == -1);
    const std::string again = m.id == MsgId::FerryError
                                  ? encode_error(static_cast<ErrorCode>(m.value), m.text)
                                  : ControlLink::encode(m.id, m.value);
    FUZZ_CHECK(again.size() == kHeaderSize + body_len);
    FUZZ_CHECK(std::memcmp(again.data(), p, again.size()) == 0);
    // A body of any other length than the header's is refused.
    if (body_len > 0) {
      bool refused = false;
      try {
        (void)ControlLink::decode(p, body, body_len - 1);
      } catch (const ferry::Error&) {
        refused = true;
      }
      FUZZ_CHECK(refused);
    }
    out.push_back(std::move(m));
    pos += kHeaderSize + body_len;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<ControlMessage> expected = walk(data, size);

  // The same stream through recv(). The socket's buffer holds it all (the
  // targets run with -max_len far below it), so one write and then EOF.
  if (size > 64 * 1024) return 0;
  int sv[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  FUZZ_CHECK(size == 0 || write(sv[0], data, size) == static_cast<ssize_t>(size));
  ::close(sv[0]);
  ControlLink link(sv[1]);
  std::size_t got = 0;
  for (;;) {
    std::optional<ControlMessage> m;
    try {
      m = link.recv(1000);
    } catch (const ferry::Error&) {
      break;  // garbage, or the peer closed: where the walk stopped
    }
    FUZZ_CHECK(m.has_value());  // never a timeout: the peer has closed
    FUZZ_CHECK(got < expected.size());
    const ControlMessage& e = expected[got++];
    FUZZ_CHECK(m->id == e.id && m->value == e.value && m->text == e.text && m->fd == -1);
  }
  FUZZ_CHECK(got == expected.size());
  return 0;
}
