// The file tier as a Tier (file_tier.h): round trips in every mode, batches,
// restarts, damage, bad keys, capacity and disk-full errors, split calls.

#include "xfer/store/file/file_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "xfer/store/file/file_format.h"
#include "xfer/store/file/pack_format.h"
#include "xfer/store/file/file_tier_test_util.h"
#include "xfer/store/older_builds.h"
#include "xfer/store/store_stress.h"

namespace ferry::xfer::store {
namespace {

using namespace file_test;
using test::fill_the_disk;
using test::get_one;
using test::in_child;
using test::in_small_tmpfs;
using test::put_one;
using test::random_bytes;
using test::remove_one;
using test::TempDir;

using test::write_older_build_object_file;

class FileTierModes : public FileTierModesBase {};

TEST(FileTier, AnOlderBuildsObjectFileVerifiesWithItsOwnChecksum) {
  TempDir dir;
  const auto data = random_bytes(300000, 5);  // several leaves: the two checksums differ
  write_older_build_object_file(dir.path(), "old", data);
  FileTier t(unpacked(dir.path()));
  const auto meta = t.stat("old");
  ASSERT_TRUE(meta.has_value());
  EXPECT_TRUE(meta->whole_sum);
  EXPECT_EQ(meta->checksum, whole_checksum({data.data(), data.size()}));
  EXPECT_EQ(get_one(t, "old").data, data);
  // Still verified: a flipped byte is caught.
  flip_byte(dir.sub(object_file_name("old")), kFileHeaderSize + 200000);
  EXPECT_EQ(get_one(t, "old").status, XferStatus::ChecksumMismatch);
  // A new version is stored with leaf checksums.
  ASSERT_EQ(put_one(t, "old", data), XferStatus::Ok);
  EXPECT_FALSE(t.stat("old")->whole_sum);
  EXPECT_EQ(t.stat("old")->checksum, checksum({data.data(), data.size()}));
}


TEST_P(FileTierModes, RoundTripsEverySizeAlignedOrNot) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, (1 << 20) + 3};
  for (std::size_t n : sizes) {
    const auto data = random_bytes(n, n + 1);
    // Aligned and unaligned source and destination buffers take different paths
    // under O_DIRECT (in place, tail page, whole bounce).
    for (int misalign : {0, 1}) {
      const std::string key = "obj/" + std::to_string(n) + "/" + std::to_string(misalign);
      AlignedBuffer src(n + 1), dst(n + 4096 + 1);
      if (n > 0) std::memcpy(src.data() + misalign, data.data(), n);
      PutItem p = test::put_item(key, {reinterpret_cast<std::uint8_t*>(src.data()) + misalign, n},
                                 checksum({data.data(), n}));
      Fault put_fault;
      t->put({&p, 1}, put_fault);
      ASSERT_EQ(p.status, XferStatus::Ok) << put_fault.detail();
      if (!packs()) {
        EXPECT_EQ(fs::file_size(t->path_of(key)), kFileHeaderSize + n);
      }
      GetItem g = test::get_item(key, {reinterpret_cast<std::uint8_t*>(dst.data()) + misalign, n + 4096});
      Fault get_fault;
      t->get({&g, 1}, get_fault);
      ASSERT_EQ(g.status, XferStatus::Ok) << get_fault.detail();
      ASSERT_EQ(g.size, n);
      if (n > 0) {
        EXPECT_EQ(std::memcmp(dst.data() + misalign, data.data(), n), 0) << key;
      }
    }
  }
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
}

TEST_P(FileTierModes, BatchesLongerThanTheQueueDepth) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  constexpr int kItems = 37;  // queue depth 8: several rounds, and a partial one
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::string> keys;
  std::vector<PutItem> puts;
  for (int i = 0; i < kItems; ++i) {
    data.push_back(random_bytes(1000 * i + 7, i));
    keys.push_back("batch-" + std::to_string(i));
  }
  for (int i = 0; i < kItems; ++i) puts.push_back(test::put_item(keys[i], data[i]));
  puts[5].key = "";  // one bad item fails alone
  Fault put_fault;
  t->put(puts, put_fault);
  EXPECT_EQ(put_fault.status(), XferStatus::InvalidDesc) << "the bad item is raised: " << put_fault.detail();
  for (int i = 0; i < kItems; ++i)
    EXPECT_EQ(puts[i].status, i == 5 ? XferStatus::InvalidDesc : XferStatus::Ok) << i;

  std::vector<std::vector<std::uint8_t>> out(kItems, std::vector<std::uint8_t>(64 << 10));
  std::vector<GetItem> gets;
  for (int i = 0; i < kItems; ++i) gets.push_back(test::get_item(keys[i], {out[i].data(), out[i].size()}));
  gets[7].key = "missing";
  Fault get_fault;
  t->get(gets, get_fault);
  EXPECT_FALSE(get_fault.failed()) << "a miss is an answer, not a fault: " << get_fault.detail();
  for (int i = 0; i < kItems; ++i) {
    if (i == 5 || i == 7) {
      EXPECT_EQ(gets[i].status, XferStatus::NotFound) << i;
      continue;
    }
    ASSERT_EQ(gets[i].status, XferStatus::Ok) << get_fault.detail();
    out[i].resize(gets[i].size);
    EXPECT_EQ(out[i], data[i]);
  }
}

// A buffer too small for the object: TooLarge, with size set to the object's
// size (docs/xfer-tiers.md, section 7), so that the caller can retry with a buffer
// that fits; alone, in a batch, and for an object file replaced by one of
// another size behind the index's back.
TEST_P(FileTierModes, ATooSmallBufferIsTooLargeAndReportsTheObjectsSize) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const std::vector<std::string> keys = {"small", "page", "large"};
  const std::vector<std::vector<std::uint8_t>> data = {random_bytes(1000, 1), random_bytes(4096, 2),
                                                       random_bytes(300 << 10, 3)};
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(put_one(*t, keys[i], data[i]), XferStatus::Ok);
  for (const std::size_t room : {std::size_t{0}, std::size_t{1}, std::size_t{999}}) {
    std::vector<std::vector<std::uint8_t>> out(keys.size(), std::vector<std::uint8_t>(room + 1));
    std::vector<GetItem> gets;
    for (std::size_t i = 0; i < keys.size(); ++i)
      gets.push_back(test::get_item(keys[i], {out[i].data(), room}));
    Fault fault;
    t->get(gets, fault);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(gets[i].status, XferStatus::TooLarge) << keys[i] << " into " << room << ": " << fault.detail();
      EXPECT_EQ(gets[i].size, data[i].size()) << keys[i] << " into " << room << ": " << fault.detail();
    }
    // The first item's failure is the call's (the first error wins).
    EXPECT_EQ(fault.status(), XferStatus::TooLarge);
    EXPECT_EQ(fault.key(), keys[0]);
    EXPECT_NE(fault.detail().find(std::to_string(data[0].size())), std::string::npos) << fault.detail();
  }
}

INSTANTIATE_TEST_SUITE_P(BufferedAndDirect, FileTierModes, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         mode_name);

// ---- packs ---------------------------------------------------------------------

TEST_P(FileTierModes, MixedBatchesAroundThePackThreshold) {
  TempDir dir;
  auto o = options(dir.path());
  if (packs()) o.pack_threshold = 64 << 10;
  auto t = make(o);
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, (64 << 10) - 1, 64 << 10, (64 << 10) + 1, 100000, 7};
  for (int misalign : {0, 1, 512}) {
    std::vector<std::string> keys;
    std::vector<std::vector<std::uint8_t>> data;
    for (std::size_t n : sizes) {
      keys.push_back("mix/" + std::to_string(misalign) + "/" + std::to_string(n));
      data.push_back(random_bytes(n, n * 7 + misalign));
    }
    const auto st = put_batch(*t, keys, data, misalign);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(st[i], XferStatus::Ok) << keys[i];
      const bool packed = packs() && sizes[i] <= (64u << 10);
      EXPECT_TRUE(ends_with(t->path_of(keys[i]), packed ? ".fpk" : ".kv")) << keys[i] << " " << t->path_of(keys[i]);
    }
    std::vector<AlignedBuffer> dst(keys.size());
    std::vector<GetItem> gets;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      dst[i].resize(sizes[i] + misalign + 4096);
      gets.push_back(test::get_item(keys[i], {reinterpret_cast<std::uint8_t*>(dst[i].data()) + misalign, sizes[i] + 4096}));
    }
    Fault fault;
    t->get(gets, fault);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(gets[i].status, XferStatus::Ok) << keys[i] << ": " << fault.detail();
      ASSERT_EQ(gets[i].size, sizes[i]);
      if (sizes[i] > 0) {
        EXPECT_EQ(std::memcmp(dst[i].data() + misalign, data[i].data(), sizes[i]), 0) << keys[i];
      }
    }
  }
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
  if (packs()) {
    EXPECT_EQ(packs_in(dir.path()), 3u) << "one pack per put call";
  } else {
    EXPECT_EQ(packs_in(dir.path()), 0u);
  }
}

// What one mode writes, the other reads: both keep objects on page boundaries.
TEST(FilePacks, ADirectoryWrittenInOneModeReadsInTheOther) {
  TempDir dir;
  std::vector<std::string> keys = {"a", "b", "c"};
  std::vector<std::vector<std::uint8_t>> data = {random_bytes(5000, 1), random_bytes(70000, 2), random_bytes(1, 3)};
  {
    FileTier t(opts(dir.path(), false));
    for (auto s : put_batch(t, keys, data, 3)) ASSERT_EQ(s, XferStatus::Ok);
  }
  std::unique_ptr<FileTier> t;
  try {
    t = std::make_unique<FileTier>(opts(dir.path(), true));
  } catch (const Error&) {
    GTEST_SKIP() << "no O_DIRECT here";
  }
  for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(get_one(*t, keys[i]).data, data[i]) << keys[i];
}

// Versions of keys move between packs and object files; after a restart each
// key has the version it had before, removed keys stay removed.
TEST_P(FileTierModes, RestartKeepsTheNewestVersionAcrossPacksAndFiles) {
  if (!packs()) GTEST_SKIP() << "packs only";
  TempDir dir;
  const auto small = [](int seed) { return random_bytes(3000 + seed, seed); };
  const auto large = [](int seed) { return random_bytes((300 << 10) + seed, seed); };
  std::map<std::string, std::vector<std::uint8_t>> want;
  std::vector<std::string> gone;
  {
    auto t = make(dir.path());
    if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
    // A: packed, then a file. B: a file, then packed. C: packed twice, in two packs.
    ASSERT_EQ(put_batch(*t, {"A", "B", "C"}, {small(1), large(2), small(3)})[0], XferStatus::Ok);
    ASSERT_EQ(put_one(*t, "A", want["A"] = large(4)), XferStatus::Ok);
    ASSERT_EQ(put_one(*t, "B", want["B"] = small(5)), XferStatus::Ok);
    EXPECT_FALSE(fs::exists(dir.sub(object_file_name("B")))) << "the packed version replaced the file";
    ASSERT_EQ(put_one(*t, "C", want["C"] = small(6)), XferStatus::Ok);
    // D: packed, removed (a tombstone). E: packed twice, removed. F: packed,
    // then a file, then removed (the older packed copy still needs hiding).
    ASSERT_EQ(put_one(*t, "D", small(7)), XferStatus::Ok);
    ASSERT_EQ(put_one(*t, "E", small(8)), XferStatus::Ok);
    ASSERT_EQ(put_one(*t, "E", small(9)), XferStatus::Ok);
    ASSERT_EQ(put_one(*t, "F", small(10)), XferStatus::Ok);
    ASSERT_EQ(put_one(*t, "F", large(11)), XferStatus::Ok);
    // G: removed, then put again: the new version survives its old tombstone.
    ASSERT_EQ(put_one(*t, "G", small(12)), XferStatus::Ok);
    ASSERT_TRUE(remove_one(*t, "G"));
    ASSERT_EQ(put_one(*t, "G", want["G"] = small(13)), XferStatus::Ok);
    for (const char* k : {"D", "E", "F"}) {
      ASSERT_TRUE(remove_one(*t, k));
      gone.push_back(k);
    }
    EXPECT_FALSE(remove_one(*t, "D"));
    EXPECT_GT(t->stats().tombstones, 0u);
  }
  for (int round = 0; round < 2; ++round) {  // the second start reads the log the first rewrote
    auto t = make(dir.path());
    for (const auto& [key, data] : want) {
      const auto got = get_one(*t, key);
      ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
      EXPECT_EQ(got.data, data) << key << " (round " << round << ")";
    }
    for (const auto& key : gone) EXPECT_EQ(get_one(*t, key).status, XferStatus::NotFound) << key;
    EXPECT_EQ(list_of(*t).size(), want.size());
    EXPECT_EQ(t->lru_victims(1).at(0), "A") << "the order of writing survives the restart";
  }
}

// Object files written before sequence numbers (seq 0) are older than any pack.
TEST(FilePacks, AnOldObjectFileLosesToAPackedVersion) {
  TempDir dir;
  const auto packed = random_bytes(2000, 1);
  {
    FileTier t(opts(dir.path()));
    ASSERT_EQ(put_one(t, "k", packed), XferStatus::Ok);
  }
  const auto old = random_bytes(100, 2);
  {
    AlignedBuffer h(kFileHeaderSize);
    encode_file_header("k", old.size(), checksum({old.data(), old.size()}), 0, h.data());
    std::ofstream f(dir.sub(object_file_name("k")), std::ios::binary);
    f.write(reinterpret_cast<const char*>(h.data()), kFileHeaderSize);
    f.write(reinterpret_cast<const char*>(old.data()), static_cast<std::streamsize>(old.size()));
  }
  FileTier t(opts(dir.path()));
  EXPECT_EQ(get_one(t, "k").data, packed);
  EXPECT_FALSE(fs::exists(dir.sub(object_file_name("k")))) << "the superseded file is removed";
}

TEST(FilePacks, ACorruptedPackedObjectIsAChecksumMismatch) {
  TempDir dir;
  FileTier t(opts(dir.path()));
  const std::vector<std::string> keys = {"p0", "p1", "p2"};
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 3; ++i) data.push_back(random_bytes(10000, 40 + i));
  for (auto s : put_batch(t, keys, data)) ASSERT_EQ(s, XferStatus::Ok);
  const std::string pack = t.path_of("p1");
  ASSERT_TRUE(ends_with(pack, ".fpk")) << pack;
  // Objects start on page boundaries in batch order: p1 at 4096 + 12288.
  flip_byte(pack, kPackHeaderSize + io_round_up(10000) + 5000);
  const auto got = get_one(t, "p1");
  EXPECT_EQ(got.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(got.error.find("'p1'"), std::string::npos) << got.error;
  EXPECT_NE(got.error.find(pack), std::string::npos) << got.error;
  EXPECT_EQ(get_one(t, "p0").data, data[0]);
  EXPECT_EQ(get_one(t, "p2").data, data[2]);
}

// The bad pack may hold newer versions of anything older than it (a power cut
// can tear the newest pack while older packs still hold old versions): those
// keys are dropped, a miss rather than stale data; newer ones load.
TEST(FilePacks, APackWithABadIndexIsSkippedAndWhatIsOlderThanItDropped) {
  TempDir dir;
  const auto a = random_bytes(5000, 1), b = random_bytes(6000, 2), c = random_bytes(400000, 3);
  std::string bad_pack;
  {
    FileTier t(opts(dir.path()));
    ASSERT_EQ(put_one(t, "a", a), XferStatus::Ok);
    ASSERT_EQ(put_one(t, "b", b), XferStatus::Ok);
    ASSERT_EQ(put_one(t, "c", c), XferStatus::Ok);  // an object file
    bad_pack = t.path_of("b");
  }
  ASSERT_EQ(packs_in(dir.path()), 2u);
  {
    std::ifstream f(bad_pack, std::ios::binary);
    AlignedBuffer h(kPackHeaderSize);
    f.read(reinterpret_cast<char*>(h.data()), kPackHeaderSize);
    PackHeader ph{};
    ASSERT_EQ(decode_pack_header(h.data(), &ph), "");
    flip_byte(bad_pack, ph.index_offset + 41);  // in the key of its record
  }
  FileTier t(opts(dir.path()));
  EXPECT_EQ(get_one(t, "a").status, XferStatus::NotFound) << "older than the bad pack: it could be stale";
  EXPECT_EQ(get_one(t, "c").data, c) << "newer than the bad pack";
  EXPECT_EQ(get_one(t, "b").status, XferStatus::NotFound);
  EXPECT_TRUE(fs::exists(bad_pack)) << "a bad pack is left for inspection";
  // New packs never take the bad pack's name.
  ASSERT_EQ(put_one(t, "d", random_bytes(10, 4)), XferStatus::Ok);
  EXPECT_EQ(packs_in(dir.path()), 2u) << "the bad pack and d's; a's pack went with a";
}

TEST(FilePacks, LeftoversOfACrashedWriterAreRemoved) {
  TempDir dir;
  { FileTier t(opts(dir.path())); }
  std::ofstream(dir.sub(pack_file_name(9) + ".tmp.4242.7")) << "half a pack";
  std::ofstream(dir.sub(std::string(kTombstoneLogName) + ".tmp.4242.8")) << "half a log";
  EXPECT_TRUE(is_temp_file_name(pack_file_name(9) + ".tmp.4242.7"));
  FileTier t(opts(dir.path()));
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
  EXPECT_EQ(files_in(dir.path()), (std::vector<std::string>{".ferry-lock", kTombstoneLogName}));
}

TEST(FilePacks, ConcurrentBatches) {
  TempDir dir;
  auto o = opts(dir.path());
  o.compact_min_dead = 0;
  FileTier t(o);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (int round = 0; round < 30; ++round) {
        std::vector<std::string> keys;
        std::vector<std::vector<std::uint8_t>> data;
        for (int i = 0; i < 6; ++i) {
          keys.push_back("t" + std::to_string(th) + "/" + std::to_string((round * 6 + i) % 20));
          data.push_back(random_bytes(1000 + 777 * i, th * 1000 + round * 10 + i));
        }
        for (auto s : put_batch(t, keys, data)) bad += s != XferStatus::Ok;
        for (std::size_t i = 0; i < keys.size(); ++i) bad += get_one(t, keys[i]).data != data[i];
        if (round % 3 == 0) bad += !remove_one(t, keys[0]);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  t.compact();
  const auto s = t.stats();
  EXPECT_TRUE(s.pack_dead_bytes == 0 || s.pack_dead_bytes <= s.pack_live_bytes);
  for (const auto& [key, meta] : list_of(t)) EXPECT_EQ(get_one(t, key).status, XferStatus::Ok) << key;
}

// A buffered get call is split between threads (threads=): each item ends as
// it would unsplit, whichever part it fell into.
TEST(FileTier, ASplitGetSettlesEveryItemOfEveryPart) {
  TempDir dir;
  auto o = opts(dir.path());
  o.threads = 4;
  FileTier t(o);
  constexpr int kItems = 64;
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < kItems; ++i) {
    keys.push_back("split/" + std::to_string(i));
    // Packed and not (pack_threshold 256 KiB), some of several leaves.
    data.push_back(random_bytes(i % 8 == 0 ? (300 << 10) + i : 9000 * (i + 1), 500 + i));
  }
  for (auto s : put_batch(t, keys, data)) ASSERT_EQ(s, XferStatus::Ok);
  // One damaged object in the first part (keys[1], the pack's first object) and
  // one in the last (keys[50], a file of its own).
  ASSERT_TRUE(ends_with(t.path_of(keys[1]), ".fpk"));
  ASSERT_TRUE(ends_with(t.path_of(keys[50]), ".kv"));
  flip_byte(t.path_of(keys[1]), kPackHeaderSize + 5);
  flip_byte(t.path_of(keys[50]), kFileHeaderSize + 7);
  std::vector<std::vector<std::uint8_t>> out(kItems);
  std::vector<GetItem> gets;
  for (int i = 0; i < kItems; ++i) {
    out[i].resize(i == 33 ? 10 : data[i].size());
    const std::string_view key = i == 17 ? std::string_view("split/missing") : std::string_view(keys[i]);
    gets.push_back(test::get_item(key, {out[i].data(), out[i].size()}));
  }
  Fault fault;
  t.get(gets, fault);
  EXPECT_TRUE(fault.failed());
  for (int i = 0; i < kItems; ++i) {
    if (i == 17) {
      EXPECT_EQ(gets[i].status, XferStatus::NotFound) << fault.detail();
    } else if (i == 33) {
      EXPECT_EQ(gets[i].status, XferStatus::TooLarge) << fault.detail();
    } else if (i == 1 || i == 50) {
      EXPECT_EQ(gets[i].status, XferStatus::ChecksumMismatch) << fault.detail();
    } else {
      ASSERT_EQ(gets[i].status, XferStatus::Ok) << i << ": " << fault.detail();
      EXPECT_EQ(gets[i].size, data[i].size());
      EXPECT_EQ(out[i], data[i]) << i;
    }
  }
}

// A buffered put call with enough bytes writes a pack per thread; every object
// reads back, also after a restart. With a key given twice it is not split, and
// the later version wins.
TEST(FilePacks, ASplitPutWritesAPackPerThread) {
  TempDir dir;
  auto o = opts(dir.path());
  o.threads = 2;
  o.pack_threshold = 64 << 10;
  o.pack_max = 2 << 20;  // packs under 256 KiB are small: a call of 768 KiB splits
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 64; ++i) {
    keys.push_back("sp/" + std::to_string(i));
    data.push_back(random_bytes(10000 + i, 900 + i));
  }
  {
    FileTier t(o);
    for (auto s : put_batch(t, keys, data)) ASSERT_EQ(s, XferStatus::Ok);
    EXPECT_EQ(packs_in(dir.path()), 2u);
    EXPECT_NE(t.path_of(keys[0]), t.path_of(keys[63]));
    for (int i = 0; i < 64; ++i) EXPECT_EQ(get_one(t, keys[i]).data, data[i]) << i;

    std::vector<std::string> twice = keys;
    std::vector<std::vector<std::uint8_t>> newer = data;
    twice[60] = keys[3];  // keys[3] again, near the end: its second version must win
    newer[60] = random_bytes(12345, 77);
    for (auto s : put_batch(t, twice, newer)) ASSERT_EQ(s, XferStatus::Ok);
    EXPECT_EQ(t.path_of(keys[0]), t.path_of(keys[63])) << "a call with a key given twice is one pack";
    EXPECT_EQ(get_one(t, keys[3]).data, newer[60]);
  }
  FileTier again(o);
  for (int i = 0; i < 64; ++i) {
    if (i != 3) {
      EXPECT_EQ(get_one(again, keys[i]).data, data[i]) << i;
    }
  }
  EXPECT_EQ(get_one(again, keys[3]).data, random_bytes(12345, 77));
}

// The parts of a split put are balanced by bytes, not by count: big objects at
// the front of a call do not leave the last part a small pack.
TEST(FilePacks, ASplitPutBalancesItsPacksByBytes) {
  TempDir dir;
  auto o = opts(dir.path());
  o.threads = 2;
  o.pack_threshold = 64 << 10;
  o.pack_max = 2 << 20;  // packs under 256 KiB are small
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> data;
  // 480 KiB in 8 objects, then 256 KiB in 64: split by count, the second half
  // would be 144 KiB, a small pack.
  for (int i = 0; i < 72; ++i) {
    keys.push_back("bal/" + std::to_string(i));
    data.push_back(random_bytes(i < 8 ? 60 << 10 : 4 << 10, 300 + i));
  }
  FileTier t(o);
  for (auto s : put_batch(t, keys, data)) ASSERT_EQ(s, XferStatus::Ok);
  const auto st = t.stats();
  EXPECT_EQ(st.packs, 2u);
  EXPECT_EQ(st.small_packs, 0u);
  for (int i = 0; i < 72; ++i) EXPECT_EQ(get_one(t, keys[i]).data, data[i]) << i;
}

TEST(FileTier, SurvivesARestart) {
  TempDir dir;
  std::vector<std::vector<std::uint8_t>> data;
  {
    FileTier t(opts(dir.path()));
    for (int i = 0; i < 5; ++i) {
      data.push_back(random_bytes(5000 + i, 100 + i));
      ASSERT_EQ(put_one(t, "key" + std::to_string(i), data.back()), XferStatus::Ok);
    }
    ASSERT_TRUE(remove_one(t, "key4"));
  }
  // Leftovers of a crashed writer, and a file that is not ours.
  std::ofstream(dir.sub("key9.kv.tmp.4242.7")) << "half written";
  std::ofstream(dir.sub("junk.kv")) << "not a ferry object";
  FileTier t(opts(dir.path()));
  EXPECT_EQ(list_of(t).size(), 4u);
  EXPECT_EQ(t.used(), 5000u + 5001 + 5002 + 5003);
  for (int i = 0; i < 4; ++i) {
    const auto got = get_one(t, "key" + std::to_string(i));
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, data[i]);
  }
  EXPECT_EQ(get_one(t, "key4").status, XferStatus::NotFound);
  EXPECT_FALSE(fs::exists(dir.sub("key9.kv.tmp.4242.7"))) << "stale temporary files are removed";
  EXPECT_TRUE(fs::exists(dir.sub("junk.kv"))) << "bad files are skipped and left for inspection";
  EXPECT_EQ(t.lru_victims(1).at(0), "key0") << "the order of writing survives the restart";
}

TEST(FileTier, OneTierPerDirectory) {
  TempDir dir;
  FileTier a(opts(dir.path()));
  try {
    FileTier b(opts(dir.path()));
    FAIL() << "a second tier opened a locked directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
}

TEST(FileTier, CorruptedFileIsDetected) {
  TempDir dir;
  FileTier t(unpacked(dir.path()));
  const auto data = random_bytes(10000, 3);
  ASSERT_EQ(put_one(t, "victim", data), XferStatus::Ok);
  flip_byte(t.path_of("victim"), kFileHeaderSize + 1234);
  const auto got = get_one(t, "victim");
  EXPECT_EQ(got.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(got.error.find("'victim'"), std::string::npos) << got.error;
  EXPECT_NE(got.error.find(t.path_of("victim")), std::string::npos) << got.error;

  ASSERT_EQ(put_one(t, "header", data), XferStatus::Ok);
  flip_byte(t.path_of("header"), 30);  // inside the size/checksum fields
  EXPECT_EQ(get_one(t, "header").status, XferStatus::ChecksumMismatch);

  ASSERT_EQ(put_one(t, "short", data), XferStatus::Ok);
  fs::resize_file(t.path_of("short"), kFileHeaderSize + 100);
  const auto truncated = get_one(t, "short");
  EXPECT_EQ(truncated.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(truncated.error.find("truncated"), std::string::npos) << truncated.error;
}

TEST(FileTier, BadKeysStayInsideTheDirectory) {
  TempDir dir;
  const std::string inner = dir.sub("tier");
  FileTier t(opts(inner));
  const auto data = random_bytes(100, 1);
  std::string error;
  EXPECT_EQ(put_one(t, "", data, &error), XferStatus::InvalidDesc);
  EXPECT_EQ(put_one(t, std::string(kMaxFileKeyLength + 1, 'k'), data), XferStatus::InvalidDesc);
  const std::vector<std::string> keys = {"../x",
                                         "../../etc/passwd",
                                         "/abs",
                                         ".",
                                         "..",
                                         std::string("nul\0byte", 8),
                                         std::string(300, 'L'),
                                         std::string(kMaxFileKeyLength, 'M'),
                                         "\xff\xfe"};
  for (const auto& key : keys) {
    ASSERT_EQ(put_one(t, key, data), XferStatus::Ok) << key.size();
    EXPECT_EQ(fs::path(t.path_of(key)).parent_path(), fs::path(inner));
    EXPECT_EQ(get_one(t, key).data, data);
  }
  EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{"tier"}) << "nothing escaped the tier's directory";
  EXPECT_EQ(get_one(t, "x").status, XferStatus::NotFound);
}

TEST(FileTier, CapacityBoundIsNoSpace) {
  TempDir dir;
  auto o = opts(dir.path());
  o.capacity = 10000;
  FileTier t(o);
  ASSERT_EQ(put_one(t, "a", random_bytes(6000, 1)), XferStatus::Ok);
  std::string error;
  EXPECT_EQ(put_one(t, "b", random_bytes(6000, 2), &error), XferStatus::NoSpace);
  EXPECT_EQ(error, "") << "a full tier is an answer (the chain moves on), not a fault";
  ASSERT_TRUE(remove_one(t, "a"));
  EXPECT_EQ(put_one(t, "b", random_bytes(6000, 2)), XferStatus::Ok);
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
}

TEST(FileTier, RemovedBehindItsBackIsNotFound) {
  TempDir dir;
  FileTier t(unpacked(dir.path()));
  ASSERT_EQ(put_one(t, "gone", random_bytes(10, 1)), XferStatus::Ok);
  fs::remove(t.path_of("gone"));
  EXPECT_EQ(get_one(t, "gone").status, XferStatus::NotFound);
  EXPECT_FALSE(t.stat("gone")) << "the index forgets a file that vanished";
}

// Puts that hit a write limit: NoSpace, no temporary file left, and the tier
// still takes objects that fit.
int expect_no_space(const std::string& dir, std::size_t too_big, std::size_t fits) {
  try {
    FileTier t(opts(dir));
    std::string error;
    if (put_one(t, "big", random_bytes(too_big, 1), &error) != XferStatus::NoSpace) return 2;
    if (temp_files_in(dir) != 0) return 3;
    if (t.stat("big")) return 4;
    // The failed object's blocks return to the file system when the last reference
    // to its deleted temporary goes, and io_uring may hold one for a moment after
    // put() returns (seen once in CI on the 256 KiB tmpfs): allow half a second.
    bool stored = false;
    for (int attempt = 0; attempt < 50 && !stored; ++attempt) {
      stored = put_one(t, "small", random_bytes(fits, 2)) == XferStatus::Ok;
      if (!stored) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!stored) return 5;
    if (get_one(t, "small").status != XferStatus::Ok) return 6;
    return 0;
  } catch (...) {
    return 7;
  }
}

// EFBIG from RLIMIT_FSIZE is how an unprivileged test makes writes fail with "the
// file cannot grow": the tier maps it like ENOSPC.
TEST(FileTier, FileSizeLimitIsNoSpace) {
  TempDir dir;
  const int rc = in_child([&] {
    signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the writer instead of failing the write
    rlimit lim{64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 77;
    return expect_no_space(dir.path(), 1 << 20, 1000);
  });
  EXPECT_EQ(rc, 0);
}

// A real ENOSPC: a 256 KiB tmpfs in a private mount namespace (needs root, or
// CAP_SYS_ADMIN; skipped otherwise).
TEST(FileTier, DiskFullIsNoSpace) {
  TempDir dir;
  const int rc = in_small_tmpfs(dir.path(), "256k", [&] { return expect_no_space(dir.path(), 1 << 20, 1000); });
  if (rc == 77) GTEST_SKIP() << "cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(rc, 0);
}

// Removes that need a tombstone (a packed object; an object file that replaced
// a packed version) on a full disk: the tombstone cannot be written, so an
// acknowledged remove would come back after a restart with its old bytes (for
// the object file, with the older packed version's). Either the remove is
// refused (and the object stays, also after a restart), or it is acknowledged
// and stays removed; this tier refuses it, with NoSpace, raised. Returns 0 or
// which check failed.
int remove_on_a_full_disk(const std::string& dir) {
  try {
    auto o = opts(dir);
    o.pack_threshold = 16 << 10;
    const auto packed = random_bytes(10000, 1), older = random_bytes(9000, 2), newer = random_bytes(20000, 3);
    bool removed[2] = {false, false};
    std::string filler;
    {
      FileTier t(o);
      // One pack, which "keep" holds on to when the others are removed (an
      // emptied pack is unlinked, and its records with it).
      const auto st = put_batch(t, {"packed", "replaced", "keep"}, {packed, older, random_bytes(5000, 4)});
      if (st != std::vector<XferStatus>(3, XferStatus::Ok)) return 2;
      if (put_one(t, "replaced", newer) != XferStatus::Ok) return 4;  // an object file over the packed one
      if (t.path_of("packed").find(".fpk") == std::string::npos) return 5;
      if (t.path_of("replaced").find(".kv") == std::string::npos) return 6;
      filler = fill_the_disk(dir);
      if (filler.empty()) return 77;
      removed[0] = remove_one(t, "packed");
      removed[1] = remove_one(t, "replaced");
      // A remove that was refused leaves the object readable now.
      if (!removed[0] && get_one(t, "packed").data != packed) return 10;
      if (!removed[1] && get_one(t, "replaced").data != newer) return 11;
      if (removed[0] && get_one(t, "packed").status != XferStatus::NotFound) return 12;
      if (removed[1] && get_one(t, "replaced").status != XferStatus::NotFound) return 13;
      Fault fault;
      if (t.remove("packed", fault) != XferStatus::NoSpace || fault.status() != XferStatus::NoSpace) return 14;
      const std::string why = fault.detail();
      if (why.find(".ferry-tombstones") == std::string::npos ||
          why.find("'packed' is kept") == std::string::npos) {
        std::fprintf(stderr, "unclear message: %s\n", why.c_str());
        return 15;
      }
    }
    unlink(filler.c_str());  // room again for the restart's rewrite of the log
    {
      FileTier t(o);
      int rc = 0;
      const auto p = get_one(t, "packed"), r = get_one(t, "replaced");
      if (removed[0] && p.status != XferStatus::NotFound) {
        std::fprintf(stderr, "an acknowledged remove of 'packed' came back after the restart\n");
        rc = 20;
      }
      if (removed[1] && r.status != XferStatus::NotFound) {
        std::fprintf(stderr,
                     "an acknowledged remove of 'replaced' came back after the restart (its older, "
                     "packed version: %zu bytes)\n",
                     r.data.size());
        rc = 21;
      }
      if (!removed[0] && p.data != packed) rc = 22;
      if (!removed[1] && r.data != newer) rc = 23;
      if (rc != 0) return rc;
    }
    // What a chain (dram over this tier) does with the refused remove, and
    // with a put over the packed copy that stays, belongs with the chain's
    // tests (tests/xfer/store): these link only the file tier.
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 7;
  }
}

// A real ENOSPC, on a small tmpfs in a private mount namespace (needs root, or
// CAP_SYS_ADMIN; skipped otherwise).
TEST(FilePacks, ARemoveWhoseTombstoneCannotBeWrittenIsNotAcknowledged) {
  TempDir dir;
  const int rc = in_small_tmpfs(dir.path(), "1m", [&] { return remove_on_a_full_disk(dir.path()); });
  if (rc == 77) GTEST_SKIP() << "cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(rc, 0);
}

// A pack that hits the write limit fails its own items with NoSpace; the items of
// the batch's other packs are stored.
TEST(FilePacks, AWriteLimitFailsExactlyTheItemsOfThatPack) {
  TempDir dir;
  const int rc = in_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 77;
    try {
      auto o = opts(dir.path());
      o.pack_threshold = 32 << 10;
      o.pack_max = 64 << 10;
      FileTier t(o);
      // a and b fill one pack (64 KiB of objects + header + index > the limit);
      // c goes into a second pack, d gets a file of its own.
      const std::vector<std::string> keys = {"a", "b", "c", "d"};
      const std::vector<std::vector<std::uint8_t>> data = {random_bytes(30000, 1), random_bytes(30000, 2),
                                                           random_bytes(1000, 3), random_bytes(40000, 4)};
      const auto st = put_batch(t, keys, data);
      if (st[0] != XferStatus::NoSpace || st[1] != XferStatus::NoSpace) return 2;
      if (st[2] != XferStatus::Ok || st[3] != XferStatus::Ok) return 3;
      if (temp_files_in(dir.path()) != 0) return 4;
      if (t.stat("a") || t.stat("b")) return 5;
      if (get_one(t, "c").data != data[2] || get_one(t, "d").data != data[3]) return 6;
      if (t.used() != 41000) return 8;
      return 0;
    } catch (...) {
      return 7;
    }
  });
  EXPECT_EQ(rc, 0);
}


TEST_P(FileTierModes, MorePacksThanOpenDescriptors) {
  if (!packs()) GTEST_SKIP() << "about packs";
  TempDir dir;
  auto o = options(dir.path());
  o.open_packs = 2;
  std::map<std::string, std::vector<std::uint8_t>> data;
  {
    auto t = make(o);
    if (!t) GTEST_SKIP() << "no O_DIRECT here";
    for (int call = 0; call < 12; ++call) {  // a pack per call
      std::vector<std::string> keys;
      std::vector<std::vector<std::uint8_t>> values;
      for (int i = 0; i < 3; ++i) {
        keys.push_back("k" + std::to_string(call) + "/" + std::to_string(i));
        values.push_back(random_bytes(3000 + 5000 * i, call * 10 + i));
        data[keys.back()] = values.back();
      }
      for (auto s : put_batch(*t, keys, values)) ASSERT_EQ(s, XferStatus::Ok);
    }
    EXPECT_EQ(t->stats().packs, 12u);
    EXPECT_LE(t->stats().open_packs, 2u);
    for (const auto& [key, bytes] : data) {
      const auto got = get_one(*t, key);
      ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
      EXPECT_EQ(got.data, bytes) << key;
    }
    EXPECT_LE(t->stats().open_packs, 2u);
    EXPECT_GE(t->stats().pack_reopens, 10u);
    // Compaction reads its victims through the cache too.
    for (int call = 0; call < 12; call += 2) EXPECT_TRUE(remove_one(*t, "k" + std::to_string(call) + "/0"));
    t->compact();
    for (const auto& [key, bytes] : data) {
      const auto got = get_one(*t, key);
      if (key.ends_with("/0") && std::stoi(key.substr(1)) % 2 == 0) {
        EXPECT_EQ(got.status, XferStatus::NotFound) << key;
      } else {
        ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
        EXPECT_EQ(got.data, bytes) << key;
      }
    }
  }
  auto t = make(o);  // the start-up scan keeps at most open_packs open too
  EXPECT_LE(t->stats().open_packs, 2u);
  EXPECT_EQ(get_one(*t, "k11/2").data, data["k11/2"]);
}

TEST(FilePacks, ConcurrentUseWithOneOpenPack) {
  TempDir dir;
  auto o = opts(dir.path());
  o.compact_min_dead = 0;
  o.open_packs = 1;
  {
    FileTier t(o);
    test::StressParams p;
    p.ops_per_thread = 600;
    test::run_stress(t, p);
  }
  FileTier t(o);
  for (const auto& [key, meta] : list_of(t)) EXPECT_EQ(get_one(t, key).status, XferStatus::Ok) << key;
}

}  // namespace
}  // namespace ferry::xfer::store
