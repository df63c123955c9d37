#include "xfer/store/checksum.h"

#include <xxhash.h>

#include <cstdio>

namespace ferry::xfer::store {

std::uint64_t checksum(ByteView data) noexcept { return XXH3_64bits(data.data, data.size); }

std::string checksum_hex(std::uint64_t sum) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

}  // namespace ferry::xfer::store
