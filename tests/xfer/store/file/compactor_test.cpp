// The compactor (compactor.h), through the tier it works for: packs rewritten,
// disk freed, small packs merged, the tombstone log shrunk, older builds'
// checksums re-summed, all while the tier is in use.

#include "xfer/store/file/compactor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <map>
#include <thread>

#include "xfer/store/file/pack_format.h"
#include "xfer/store/file/file_tier_test_util.h"
#include "xfer/store/store_stress.h"

namespace ferry::xfer::store {
namespace {

using namespace file_test;
using test::get_one;
using test::put_one;
using test::random_bytes;
using test::remove_one;
using test::TempDir;

class CompactionModes : public FileTierModesBase {};

TEST_P(CompactionModes, CompactionKeepsLiveObjectsAndFreesTheDisk) {
  if (!packs()) GTEST_SKIP() << "packs only";
  TempDir dir;
  auto o = options(dir.path());
  o.compact_min_dead = 0;  // compact as soon as dead bytes outweigh live ones
  std::map<std::string, std::vector<std::uint8_t>> live;
  {
    auto t = make(o);
    if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
    constexpr int kPacks = 8, kPerPack = 8;
    for (int p = 0; p < kPacks; ++p) {
      std::vector<std::string> keys;
      std::vector<std::vector<std::uint8_t>> data;
      for (int i = 0; i < kPerPack; ++i) {
        keys.push_back("c/" + std::to_string(p) + "/" + std::to_string(i));
        data.push_back(random_bytes(20000 + 100 * i, p * 100 + i));
      }
      for (auto s : put_batch(*t, keys, data)) ASSERT_EQ(s, XferStatus::Ok);
      for (int i = 0; i < kPerPack; ++i) live[keys[i]] = data[i];
    }
    const std::uint64_t before = bytes_in(dir.path());
    ASSERT_EQ(packs_in(dir.path()), 8u);
    // Remove 6 of 8 in every pack (and overwrite one more, elsewhere).
    for (int p = 0; p < kPacks; ++p)
      for (int i = 0; i < 6; ++i) {
        const std::string key = "c/" + std::to_string(p) + "/" + std::to_string(i);
        ASSERT_TRUE(remove_one(*t, key));
        live.erase(key);
      }
    ASSERT_EQ(put_one(*t, "c/0/7", live["c/0/7"] = random_bytes(999, 77)), XferStatus::Ok);
    t->compact();  // the background thread may have done it already; this waits for it
    const auto s = t->stats();
    EXPECT_GT(s.compactions, 0u);
    EXPECT_LE(s.pack_dead_bytes, s.pack_live_bytes);
    EXPECT_LE(packs_in(dir.path()), 4u);
    EXPECT_LT(bytes_in(dir.path()), before / 2) << "compaction freed the dead bytes";
    for (const auto& [key, data] : live) {
      const auto got = get_one(*t, key);
      ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
      EXPECT_EQ(got.data, data) << key;
    }
    EXPECT_EQ(get_one(*t, "c/3/1").status, XferStatus::NotFound);
  }
  auto t = make(o);
  EXPECT_EQ(list_of(*t).size(), live.size());
  for (const auto& [key, data] : live) EXPECT_EQ(get_one(*t, key).data, data) << key;
  EXPECT_EQ(get_one(*t, "c/3/1").status, XferStatus::NotFound) << "removed objects stay removed";
}

// The tombstone log keeps only what still hides a record: once compaction has
// dropped the pack that held the removed objects, their tombstones go too.
TEST(FilePacks, TheTombstoneLogShrinksWhenItsPacksAreGone) {
  TempDir dir;
  auto o = opts(dir.path());
  o.compact_min_dead = 0;
  constexpr int kObjects = 5000, kRemoved = 4600;
  {
    FileTier t(o);
    std::vector<std::string> keys;
    std::vector<std::vector<std::uint8_t>> data;
    for (int i = 0; i < kObjects; ++i) {
      keys.push_back("t/" + std::to_string(i));
      data.push_back(random_bytes(10, i));
    }
    for (auto st : put_batch(t, keys, data)) ASSERT_EQ(st, XferStatus::Ok);
    for (int i = 0; i < kRemoved; ++i) ASSERT_TRUE(remove_one(t, keys[i]));
    t.compact();
    // At most as many dead records as live ones are left in packs (the bound
    // compaction keeps), and only their tombstones.
    EXPECT_LE(t.stats().tombstones, static_cast<std::uint64_t>(kObjects - kRemoved))
        << "the removed objects' packs are gone, and so are their tombstones";
  }
  FileTier t(o);
  EXPECT_EQ(list_of(t).size(), static_cast<std::size_t>(kObjects - kRemoved));
  EXPECT_EQ(get_one(t, "t/0").status, XferStatus::NotFound);
  EXPECT_EQ(get_one(t, "t/4999").data, random_bytes(10, 4999));
}

// Many threads put, get, overwrite and remove small objects while compaction
// runs all the time behind them.
TEST(FilePacks, ConcurrentUseWithCompaction) {
  TempDir dir;
  auto o = opts(dir.path());
  o.compact_min_dead = 0;
  {
    FileTier t(o);
    test::StressParams p;
    p.ops_per_thread = 800;
    test::run_stress(t, p);
  }
  FileTier t(o);  // and what it left loads
  for (const auto& [key, meta] : list_of(t)) EXPECT_EQ(get_one(t, key).status, XferStatus::Ok) << key;
}


TEST_P(CompactionModes, CompactionMergesSmallPacks) {
  if (!packs()) GTEST_SKIP() << "about packs";
  TempDir dir;
  auto o = options(dir.path());
  o.compact_small_packs = 4;
  o.pack_max = 1 << 20;  // small: under 128 KiB
  std::map<std::string, std::vector<std::uint8_t>> data;
  std::uint64_t packs_after_compaction = 0;
  {
    auto t = make(o);
    if (!t) GTEST_SKIP() << "no O_DIRECT here";
    for (int call = 0; call < 30; ++call) {  // a pack per call, as the chain's evictions make them
      const std::string key = "e" + std::to_string(call);
      data[key] = random_bytes(1000 + 3000 * (call % 7), call);
      for (auto s : put_batch(*t, {key}, {data[key]})) ASSERT_EQ(s, XferStatus::Ok);
    }
    t->compact();
    const auto s = t->stats();
    EXPECT_LE(s.small_packs, 4u);
    // At most 4 small ones, plus merged ones of at least 128 KiB each, so
    // each holding well over 64 KiB of objects (the background thread may
    // have merged some while the puts went on).
    EXPECT_LE(s.packs - s.small_packs, s.pack_live_bytes / (o.pack_max / 16));
    EXPECT_LT(s.packs, 30u);
    packs_after_compaction = s.packs;
    EXPECT_GT(s.compactions, 0u);
    EXPECT_EQ(s.packed_objects, 30u);
    EXPECT_EQ(s.pack_dead_bytes, 0u);
    for (const auto& [key, bytes] : data) {
      const auto got = get_one(*t, key);
      ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
      EXPECT_EQ(got.data, bytes) << key;
    }
  }
  auto t = make(o);  // what the merges wrote survives a restart
  EXPECT_LE(t->stats().packs, packs_after_compaction);
  for (const auto& [key, bytes] : data) EXPECT_EQ(get_one(*t, key).data, bytes) << key;
}

// Rewrites the pack at path as a build before leaf checksums wrote it: header
// flags 0 and every record's checksum the XXH3-64 of all its bytes.
void make_older_build_pack(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  AlignedBuffer header(kPackHeaderSize);
  ASSERT_EQ(::pread(fd, header.data(), kPackHeaderSize, 0), static_cast<ssize_t>(kPackHeaderSize));
  PackHeader h{};
  ASSERT_EQ(decode_pack_header(header.data(), &h), "");
  std::vector<std::byte> index(h.index_size);
  ASSERT_EQ(::pread(fd, index.data(), index.size(), static_cast<off_t>(h.index_offset)),
            static_cast<ssize_t>(index.size()));
  std::vector<PackRecord> records;
  ASSERT_EQ(decode_pack_index(h, index.data(), &records), "");
  std::vector<std::byte> old_index;
  for (const auto& r : records) {
    std::vector<std::uint8_t> bytes(r.size);
    ASSERT_EQ(::pread(fd, bytes.data(), r.size, static_cast<off_t>(r.offset)), static_cast<ssize_t>(r.size));
    encode_pack_record(r.key, r.seq, r.offset, r.size, XXH3_64bits(bytes.data(), bytes.size()), &old_index);
  }
  encode_pack_header(h.seq, h.count, h.index_offset, old_index.data(), old_index.size(), header.data());
  PackHeader out;
  std::memcpy(&out, header.data(), sizeof(out));
  out.flags = 0;
  out.header_sum = 0;
  std::memcpy(header.data(), &out, sizeof(out));
  out.header_sum = XXH3_64bits(header.data(), kPackHeaderFixed);
  std::memcpy(header.data(), &out, sizeof(out));
  ASSERT_EQ(::pwrite(fd, old_index.data(), old_index.size(), static_cast<off_t>(h.index_offset)),
            static_cast<ssize_t>(old_index.size()));
  ASSERT_EQ(::pwrite(fd, header.data(), kPackHeaderSize, 0), static_cast<ssize_t>(kPackHeaderSize));
  ::close(fd);
}

TEST(FilePacks, AnOlderBuildsPackVerifiesWithItsOwnChecksumsAndCompactsToLeafChecksums) {
  TempDir dir;
  const std::vector<std::string> keys = {"a", "b", "c"};
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 3; ++i) data.push_back(random_bytes(200000 + 1000 * i, 60 + i));
  std::string pack;
  {
    FileTier t(opts(dir.path()));
    for (auto st : put_batch(t, keys, data)) ASSERT_EQ(st, XferStatus::Ok);
    pack = t.path_of("b");
    ASSERT_TRUE(ends_with(pack, ".fpk")) << pack;
  }
  make_older_build_pack(pack);
  FileTierOptions o = opts(dir.path());
  o.compact_min_dead = 1;
  FileTier t(o);
  ASSERT_TRUE(t.stat("b").has_value());
  EXPECT_TRUE(t.stat("b")->whole_sum);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(get_one(t, keys[i]).data, data[i]) << keys[i];
  // Two of three dead: compaction copies "c" into a new pack, with its leaf checksum.
  ASSERT_TRUE(remove_one(t, "a"));
  ASSERT_TRUE(remove_one(t, "b"));
  t.compact();
  EXPECT_NE(t.path_of("c"), pack) << "compacted into a new pack";
  EXPECT_FALSE(t.stat("c")->whole_sum);
  EXPECT_EQ(t.stat("c")->checksum, checksum({data[2].data(), data[2].size()}));
  EXPECT_EQ(get_one(t, "c").data, data[2]);
}


INSTANTIATE_TEST_SUITE_P(BufferedAndDirect, CompactionModes, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         mode_name);

}  // namespace
}  // namespace ferry::xfer::store
