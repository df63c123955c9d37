#pragma once
// Byte sizes as users write them in tier specs ("8GiB", "512M", "4096") and as
// messages print them.

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::xfer::store {

// "4096", "64K", "64KiB", "8G", "8GiB", "1.5GiB", "10GB". K/M/G/T and KiB/MiB/GiB/TiB
// are powers of 1024 (as in dd and fio); KB/MB/GB/TB are powers of 1000. Case
// of the unit is ignored. Throws ferry::Error naming `what` on anything else.
std::uint64_t parse_size(std::string_view text, std::string_view what);

// 8589934592 -> "8GiB", 1536 -> "1.5KiB", 100 -> "100B": short, for messages.
std::string format_size(std::uint64_t bytes);

}  // namespace ferry::xfer::store
