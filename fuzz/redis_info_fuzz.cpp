// The redis tier's reading of "INFO memory" (src/xfer/store/redis/redis_info.cpp):
// the reply's text comes from the server, a peer that may be another user's or
// not Redis at all. Beside ASan/UBSan: a figure the parser returns is written
// in the input, at the start of a line, as that field's plain decimal value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "xfer/store/redis/redis_info.h"

namespace {

// Whether `text` has a line "field:value" (ended by \r\n, \n or the end).
bool has_line(std::string_view text, std::string_view field, std::uint64_t value) {
  const std::string line = std::string(field) + ":" + std::to_string(value);
  for (std::size_t at = text.find(line); at != std::string_view::npos; at = text.find(line, at + 1)) {
    const bool starts = at == 0 || text[at - 1] == '\n';
    const std::string_view rest = text.substr(at + line.size());
    const bool ends = rest.empty() || rest[0] == '\n' || rest.substr(0, 2) == "\r\n";
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto m = ferry::xfer::store::parse_info_memory(text);
  if (m) {
    FUZZ_CHECK(has_line(text, "used_memory", m->used));
    FUZZ_CHECK(has_line(text, "maxmemory", m->max));
  }
  return 0;
}
