#pragma once
// Handlers: the per-message work, written once for every backend. A handler is
// any type with
//
//   FERRY_HOST_DEVICE std::size_t operator()(ferry::ByteView in, ferry::MutableByteView out) const;
//
// which writes the response into out (out.size bytes of room, at least in.size)
// and returns its length. It must not allocate, block or throw: on the GPU
// backends it runs inside a kernel.
//
// A handler may also offer a cooperative form, used by the GPU backends where a
// warp shares one message (the serial form otherwise runs on one lane):
//
//   FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out,
//                                            unsigned rank, unsigned group) const;
//
// Each of `group` threads calls it with its own `rank`; all must return the same length.
//
// A handler is an ordinary value type (the GPU backends pass it to kernels by
// value, so it must be trivially copyable); it may carry parameters, such as a
// device pointer to a table. `static constexpr const char* kName` names it in
// logs. The built-in handlers below are served through exactly the route a
// user's handler takes: make_cpu_backend() (cpu_backend.h) and
// FERRY_CUDA_HANDLER (cuda/handler_backend.cuh).

#include <cstddef>

#include <cstdint>

#include "ferry/core/bytes.h"

#if !defined(__CUDA_ARCH__)
#include <chrono>
#include <thread>
#endif

namespace ferry::worker {

// The name a handler gives itself (kName), or "custom".
template <typename Handler>
constexpr const char* handler_name() {
  if constexpr (requires { Handler::kName; })
    return Handler::kName;
  else
    return "custom";
}

namespace detail {

struct alignas(16) Word128 {
  std::uint32_t x, y, z, w;
};

FERRY_HOST_DEVICE inline std::uint32_t bswap32(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(v, 0, 0x0123);
#else
  return __builtin_bswap32(v);
#endif
}

FERRY_HOST_DEVICE inline bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

// True when a message can move in 16-byte words: its size is a multiple of 16
// and both buffers are 16-byte aligned (channel slots always are).
FERRY_HOST_DEVICE inline bool word_sized(ByteView in, MutableByteView out) {
  return in.size % 16 == 0 && aligned16(in.data) && aligned16(out.data);
}

}  // namespace detail

// The reference application's work: the payload bytes in reverse order.
struct Reverse {
  static constexpr const char* kName = "reverse";

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i) out[i] = in[in.size - 1 - i];
    return in.size;
  }

  // Cooperative form: 16-byte words when the size allows (slots are 16-byte
  // aligned), so a warp moves a 1 KiB message in two coalesced loads per lane
  // instead of 32 byte loads.
  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out, unsigned rank,
                                           unsigned group) const {
    const std::size_t n = in.size;
    if (detail::word_sized(in, out)) {
      const auto* src = reinterpret_cast<const detail::Word128*>(in.data);
      auto* dst = reinterpret_cast<detail::Word128*>(out.data);
      const std::size_t words = n / 16;
      for (std::size_t j = rank; j < words; j += group) {
        const detail::Word128 v = src[words - 1 - j];
        dst[j] = {detail::bswap32(v.w), detail::bswap32(v.z), detail::bswap32(v.y), detail::bswap32(v.x)};
      }
    } else {
      for (std::size_t i = rank; i < n; i += group) out[i] = in[n - 1 - i];
    }
    return n;
  }
};

// The payload unchanged: isolates the cost of the channels from the work.
struct Echo {
  static constexpr const char* kName = "echo";

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i) out[i] = in[i];
    return in.size;
  }

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out, unsigned rank,
                                           unsigned group) const {
    const std::size_t n = in.size;
    if (detail::word_sized(in, out)) {
      const auto* src = reinterpret_cast<const detail::Word128*>(in.data);
      auto* dst = reinterpret_cast<detail::Word128*>(out.data);
      for (std::size_t j = rank; j < n / 16; j += group) dst[j] = src[j];
    } else {
      for (std::size_t i = rank; i < n; i += group) out[i] = in[i];
    }
    return n;
  }
};

// The packet path's work (l2fwd): an Ethernet frame with its destination and
// source MAC addresses swapped; the rest unchanged. Frames shorter than the two
// addresses come back unchanged. It works in place (out.data == in.data, as the
// packet path calls it): each byte pair is read whole before either is written.
struct MacSwap {
  static constexpr const char* kName = "macswap";
  static constexpr std::size_t kMacBytes = 6;

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    return (*this)(in, out, 0, 1);
  }

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out, unsigned rank,
                                           unsigned group) const {
    const bool swap = in.size >= 2 * kMacBytes;
    const std::size_t swapped = swap ? 2 * kMacBytes : 0;
    for (std::size_t i = rank; i < kMacBytes && swap; i += group) {
      const std::uint8_t dst = in[i], src = in[i + kMacBytes];
      out[i] = src;
      out[i + kMacBytes] = dst;
    }
    if (out.data != in.data)
      for (std::size_t i = swapped + rank; i < in.size; i += group) out[i] = in[i];
    return in.size;
  }
};

// Fault injection for testing what watches the workers: echoes every request,
// except one that starts with "FERRY-STALL", on which it never returns (it
// ignores the stop flag, as a truly hung kernel would). `--handler stall`; the
// hang tests use it, and so can anyone checking their own monitoring.
struct StallOnMarker {
  static constexpr const char* kName = "stall";

  FERRY_HOST_DEVICE static bool marked(ByteView in) {
    // A string literal, not a static array member: device code can read literals.
    const char* marker = "FERRY-STALL";
    for (std::size_t i = 0; marker[i] != '\0'; ++i)
      if (i >= in.size || in[i] != static_cast<std::uint8_t>(marker[i])) return false;
    return true;
  }

  FERRY_HOST_DEVICE static void hang() {
    volatile bool forever = true;  // volatile: an empty infinite loop would be undefined behaviour
    while (forever) {
#if defined(__CUDA_ARCH__)
      __nanosleep(100000);
#else
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
#endif
    }
  }

  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    if (marked(in)) hang();
    return Echo{}(in, out);
  }
};

}  // namespace ferry::worker
