#pragma once
// Helpers shared by the file tier's tests: options, directory listings, byte
// flips, batch puts, and the (O_DIRECT, packs) parameters.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/full_disk.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store::file_test {

namespace fs = std::filesystem;
using test::random_bytes;

inline FileTierOptions opts(const std::string& dir, bool direct = false) {
  FileTierOptions o;
  o.dir = dir;
  o.direct = direct;
  o.queue_depth = 8;
  o.pack_threshold = 256 << 10;  // so that the tests' objects fall on both sides of it
  return o;
}

// A file per object, as before packs: for the tests of that format.
inline FileTierOptions unpacked(const std::string& dir) {
  FileTierOptions o = opts(dir);
  o.pack_threshold = 0;
  return o;
}

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::size_t temp_files_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& name : files_in(dir)) n += is_temp_file_name(name);
  return n;
}

inline void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

inline std::size_t packs_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& name : files_in(dir)) n += is_pack_file_name(name);
  return n;
}

inline std::uint64_t bytes_in(const std::string& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Puts every (key, data) in one call, from buffers `misalign` bytes past a page.
inline std::vector<XferStatus> put_batch(Tier& t, const std::vector<std::string>& keys,
                                  const std::vector<std::vector<std::uint8_t>>& data, int misalign = 0) {
  std::vector<AlignedBuffer> src(keys.size());
  std::vector<PutItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    src[i].resize(data[i].size() + misalign + 1);
    if (!data[i].empty()) std::memcpy(src[i].data() + misalign, data[i].data(), data[i].size());
    items.push_back(test::put_item(keys[i], {reinterpret_cast<std::uint8_t*>(src[i].data()) + misalign, data[i].size()},
                                   checksum({data[i].data(), data[i].size()})));
  }
  Fault fault;
  t.put(items, fault);
  std::vector<XferStatus> out;
  for (const auto& item : items) out.push_back(item.status);
  return out;
}


// Every object the tier holds (list() with a Fault that must stay clear).
inline std::vector<std::pair<std::string, ObjectMeta>> list_of(Tier& t) {
  std::vector<std::pair<std::string, ObjectMeta>> out;
  Fault fault;
  EXPECT_EQ(t.list(&out, fault), XferStatus::Ok) << fault.detail();
  return out;
}

// (O_DIRECT, packs): every test runs with objects in files of their own and with
// the small ones packed.
class FileTierModesBase : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  bool direct() const { return std::get<0>(GetParam()); }
  bool packs() const { return std::get<1>(GetParam()); }
  FileTierOptions options(const std::string& dir) const {
    FileTierOptions o = opts(dir, direct());
    if (!packs()) o.pack_threshold = 0;
    return o;
  }
  // Makes the tier, or skips when the file system refuses O_DIRECT (tmpfs).
  std::unique_ptr<FileTier> make(const std::string& dir) { return make(options(dir)); }
  std::unique_ptr<FileTier> make(const FileTierOptions& o) {
    try {
      return std::make_unique<FileTier>(o);
    } catch (const Error& e) {
      if (direct() && std::string(e.what()).find("O_DIRECT") != std::string::npos) return nullptr;
      throw;
    }
  }
};

inline std::string mode_name(const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
  return std::string(std::get<0>(info.param) ? "direct" : "buffered") + (std::get<1>(info.param) ? "_packs" : "_files");
}

}  // namespace ferry::xfer::store::file_test
