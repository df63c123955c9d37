#pragma once
// Handlers: the per-message work, written once for every backend. A handler is
// any type with
//
//   FERRY_HOST_DEVICE std::size_t operator()(ferry::ByteView in, ferry::MutableByteView out) const;
//
// which writes the response into out (out.size bytes of room, at least in.size)
// and returns its length. It must not allocate, block or throw: on the GPU
// backends it runs inside a kernel.

#include <cstddef>
#include <string>
#include <string_view>

#include "ferry/core/bytes.h"

namespace ferry::worker {

// The reference application's work: the payload bytes in reverse order.
struct Reverse {
  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i) out[i] = in[in.size - 1 - i];
    return in.size;
  }
};

// The payload unchanged: isolates the cost of the channels from the work.
struct Echo {
  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i) out[i] = in[i];
    return in.size;
  }
};

enum class HandlerKind { Reverse, Echo };

// "reverse" or "echo"; throws ferry::Error naming the choices otherwise.
HandlerKind parse_handler(std::string_view name);
const char* to_string(HandlerKind kind) noexcept;

}  // namespace ferry::worker
