// The DOCA wire parser (src/core/wire.cpp) on the bytes a client sends.
//
// Input: two bytes of --max-message-length (big-endian, 0..65535), then the
// stream. The stream is walked as the server's read loop walks it: frame after
// frame until one is refused or incomplete. Beside ASan/UBSan, it checks:
//  - over the prefixes of a frame, check_request says NeedMore until it has a
//    verdict, then keeps that verdict; a header error is known from the 8-byte
//    header (a length mismatch from the 12-byte prefix), before the body arrives;
//  - an accepted frame is a client_request within the limit, and
//    encode_data_prefix() writes its 12 header bytes back identically;
//  - a refusal names what is really wrong with the header, and maps to the
//    ferry_error code the server sends; encode_error() of it reads back.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ferry/core/wire.h"
#include "fuzz_check.h"

using namespace ferry::wire;

namespace {

FrameCheck check(const std::uint8_t* p, std::size_t avail, std::size_t max_len, std::uint32_t* len,
                 std::uint32_t* frame) {
  *len = *frame = 0xdeadbeef;
  return check_request(p, avail, max_len, len, frame);
}

void check_verdict(const std::uint8_t* p, std::size_t avail, std::size_t max_len, FrameCheck verdict,
                   std::uint32_t len, std::uint32_t frame) {
  const Header h = avail >= kHeaderSize ? decode_header(p) : Header{};
  switch (verdict) {
    case FrameCheck::NeedMore:
      FUZZ_CHECK(avail < kHeaderSize || avail < kRequestOverhead || avail < h.wire_size);
      return;
    case FrameCheck::Ok:
      FUZZ_CHECK(h.msg_id == static_cast<std::uint32_t>(MsgId::ClientRequest));
      FUZZ_CHECK(frame == h.wire_size && frame == kRequestOverhead + len);
      FUZZ_CHECK(frame <= avail && frame <= kHeaderSize + max_len);
      {
        std::uint8_t again[kRequestOverhead];
        FUZZ_CHECK(encode_data_prefix(again, len, MsgId::ClientRequest) == frame);
        FUZZ_CHECK(std::memcmp(again, p, kRequestOverhead) == 0);
      }
      return;
    case FrameCheck::UnexpectedMsgId:
      FUZZ_CHECK(h.msg_id != static_cast<std::uint32_t>(MsgId::ClientRequest));
      break;
    case FrameCheck::WireSizeTooSmall: FUZZ_CHECK(h.wire_size < kRequestOverhead); break;
    case FrameCheck::MessageTooLarge: FUZZ_CHECK(h.wire_size > kHeaderSize + max_len); break;
    case FrameCheck::LengthMismatch:
      FUZZ_CHECK(avail >= kRequestOverhead && load_be32(p + kHeaderSize) != h.wire_size - kRequestOverhead);
      break;
  }
  // A refusal: the code the server sends, and that message read back.
  const ErrorCode code = to_error_code(verdict);
  FUZZ_CHECK(code != ErrorCode::ProtocolError);
  const std::string reason(reinterpret_cast<const char*>(p), std::min<std::size_t>(avail, 40));
  const std::string msg = encode_error(code, reason);
  const auto* m = reinterpret_cast<const std::uint8_t*>(msg.data());
  FUZZ_CHECK(msg.size() == kRequestOverhead + reason.size());
  FUZZ_CHECK(decode_header(m).wire_size == msg.size());
  FUZZ_CHECK(decode_header(m).msg_id == static_cast<std::uint32_t>(MsgId::FerryError));
  FUZZ_CHECK(load_be32(m + kHeaderSize) == static_cast<std::uint32_t>(code));
  FUZZ_CHECK(msg.compare(kRequestOverhead, std::string::npos, reason) == 0);
  FUZZ_CHECK(std::string(to_string(code)) != "unknown");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t max_len = (std::size_t{data[0]} << 8) | data[1];
  data += 2;
  size -= 2;
  std::size_t pos = 0;
  for (;;) {
    const std::uint8_t* p = data + pos;
    const std::size_t avail = size - pos;
    std::uint32_t len, frame;
    const FrameCheck verdict = check(p, avail, max_len, &len, &frame);
    check_verdict(p, avail, max_len, verdict, len, frame);

    // Prefixes, in increasing length: NeedMore until the verdict, then the
    // verdict. Every short prefix, and those around the frame's end.
    std::vector<std::size_t> lengths;
    for (std::size_t k = 0; k <= kRequestOverhead + 4; ++k) lengths.push_back(k);
    if (verdict == FrameCheck::Ok) lengths.insert(lengths.end(), {frame - 1u, frame, frame + 1u});
    lengths.push_back(avail);
    std::sort(lengths.begin(), lengths.end());
    bool decided = false;
    for (const std::size_t k : lengths) {
      if (k > avail) break;
      std::uint32_t l, f;
      const FrameCheck r = check(p, k, max_len, &l, &f);
      if (r == FrameCheck::NeedMore) {
        FUZZ_CHECK(!decided);
        continue;
      }
      decided = true;
      FUZZ_CHECK(r == verdict);
      if (r == FrameCheck::Ok) FUZZ_CHECK(l == len && f == frame);
    }
    // Header errors are known from the header alone, before any of the body.
    if (verdict == FrameCheck::UnexpectedMsgId || verdict == FrameCheck::WireSizeTooSmall ||
        verdict == FrameCheck::MessageTooLarge)
      FUZZ_CHECK(check(p, kHeaderSize, max_len, &len, &frame) == verdict);
    if (verdict == FrameCheck::LengthMismatch)
      FUZZ_CHECK(check(p, kRequestOverhead, max_len, &len, &frame) == verdict);

    if (verdict != FrameCheck::Ok) break;
    pos += frame;
  }
  return 0;
}
