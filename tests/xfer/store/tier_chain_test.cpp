#include "xfer/store/tier_chain.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/full_disk.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/vector_pieces.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::random_bytes;
using test::TempDir;

std::unique_ptr<FileTier> file_tier(const std::string& dir, std::uint64_t capacity = kUnbounded) {
  FileTierOptions o;
  o.dir = dir;
  o.capacity = capacity;
  o.queue_depth = 8;
  return std::make_unique<FileTier>(o);
}

TierChain dram_file(std::uint64_t dram, const std::string& dir, std::uint64_t file = kUnbounded) {
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::make_unique<DramTier>(dram));
  tiers.push_back(file_tier(dir, file));
  return TierChain(std::move(tiers));
}

XferStatus put(TierChain& c, std::string_view key, const std::vector<std::uint8_t>& data,
               std::string* error = nullptr) {
  PutItem item = test::put_item(key, data);
  Fault fault;
  c.put({&item, 1}, fault);
  if (error != nullptr) *error = fault.detail();
  return item.status;
}

test::GetResult get(TierChain& c, std::string_view key, std::size_t capacity = 1 << 20) {
  test::GetResult r;
  r.data.resize(capacity);
  GetItem item = test::get_item(key, {r.data.data(), r.data.size()});
  Fault fault;
  c.get({&item, 1}, fault);
  r.status = item.status;
  r.error = fault.detail();
  r.tier = item.tier;
  r.data.resize(item.status == XferStatus::Ok ? item.size : 0);
  return r;
}

std::size_t listed(TierChain& c) {
  Fault fault;
  return c.list(fault).size();
}

TEST(TierChain, FullDramMovesLeastRecentlyUsedToFile) {
  TempDir dir;
  TierChain c = dram_file(64 << 10, dir.path());  // 16 pages: 8 objects of 2 pages
  std::map<std::string, std::vector<std::uint8_t>> data;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "obj" + std::to_string(i);
    data[key] = random_bytes(5000 + i, i);
    ASSERT_EQ(put(c, key, data[key]), XferStatus::Ok) << i;
  }
  EXPECT_GT(c.stats().moved_objects, 0u);
  EXPECT_EQ(listed(c), 40u);
  EXPECT_LE(c.tier(0).used(), 64u << 10);
  for (const auto& [key, bytes] : data) {
    const auto got = get(c, key);
    ASSERT_EQ(got.status, XferStatus::Ok) << key << ": " << got.error;
    EXPECT_EQ(got.data, bytes);
    // Every key lives in exactly one tier.
    EXPECT_NE(c.tier(0).stat(key).has_value(), c.tier(1).stat(key).has_value()) << key;
  }
  EXPECT_EQ(get(c, "obj39").tier, 0) << "the newest object is still in dram";
  EXPECT_EQ(get(c, "obj0").tier, 1) << "the oldest went down";
}

TEST(TierChain, GetsKeepHotObjectsUp) {
  TempDir dir;
  TierChain c = dram_file(4 * 8192, dir.path());
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(put(c, "k" + std::to_string(i), random_bytes(8000, i)), XferStatus::Ok);
  ASSERT_EQ(get(c, "k0").tier, 0);  // k0 is now the most recently used
  ASSERT_EQ(put(c, "k4", random_bytes(8000, 4)), XferStatus::Ok);
  EXPECT_EQ(get(c, "k0").tier, 0);
  EXPECT_EQ(get(c, "k1").tier, 1) << "the least recently used one went down";
}

TEST(TierChain, LargerThanATierGoesFurtherDown) {
  TempDir dir;
  TierChain c = dram_file(16 << 10, dir.path());
  const auto big = random_bytes(100 << 10, 1);
  ASSERT_EQ(put(c, "big", big), XferStatus::Ok);
  const auto got = get(c, "big");
  EXPECT_EQ(got.tier, 1);
  EXPECT_EQ(got.data, big);
  EXPECT_EQ(c.stats().moved_objects, 0u) << "nothing was evicted for an object dram can never hold";
}

// A buffer too small for the object is TooLarge with the object's size, from
// whichever tier holds it (the agent reports that size to the application).
TEST(TierChain, ATooSmallBufferIsTooLargeWithTheObjectsSizeFromEveryTier) {
  TempDir dir;
  TierChain c = dram_file(16 << 10, dir.path());
  ASSERT_EQ(put(c, "in-dram", random_bytes(9000, 1)), XferStatus::Ok);
  ASSERT_EQ(put(c, "in-file", random_bytes(100 << 10, 2)), XferStatus::Ok);  // larger than dram
  const std::pair<std::string, std::size_t> objects[] = {{"in-dram", 9000}, {"in-file", 100 << 10}};
  for (int tier = 0; tier < 2; ++tier) {
    const auto& [key, size] = objects[tier];
    std::vector<std::uint8_t> out(4096);
    GetItem item = test::get_item(key, {out.data(), out.size()});
    Fault fault;
    c.get({&item, 1}, fault);
    EXPECT_EQ(item.status, XferStatus::TooLarge) << key << ": " << fault.detail();
    EXPECT_EQ(item.tier, tier) << key;
    EXPECT_EQ(item.size, size) << key << ": " << fault.detail();
  }
}

TEST(TierChain, NewVersionRemovesStaleCopies) {
  TempDir dir;
  TierChain c = dram_file(16 << 10, dir.path());
  const auto small = random_bytes(1000, 1), big = random_bytes(50 << 10, 2), small2 = random_bytes(900, 3);
  ASSERT_EQ(put(c, "k", small), XferStatus::Ok);
  ASSERT_EQ(get(c, "k").tier, 0);
  ASSERT_EQ(put(c, "k", big), XferStatus::Ok);  // too big for dram: the old dram copy must go
  EXPECT_FALSE(c.tier(0).stat("k"));
  auto got = get(c, "k");
  EXPECT_EQ(got.tier, 1);
  EXPECT_EQ(got.data, big);
  ASSERT_EQ(put(c, "k", small2), XferStatus::Ok);  // back in dram: the file copy must go
  EXPECT_FALSE(c.tier(1).stat("k"));
  got = get(c, "k");
  EXPECT_EQ(got.tier, 0);
  EXPECT_EQ(got.data, small2);
  ASSERT_EQ(listed(c), 1u);
  EXPECT_TRUE(test::remove_one(c, "k"));
  EXPECT_FALSE(test::remove_one(c, "k"));
  EXPECT_EQ(get(c, "k").status, XferStatus::NotFound);
}

TEST(TierChain, NoSpaceOnlyWhenEveryTierIsFull) {
  TempDir dir;
  TierChain c = dram_file(16 << 10, dir.path(), 40 << 10);
  int ok = 0;
  std::string error;
  XferStatus s = XferStatus::Ok;
  for (int i = 0; i < 20 && s == XferStatus::Ok; ++i) {
    s = put(c, "k" + std::to_string(i), random_bytes(8000, i), &error);
    ok += s == XferStatus::Ok;
  }
  EXPECT_EQ(s, XferStatus::NoSpace);
  EXPECT_GE(ok, 6) << "2 in dram and 5 in the file tier, give or take a page";
  EXPECT_NE(error.find("dram:"), std::string::npos) << error;
  EXPECT_NE(error.find("file:"), std::string::npos) << error;
  for (int i = 0; i < ok; ++i) EXPECT_EQ(get(c, "k" + std::to_string(i)).status, XferStatus::Ok) << i;
}

TEST(TierChain, BatchesSpillAcrossTiers) {
  TempDir dir;
  TierChain c = dram_file(32 << 10, dir.path());
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) {
    data.push_back(random_bytes(3000 * (i % 5) + 1, i));
    keys.push_back("b" + std::to_string(i));
  }
  std::vector<PutItem> puts;
  for (int i = 0; i < 30; ++i) puts.push_back(test::put_item(keys[i], data[i]));
  puts[3].key = "";
  Fault fault;
  c.put(puts, fault);
  std::vector<std::vector<std::uint8_t>> out(30, std::vector<std::uint8_t>(20000));
  std::vector<GetItem> gets;
  for (int i = 0; i < 30; ++i) gets.push_back(test::get_item(keys[i], {out[i].data(), out[i].size()}));
  c.get(gets, fault);
  for (int i = 0; i < 30; ++i) {
    if (i == 3) {
      EXPECT_EQ(puts[i].status, XferStatus::InvalidDesc);
      EXPECT_EQ(gets[i].status, XferStatus::NotFound);
      continue;
    }
    ASSERT_EQ(puts[i].status, XferStatus::Ok) << fault.detail();
    ASSERT_EQ(gets[i].status, XferStatus::Ok) << fault.detail();
    out[i].resize(gets[i].size);
    EXPECT_EQ(out[i], data[i]);
  }
}

TEST(TierChain, CorruptVictimIsDroppedNotMoved) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  auto dram = std::make_unique<DramTier>(2 * 4096);
  DramTier* d = dram.get();
  tiers.push_back(std::move(dram));
  tiers.push_back(file_tier(dir.path()));
  TierChain c(std::move(tiers));
  const auto a = random_bytes(4000, 1);
  ASSERT_EQ(put(c, "a", a), XferStatus::Ok);
  ASSERT_EQ(put(c, "b", random_bytes(4000, 2)), XferStatus::Ok);
  // Damage a's bytes in the pool, then force a out.
  std::byte* pool = d->memory().data();
  for (std::size_t off = 0; off < d->memory().size(); off += 4096)
    if (std::memcmp(pool + off, a.data(), 64) == 0) pool[off + 100] ^= std::byte{1};
  ASSERT_EQ(put(c, "c", random_bytes(4000, 3)), XferStatus::Ok);
  EXPECT_EQ(c.stats().dropped_corrupt, 1u);
  EXPECT_EQ(get(c, "a").status, XferStatus::NotFound) << "corrupt bytes never reach the file tier";
  EXPECT_EQ(get(c, "b").status, XferStatus::Ok);
}

// The zero-copy door (storage.h): the chain lends the dram tier's ranges, a put
// of exactly such a range stores it without a copy, and the lease gives back
// only what was not adopted.
TEST(TierChain, ALeaseReturnsWhatThePutDidNotAdopt) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  auto dram = std::make_unique<DramTier>(1 << 20);
  DramTier* d = dram.get();
  tiers.push_back(std::move(dram));
  tiers.push_back(file_tier(dir.path()));
  TierChain c(std::move(tiers));
  EXPECT_EQ(c.dma_memory().data(), d->memory().data());
  const auto data = random_bytes(4000, 7);
  const std::uint64_t sizes[] = {data.size(), data.size()};
  Lease lease;
  c.reserve(sizes, lease);
  ASSERT_EQ(lease.ranges().size(), 2u);
  ASSERT_NE(lease.ranges()[0].range.data, nullptr);
  ASSERT_NE(lease.ranges()[1].range.data, nullptr);
  EXPECT_EQ(d->free_bytes(), (1u << 20) - 2 * 4096);
  std::memcpy(lease.ranges()[0].range.data, data.data(), data.size());
  PutItem items[2] = {
      test::put_item("zero-copy", ByteView{lease.ranges()[0].range.data, data.size()}, checksum({data.data(), data.size()})),
      test::put_item("copied", data)};
  Fault fault;
  c.put(items, fault);
  ASSERT_EQ(items[0].status, XferStatus::Ok) << fault.detail();
  ASSERT_EQ(items[1].status, XferStatus::Ok) << fault.detail();
  lease.release();
  EXPECT_EQ(d->free_bytes(), (1u << 20) - 2 * 4096) << "the adopted range and the copy stay, the unused range went back";
  EXPECT_EQ(get(c, "zero-copy").data, data);
  EXPECT_EQ(get(c, "copied").data, data);
  {
    Lease dropped;
    c.reserve(sizes, dropped);
    EXPECT_EQ(d->free_bytes(), (1u << 20) - 4 * 4096);
  }
  EXPECT_EQ(d->free_bytes(), (1u << 20) - 2 * 4096) << "a destroyed lease gives its ranges back";
}

TEST(TierChain, WithoutAZeroCopyTopTierTheDoorLendsNothing) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(file_tier(dir.path()));
  TierChain c(std::move(tiers));
  EXPECT_TRUE(c.dma_memory().empty());
  const std::uint64_t sizes[] = {4096};
  Lease lease;
  c.reserve(sizes, lease);
  ASSERT_EQ(lease.ranges().size(), 1u);
  EXPECT_EQ(lease.ranges()[0].range.data, nullptr);
  ASSERT_EQ(put(c, "k", random_bytes(10, 1)), XferStatus::Ok);
  std::string_view key = "k";
  std::optional<Borrowed> out;
  c.borrow({&key, 1}, {&out, 1});
  EXPECT_FALSE(out) << "a file tier's objects are read with get, never borrowed";
}

TEST(TierChain, StreamsIntoAFileTierOnTopAndRemovesOlderCopiesBelow) {
  TempDir dir;
  const auto older = random_bytes(2 << 20, 1), newer = random_bytes(2 << 20, 2);
  // An older copy in the dram tier below, there before the chain lists it.
  auto dram = std::make_unique<DramTier>(8 << 20);
  PutItem old_item = test::put_item("k", older);
  Fault stored;
  dram->put({&old_item, 1}, stored);
  ASSERT_EQ(old_item.status, XferStatus::Ok);
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(file_tier(dir.path()));
  tiers.push_back(std::move(dram));
  TierChain c(std::move(tiers));
  EXPECT_EQ(c.stream_above(), FileTierOptions{}.pack_threshold);

  int tier = -1;
  Fault fault;
  EXPECT_FALSE(c.put_streamed("small", 1000, test::VectorSource(older), &tier, fault)) << "below the threshold: put() it";
  ASSERT_EQ(c.put_streamed("k", newer.size(), test::VectorSource(newer), &tier, fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(tier, 0);
  EXPECT_FALSE(c.tier(1).stat("k").has_value()) << "the older copy below is gone";
  EXPECT_EQ(get(c, "k", 4 << 20).data, newer);

  std::vector<std::uint8_t> back(newer.size());
  std::uint64_t size = 0;
  ASSERT_EQ(c.get_streamed("k", back.size(), test::VectorSink(back), &size, &tier, fault), XferStatus::Ok);
  EXPECT_EQ(back, newer);
  EXPECT_EQ(tier, 0);
  // A key no tier holds is a miss; one below, in the dram tier, is get()'s.
  EXPECT_EQ(c.get_streamed("elsewhere", back.size(), test::VectorSink(back), &size, &tier, fault),
            XferStatus::NotFound);
}

TEST(TierChain, AFullStreamingTopTierMakesRoomBelowOrLeavesThePutToTheChain) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(file_tier(dir.sub("top"), 3 << 20));
  tiers.push_back(std::make_unique<DramTier>(8 << 20));
  TierChain c(std::move(tiers));
  const auto a = random_bytes(2 << 20, 3), b = random_bytes(2 << 20, 4);
  int tier = -1;
  Fault fault;
  ASSERT_EQ(c.put_streamed("a", a.size(), test::VectorSource(a), &tier, fault), XferStatus::Ok);
  // Full: "a", the least recently used, moves down to make room.
  ASSERT_EQ(c.put_streamed("b", b.size(), test::VectorSource(b), &tier, fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(tier, 0);
  EXPECT_TRUE(c.tier(1).stat("a").has_value());
  EXPECT_FALSE(c.tier(0).stat("a").has_value());
  EXPECT_FALSE(c.put_streamed("c", 4 << 20, test::VectorSource(a), &tier, fault)) << "above its capacity: put() it";
  EXPECT_FALSE(fault.failed()) << fault.detail();
  EXPECT_EQ(get(c, "a", 4 << 20).data, a);
  EXPECT_EQ(get(c, "b", 4 << 20).data, b);

  // A lone tier has nowhere to make room: the put goes by put(), which says why.
  std::vector<std::unique_ptr<Tier>> alone;
  alone.push_back(file_tier(dir.sub("alone"), 3 << 20));
  TierChain single(std::move(alone));
  ASSERT_EQ(single.put_streamed("a", a.size(), test::VectorSource(a), &tier, fault), XferStatus::Ok);
  EXPECT_FALSE(single.put_streamed("b", b.size(), test::VectorSource(b), &tier, fault));
  EXPECT_FALSE(fault.failed()) << fault.detail();
}

// A key no streaming tier holds, with a tier below that does not stream: a
// miss when no tier has it, else get() reads it.
TEST(TierChain, AStreamedGetBelowTheStreamingTiersIsAMissOrLeftToGet) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(file_tier(dir.path()));
  tiers.push_back(std::make_unique<DramTier>(8 << 20));
  TierChain c(std::move(tiers));
  std::vector<std::uint8_t> back(2 << 20);
  std::uint64_t size = 0;
  int tier = -1;
  Fault fault;
  EXPECT_EQ(c.get_streamed("absent", back.size(), test::VectorSink(back), &size, &tier, fault), XferStatus::NotFound);
  const auto below_bytes = random_bytes(1000, 5);
  PutItem below = test::put_item("below", below_bytes);
  c.tier(1).put({&below, 1}, fault);
  ASSERT_EQ(below.status, XferStatus::Ok);
  EXPECT_FALSE(c.get_streamed("below", back.size(), test::VectorSink(back), &size, &tier, fault));
}

TEST(TierChain, AZeroCopyTopTierStreamsNothing) {
  TempDir dir;
  TierChain c = dram_file(8 << 20, dir.path());
  EXPECT_EQ(c.stream_above(), kUnbounded);
  const auto data = random_bytes(2 << 20, 4);
  int tier = -1;
  Fault fault;
  EXPECT_FALSE(c.put_streamed("k", data.size(), test::VectorSource(data), &tier, fault));
}

// A packed copy in the file tier whose removal needs a tombstone, on a full
// disk: the chain refuses the remove (naming the tier), and refuses a newer
// version that would sit in dram above the copy that stays (a restart, with
// dram empty, would serve that copy); once there is room, the same put goes
// through and the old copy goes. Returns 0 or which check failed.
int put_over_a_copy_that_cannot_be_removed(const std::string& dir) {
  try {
    FileTierOptions o;
    o.dir = dir;
    o.queue_depth = 8;
    o.pack_threshold = 16 << 10;
    const auto packed = random_bytes(10000, 1), newer = random_bytes(20000, 3);
    // Straight into the file tier, in a pack with a neighbour that keeps it
    // alive; the chain finds it there when it lists its tiers.
    auto file = std::make_unique<FileTier>(o);
    const auto keep = random_bytes(5000, 4);
    PutItem items[2] = {test::put_item("packed", packed), test::put_item("keep", keep)};
    Fault stored;
    file->put(items, stored);
    if (items[0].status != XferStatus::Ok || items[1].status != XferStatus::Ok) return 2;
    std::vector<std::unique_ptr<Tier>> tiers;
    tiers.push_back(std::make_unique<DramTier>(1 << 20));
    tiers.push_back(std::move(file));
    TierChain chain(std::move(tiers));
    const std::string filler = test::fill_the_disk(dir);
    if (filler.empty()) return 77;
    std::string why;
    if (test::remove_one(chain, "packed", &why)) return 30;
    if (why.find(dir) == std::string::npos) {
      std::fprintf(stderr, "the refusal does not name the tier: %s\n", why.c_str());
      return 31;
    }
    if (put(chain, "packed", newer, &why) != XferStatus::NoSpace) {
      std::fprintf(stderr, "a put over a packed copy that stays: %s\n", why.c_str());
      return 32;
    }
    const auto got = get(chain, "packed");
    if (got.status != XferStatus::Ok || got.tier != 1 || got.data != packed) return 33;
    unlink(filler.c_str());
    PutItem again = test::put_item("packed", newer);
    Fault fault;
    chain.put({&again, 1}, fault);
    if (again.status != XferStatus::Ok || again.tier != 0) return 34;
    if (chain.tier(1).stat("packed")) return 35;  // the older packed copy went
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 7;
  }
}

TEST(TierChain, APutOverACopyThatCannotBeRemovedIsNotAcknowledged) {
  TempDir dir;
  const int rc = test::in_small_tmpfs(dir.path(), "1m", [&] { return put_over_a_copy_that_cannot_be_removed(dir.path()); });
  if (rc == 77) GTEST_SKIP() << "cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(rc, 0);
}

TEST(TierChain, RestartKeepsWhatTheFileTierHolds) {
  TempDir dir;
  const auto big = random_bytes(40 << 10, 1), small = random_bytes(100, 2);
  {
    TierChain c = dram_file(16 << 10, dir.path());
    ASSERT_EQ(put(c, "big", big), XferStatus::Ok);
    ASSERT_EQ(put(c, "small", small), XferStatus::Ok);
  }
  TierChain c = dram_file(16 << 10, dir.path());
  EXPECT_EQ(get(c, "big").data, big);
  EXPECT_EQ(get(c, "small").status, XferStatus::NotFound) << "dram does not survive a restart";
}

// A dram tier that asks for put windows of `window` bytes and records how many
// keys and bytes each put call carried.
class WindowedTier final : public Tier {
 public:
  explicit WindowedTier(std::uint64_t window) : window_(window) {}
  std::string_view kind() const override { return "dram"; }
  std::string describe() const override { return "windowed"; }
  std::uint64_t capacity() const override { return inner_.capacity(); }
  std::uint64_t used() const override { return inner_.used(); }
  void put(std::span<PutItem> items, Fault& fault) noexcept override {
    std::uint64_t bytes = 0;
    for (const auto& item : items) bytes += item.data.size;
    calls.emplace_back(items.size(), bytes);
    inner_.put(items, fault);
  }
  void get(std::span<GetItem> items, Fault& fault) noexcept override { inner_.get(items, fault); }
  std::optional<ObjectMeta> stat(std::string_view key) noexcept override { return inner_.stat(key); }
  XferStatus remove(std::string_view key, Fault& fault) noexcept override { return inner_.remove(key, fault); }
  XferStatus list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& fault) noexcept override {
    return inner_.list(out, fault);
  }
  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override { return inner_.lru_victims(bytes); }
  std::uint64_t put_window_bytes() const override { return window_; }

  std::vector<std::pair<std::size_t, std::uint64_t>> calls;  // (keys, bytes) per put call

 private:
  DramTier inner_{64 << 20};
  std::uint64_t window_;
};

// Puts `n` objects of `size` bytes in one call; returns the top tier's put calls.
std::vector<std::pair<std::size_t, std::uint64_t>> put_windows(std::uint64_t window, std::size_t n,
                                                               std::size_t size) {
  auto tier = std::make_unique<WindowedTier>(window);
  WindowedTier* t = tier.get();
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::move(tier));
  TierChain c(std::move(tiers));
  const auto data = random_bytes(size, 1);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < n; ++i) keys.push_back("w" + std::to_string(i));
  std::vector<PutItem> puts;
  for (const auto& key : keys) puts.push_back(test::put_item(key, data));
  Fault fault;
  c.put(puts, fault);
  for (const auto& p : puts) EXPECT_EQ(p.status, XferStatus::Ok) << fault.detail();
  EXPECT_EQ(listed(c), n);
  return t->calls;
}

TEST(TierChain, PutWindowsOfAFewKeysByDefault) {
  const auto calls = put_windows(0, 256, 4096);
  EXPECT_GE(calls.size(), 256u / 40);
  // 32 keys, plus any that share the last key's stripe.
  for (const auto& [keys, bytes] : calls) EXPECT_LE(keys, 40u);
}

TEST(TierChain, PutWindowsGrowToTheBytesTheTopTierAsksFor) {
  const auto calls = put_windows(512 << 10, 512, 4096);  // 128 keys per window
  ASSERT_GE(calls.size(), 2u);
  ASSERT_LE(calls.size(), 4u);
  for (std::size_t i = 0; i + 1 < calls.size(); ++i) {
    EXPECT_GE(calls[i].second, 512u << 10) << "call " << i;
    EXPECT_LE(calls[i].first, 140u) << "call " << i;
  }
}

TEST(TierChain, PutWindowsStopAtAQuarterOfTheStripes) {
  const auto calls = put_windows(std::uint64_t{1} << 40, 3000, 64);
  ASSERT_GE(calls.size(), 3u);
  for (const auto& [keys, bytes] : calls) EXPECT_LE(keys, 1024u + 8);
}

}  // namespace
}  // namespace ferry::xfer::store
