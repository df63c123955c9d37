#pragma once
// The application's own work: upper-case the request. Written once, it runs on
// CPU threads and, where the example is built with CUDA, in GPU kernels.

#include <cstddef>

#include "ferry/core/bytes.h"
#include "ferry/core/host_device.h"

struct Upper {
  static constexpr const char* kName = "upper";

  FERRY_HOST_DEVICE std::size_t operator()(ferry::ByteView in, ferry::MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i)
      out[i] = (in[i] >= 'a' && in[i] <= 'z') ? static_cast<std::uint8_t>(in[i] - ('a' - 'A')) : in[i];
    return in.size;
  }
};
