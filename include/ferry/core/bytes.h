#pragma once
// Non-owning byte views usable in host and device code (std::span is not
// available in device code, so these are the minimal subset handlers need).

#include <cstddef>
#include <cstdint>

#include "ferry/core/host_device.h"

namespace ferry {

struct ByteView {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;

  FERRY_HOST_DEVICE constexpr const std::uint8_t& operator[](std::size_t i) const { return data[i]; }
  FERRY_HOST_DEVICE constexpr bool empty() const { return size == 0; }
};

struct MutableByteView {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;  // capacity the handler may write

  FERRY_HOST_DEVICE constexpr std::uint8_t& operator[](std::size_t i) const { return data[i]; }
};

}  // namespace ferry
