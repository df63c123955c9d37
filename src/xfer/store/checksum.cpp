#include "xfer/store/checksum.h"

#include <xxhash.h>

#include <cstdio>

namespace ferry::xfer::store {

#if defined(__x86_64__)
std::uint64_t checksum_avx2(const void* data, std::size_t size) noexcept;  // checksum_avx2.cpp
#endif

std::uint64_t checksum(ByteView data) noexcept {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return checksum_avx2(data.data, data.size);
#endif
  return XXH3_64bits(data.data, data.size);
}

std::string checksum_hex(std::uint64_t sum) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

}  // namespace ferry::xfer::store
