#pragma once
// Helpers shared by the storage tier tests: temporary directories, random
// objects, and one-item put/get wrappers.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ferry/xfer/checksum.h"
#include "ferry/xfer/tier.h"

namespace ferry::xfer::store::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ferry-store-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> out(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<std::uint8_t>(rng());
  return out;
}

// Field by field: brace-initialising only some fields trips -Wmissing-field-initializers.
inline PutItem put_item(std::string_view key, ByteView data, std::uint64_t sum) {
  PutItem item;
  item.key = key;
  item.data = data;
  item.checksum = sum;
  return item;
}
inline PutItem put_item(std::string_view key, const std::vector<std::uint8_t>& data) {
  return put_item(key, {data.data(), data.size()}, checksum({data.data(), data.size()}));
}
inline GetItem get_item(std::string_view key, MutableByteView out) {
  GetItem item;
  item.key = key;
  item.out = out;
  return item;
}

// Tier, TierChain, or anything with their put/get/remove.
template <class Store>
XferStatus put_one(Store& store, std::string_view key, const std::vector<std::uint8_t>& data,
                   std::string* error = nullptr) {
  PutItem item = put_item(key, data);
  Fault fault;
  store.put({&item, 1}, fault);
  if (error != nullptr) *error = fault.detail();
  return item.status;
}

struct GetResult {
  XferStatus status = XferStatus::InProgress;
  std::vector<std::uint8_t> data;
  std::string error;
  int tier = -1;
};

// Reads into a buffer of `capacity` bytes (default: generous) and trims it to the object's size.
template <class Store>
GetResult get_one(Store& store, std::string_view key, std::size_t capacity = 4 << 20) {
  GetResult r;
  r.data.resize(capacity);
  GetItem item = get_item(key, {r.data.data(), r.data.size()});
  Fault fault;
  store.get({&item, 1}, fault);
  r.status = item.status;
  r.error = fault.detail();
  r.tier = item.tier;
  r.data.resize(item.status == XferStatus::Ok ? item.size : 0);
  return r;
}

// remove() for a test that only asks whether the key went (Ok).
template <class Store>
bool remove_one(Store& store, std::string_view key, std::string* error = nullptr) {
  Fault fault;
  const XferStatus s = store.remove(key, fault);
  if (error != nullptr) *error = fault.detail();
  return s == XferStatus::Ok;
}

}  // namespace ferry::xfer::store::test
