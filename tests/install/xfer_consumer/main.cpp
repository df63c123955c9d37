// Stores one object in a dram tier made from its spec, reads it back and
// compares: ferry::xfer_store from the installed package's xfer component.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ferry/xfer/checksum.h"
#include "ferry/xfer/fault.h"
#include "ferry/xfer/tier.h"
#include "ferry/xfer/tier_registry.h"

using namespace ferry::xfer;

int main() {
  auto tier = store::make_tier("dram:1MiB");
  std::vector<std::uint8_t> object(4096);
  for (std::size_t i = 0; i < object.size(); ++i) object[i] = static_cast<std::uint8_t>(i * 7);
  ferry::ByteView data{object.data(), object.size()};

  Fault fault;
  store::PutItem put{.key = "layer0/block0", .data = data, .checksum = checksum(data)};
  tier->put({&put, 1}, fault);
  if (put.status != XferStatus::Ok) {
    std::fprintf(stderr, "xfer consumer: put: %s %s\n", to_string(put.status), fault.detail().c_str());
    return 1;
  }
  std::vector<std::uint8_t> back(object.size());
  store::GetItem get{.key = "layer0/block0", .out = {back.data(), back.size()}};
  tier->get({&get, 1}, fault);
  if (get.status != XferStatus::Ok || get.size != object.size() || back != object) {
    std::fprintf(stderr, "xfer consumer: get: %s %s\n", to_string(get.status), fault.detail().c_str());
    return 1;
  }
  std::printf("xfer consumer: %s stored and returned %zu bytes\n", tier->describe().c_str(), back.size());
  return 0;
}
