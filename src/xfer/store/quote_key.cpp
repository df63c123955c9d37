#include "xfer/store/quote_key.h"

#include <cstdio>

namespace ferry::xfer::store {

std::string quote_key(std::string_view key) {
  std::string out = "'";
  for (const char c : key) {
    if (out.size() > 200) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\' && c != '\'') {
      out.push_back(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    }
  }
  return out + "'";
}

}  // namespace ferry::xfer::store
