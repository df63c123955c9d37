#pragma once
// Keys may hold any byte; messages print them quoted, with bytes outside
// printable ASCII as \xNN and long keys cut at 200 characters.

#include <string>
#include <string_view>

namespace ferry::xfer::store {

std::string quote_key(std::string_view key);

}  // namespace ferry::xfer::store
