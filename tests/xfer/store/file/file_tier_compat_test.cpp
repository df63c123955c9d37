// The on-disk format stays readable: a directory written by an earlier build
// (fixtures/file_tier_v1, made by fixtures/make_file_tier_v1.sh) opens, lists,
// reads and verifies exactly what that build stored, and takes new objects.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "xfer/store/file/file_tier.h"
#include "xfer/store/file/file_tier_test_util.h"
#include "xfer/store/store_test_util.h"

#ifndef FERRY_FILE_TIER_FIXTURE
#error "FERRY_FILE_TIER_FIXTURE must name tests/xfer/store/fixtures/file_tier_v1"
#endif

namespace ferry::xfer::store {
namespace {

using namespace file_test;
using test::get_one;
using test::put_one;
using test::remove_one;
using test::TempDir;

// make_file_tier_v1.sh's pattern(i, n): byte j is (j * 31 + i * 7 + 1) mod 256.
std::vector<std::uint8_t> pattern(int i, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  for (std::size_t j = 0; j < n; ++j) out[j] = static_cast<std::uint8_t>((j * 31 + i * 7 + 1) & 255);
  return out;
}

// What the fixture holds: key-0..9 with sizes below, key-1 and key-8
// overwritten, key-2 and key-9 removed. The agent stored them as "u0/<key>".
std::map<std::string, std::vector<std::uint8_t>> expected() {
  const std::size_t sizes[] = {1, 100, 4095, 4096, 4097, 9000, 12000, 16384, 20000, 40000};
  std::map<std::string, std::vector<std::uint8_t>> want;
  for (int i = 0; i < 10; ++i) want["u0/key-" + std::to_string(i)] = pattern(i, sizes[i]);
  want["u0/key-1"] = pattern(11, 3000);
  want["u0/key-8"] = pattern(12, 30000);
  want.erase("u0/key-2");
  want.erase("u0/key-9");
  return want;
}

FileTierOptions fixture_options(const std::string& dir) {
  FileTierOptions o;
  o.dir = dir;
  o.pack_threshold = 16 << 10;  // as the fixture was made (pack=16KiB)
  return o;
}

TEST(FileTierCompat, ReadsADirectoryWrittenByTheV1Build) {
  TempDir tmp;
  const std::string dir = tmp.sub("tier");
  // A copy: the tier takes a lock file, may compact and rewrites its tombstone log.
  std::filesystem::copy(FERRY_FILE_TIER_FIXTURE, dir, std::filesystem::copy_options::recursive);
  const auto want = expected();
  {
    FileTier t(fixture_options(dir));
    auto listed = list_of(t);
    std::sort(listed.begin(), listed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    ASSERT_EQ(listed.size(), want.size());
    auto w = want.begin();
    for (const auto& [key, meta] : listed) {
      EXPECT_EQ(key, w->first);
      EXPECT_EQ(meta.size, w->second.size()) << key;
      ++w;
    }
    for (const auto& [key, bytes] : want) {
      const auto got = get_one(t, key, 64 << 10);
      ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;  // verified against its checksum
      EXPECT_EQ(got.data, bytes) << key;
    }
    for (const char* gone : {"u0/key-2", "u0/key-9"}) {
      const auto got = get_one(t, gone);
      EXPECT_EQ(got.status, XferStatus::NotFound) << gone;
      EXPECT_EQ(got.error, "") << "a miss is not a fault";
    }
    // It still takes new objects, packed and not, and removes.
    ASSERT_EQ(put_one(t, "new/small", pattern(20, 5000)), XferStatus::Ok);
    ASSERT_EQ(put_one(t, "new/large", pattern(21, 50000)), XferStatus::Ok);
    ASSERT_EQ(put_one(t, "u0/key-3", pattern(22, 777)), XferStatus::Ok);  // an overwrite
    EXPECT_EQ(get_one(t, "new/small").data, pattern(20, 5000));
    EXPECT_EQ(get_one(t, "new/large").data, pattern(21, 50000));
    ASSERT_TRUE(remove_one(t, "u0/key-0"));
    ASSERT_TRUE(remove_one(t, "new/large"));
  }
  FileTier again(fixture_options(dir));
  auto now = want;
  now.erase("u0/key-0");
  now["u0/key-3"] = pattern(22, 777);
  now["new/small"] = pattern(20, 5000);
  EXPECT_EQ(list_of(again).size(), now.size());
  for (const auto& [key, bytes] : now) {
    const auto got = get_one(again, key, 64 << 10);
    ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
    EXPECT_EQ(got.data, bytes) << key;
  }
  EXPECT_EQ(get_one(again, "u0/key-0").status, XferStatus::NotFound);
  EXPECT_EQ(get_one(again, "new/large").status, XferStatus::NotFound);
  EXPECT_EQ(get_one(again, "u0/key-9").status, XferStatus::NotFound);
}

}  // namespace
}  // namespace ferry::xfer::store
