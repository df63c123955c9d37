#pragma once
// The frame: one message inside an aggregation buffer, a ring chunk or a
// delivery chunk. The same bytes travel app -> router -> MPI -> router -> app,
// so routers move whole frames with memcpy and never re-encode.
//
//   +0   dest     u32   destination application rank
//   +4   src      u32   sending application rank
//   +8   len      u32   payload bytes
//   +12  handler  u16   index into the destination's handler table
//   +14  magic    u16   kFrameMagic: a parser that lost its place stops at once
//   +16  payload  len bytes, padded to a multiple of 8 (typed payloads stay 8-byte aligned)

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ferry::route::detail {

inline constexpr std::uint16_t kFrameMagic = 0xF7A3;
inline constexpr std::size_t kFrameHeaderBytes = 16;

struct FrameHeader {
  std::uint32_t dest;
  std::uint32_t src;
  std::uint32_t len;
  std::uint16_t handler;
  std::uint16_t magic;
};
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes);
static_assert(offsetof(FrameHeader, handler) == 12);

// Bytes a frame of `len` payload bytes occupies.
constexpr std::uint32_t frame_bytes(std::uint32_t len) noexcept {
  return static_cast<std::uint32_t>(kFrameHeaderBytes) + ((len + 7u) & ~7u);
}

// Writes a frame at `at` (which has frame_bytes(len) bytes of room).
inline void write_frame(std::uint8_t* at, std::uint32_t dest, std::uint32_t src, std::uint16_t handler,
                        const void* payload, std::uint32_t len) noexcept {
  const FrameHeader h{dest, src, len, handler, kFrameMagic};
  std::memcpy(at, &h, sizeof h);
  if (len != 0) std::memcpy(at + kFrameHeaderBytes, payload, len);
}

// Reads the frame at data[off] of a buffer of `size` bytes; returns its total
// size, or 0 when the bytes there are not a whole, valid frame.
inline std::uint32_t read_frame(const std::uint8_t* data, std::size_t size, std::size_t off,
                                FrameHeader* h) noexcept {
  if (size - off < kFrameHeaderBytes) return 0;
  std::memcpy(h, data + off, sizeof *h);
  if (h->magic != kFrameMagic || h->len > size) return 0;
  const std::uint32_t fb = frame_bytes(h->len);
  if (fb > size - off) return 0;
  return fb;
}

// Copies a whole frame (a multiple of 8 bytes). Small frames, the common case,
// go by words the compiler keeps inline, instead of a call into memcpy.
inline void copy_frame(std::uint8_t* dst, const std::uint8_t* src, std::uint32_t bytes) noexcept {
  if (bytes <= 64) {
    for (std::uint32_t i = 0; i < bytes; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, src + i, 8);
      std::memcpy(dst + i, &w, 8);
    }
    return;
  }
  std::memcpy(dst, src, bytes);
}

}  // namespace ferry::route::detail
