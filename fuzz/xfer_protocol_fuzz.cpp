// The agent protocol's framing and message decoders (src/xfer/protocol.cpp,
// src/xfer/messages.cpp) on the bytes a peer sends: the agent reads the
// application's messages, the application the agent's.
//
// Input: a stream of frames. Each frame the header check accepts is decoded as
// its type says. Beside ASan/UBSan, it checks:
//  - check_frame_header() refuses exactly the sizes outside [8, kMaxFrame] and
//    the types outside hello..call_error;
//  - an accepted body re-encodes to a frame whose header is right and that
//    decodes and re-encodes to itself; the re-encoded body is the received body
//    byte for byte (the decoders take only canonical encodings; HelloOk's flags
//    excepted: any non-zero byte reads as true); one byte less or more is refused;
//  - FrameSocket::recv() on a socket carrying the stream returns the same
//    frames, then std::nullopt where the stream ends cleanly, or throws
//    ferry::Error where the walk stopped.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/core/wire.h"
#include "fuzz_check.h"
#include "xfer/wire/messages.h"
#include "xfer/wire/protocol.h"

using namespace ferry::xfer::proto;

namespace {

// decode() then encode(): the frame, or nullopt where the body is refused.
std::optional<std::string> reencode(Type type, std::string_view body) {
  switch (type) {
    case Type::Hello: {
      Hello m;
      if (!decode(body, &m)) return std::nullopt;
      return encode(m);
    }
    case Type::HelloOk: {
      HelloOk m;
      if (!decode(body, &m)) return std::nullopt;
      return encode(m);
    }
    case Type::Register: {
      RegisterMsg m;
      if (!decode(body, &m)) return std::nullopt;
      return encode(m);
    }
    case Type::RegisterOk: {
      RegisterOk m;
      if (!decode(body, &m)) return std::nullopt;
      return encode(m);
    }
    case Type::Transfer: {
      TransferMsg m;  // its keys are views of body: encoded before body goes
      if (!decode(body, &m)) return std::nullopt;
      return encode(m);
    }
    case Type::TransferDone: {
      TransferDone m;
      if (!decode(body, &m)) return std::nullopt;
      return encode(m);
    }
    case Type::ListReply:
    case Type::RemoveReply:
    case Type::ExistsReply:
    case Type::StatsReply:
    case Type::CallError: {
      CallReply m;
      if (!decode(type, body, &m)) return std::nullopt;
      return encode(type, m);
    }
    case Type::Deregister:
    case Type::List:
    case Type::Remove:
    case Type::Exists:
    case Type::Stats: {
      CallMsg m;
      if (!decode(type, body, &m)) return std::nullopt;
      return encode(type, m);
    }
  }
  FUZZ_CHECK(false && "check_frame_header let an unknown type through");
  return std::nullopt;
}

void check_body(Type type, std::string_view body) {
  const std::optional<std::string> frame = reencode(type, body);
  if (!frame) return;
  const auto* f = reinterpret_cast<const std::uint8_t*>(frame->data());
  FUZZ_CHECK(frame->size() >= kFrameHeader);
  FUZZ_CHECK(ferry::wire::load_be32(f) == frame->size());
  FUZZ_CHECK(ferry::wire::load_be32(f + 4) == static_cast<std::uint32_t>(type));
  Type t{};
  FUZZ_CHECK(check_frame_header(f, &t) == frame->size() - kFrameHeader && t == type);
  const std::string_view body2 = std::string_view(*frame).substr(kFrameHeader);
  if (type != Type::HelloOk) FUZZ_CHECK(body2 == body);
  const std::optional<std::string> again = reencode(type, body2);
  FUZZ_CHECK(again && *again == *frame);
  // Every message ends with a field it needs, and must fill its body exactly.
  if (!body.empty()) FUZZ_CHECK(!reencode(type, body.substr(0, body.size() - 1)));
  std::string longer(body);
  longer.push_back('\0');
  FUZZ_CHECK(!reencode(type, longer));
}

struct Expected {
  Type type;
  std::string_view body;
};

// The frames the stream starts with, up to the first refused or incomplete one;
// *clean_end when the stream ends exactly after the last of them; *cut_size the
// size of the frame the stream cuts short (0: none).
std::vector<Expected> walk(const std::uint8_t* data, std::size_t size, bool* clean_end,
                           std::size_t* cut_size) {
  std::vector<Expected> out;
  std::size_t pos = 0;
  *clean_end = false;
  *cut_size = 0;
  for (;;) {
    if (pos == size) {
      *clean_end = true;
      break;
    }
    if (size - pos < kFrameHeader) break;
    const std::uint8_t* p = data + pos;
    const std::uint32_t wire_size = ferry::wire::load_be32(p);
    const std::uint32_t wire_type = ferry::wire::load_be32(p + 4);
    const bool good = wire_size >= kFrameHeader && wire_size <= kMaxFrame &&
                      wire_type >= static_cast<std::uint32_t>(Type::Hello) &&
                      wire_type <= static_cast<std::uint32_t>(kLastType);
    Type type{};
    std::size_t body_len = 0;
    try {
      body_len = check_frame_header(p, &type);
    } catch (const ferry::Error&) {
      FUZZ_CHECK(!good);
      break;
    }
    FUZZ_CHECK(good && body_len == wire_size - kFrameHeader && static_cast<std::uint32_t>(type) == wire_type);
    if (size - pos - kFrameHeader < body_len) {
      *cut_size = body_len;
      break;
    }
    const std::string_view body(reinterpret_cast<const char*>(p + kFrameHeader), body_len);
    check_body(type, body);
    out.push_back({type, body});
    pos += kFrameHeader + body_len;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bool clean_end = false;
  std::size_t cut_size = 0;
  const std::vector<Expected> expected = walk(data, size, &clean_end, &cut_size);

  // The same stream through FrameSocket::recv(): one write (the socket's buffer
  // holds it: the targets run with -max_len far below it), then EOF. Not where
  // recv() would first allocate (and zero) a body of megabytes, only to find the
  // stream cut: that costs the fuzzer many inputs a second and teaches it nothing.
  if (size > 64 * 1024 || cut_size > (1u << 20)) return 0;
  int sv[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  FUZZ_CHECK(size == 0 || write(sv[0], data, size) == static_cast<ssize_t>(size));
  ::close(sv[0]);
  FrameSocket sock(sv[1]);
  std::size_t got = 0;
  bool threw = false;
  for (;;) {
    std::optional<Frame> f;
    try {
      f = sock.recv();
    } catch (const ferry::Error&) {
      threw = true;
      break;
    }
    if (!f) break;
    FUZZ_CHECK(got < expected.size());
    FUZZ_CHECK(f->type == expected[got].type && f->body == expected[got].body && f->fd == -1);
    ++got;
  }
  FUZZ_CHECK(got == expected.size());
  FUZZ_CHECK(threw == !clean_end);
  return 0;
}
