#include "xfer/store/dram/dram_tier.h"

#include <gtest/gtest.h>

#include <cstring>

#include "ferry/core/status.h"
#include "ferry/xfer/checksum.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;
using test::remove_one;

std::vector<std::pair<std::string, ObjectMeta>> list_all(Tier& t) {
  std::vector<std::pair<std::string, ObjectMeta>> out;
  Fault fault;
  EXPECT_EQ(t.list(&out, fault), XferStatus::Ok);
  return out;
}

// One range, through the batch interface the chain uses.
Reserved reserve_one(Reservable& r, std::uint64_t size) {
  Reserved out;
  r.reserve({&size, 1}, {&out, 1});
  return out;
}

std::optional<Borrowed> borrow_one(Reservable& r, std::string_view key) {
  std::optional<Borrowed> out;
  r.borrow({&key, 1}, {&out, 1});
  return out;
}

TEST(DramTier, RoundTripsEverySize) {
  DramTier t(16 << 20);
  EXPECT_EQ(t.describe(), "dram:16MiB");
  EXPECT_EQ(t.memory().size(), 16u << 20);
  const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, 3 << 20};
  for (std::size_t n : sizes) {
    const std::string key = "k" + std::to_string(n);
    const auto data = random_bytes(n, n);
    ASSERT_EQ(put_one(t, key, data), XferStatus::Ok) << n;
    const auto got = get_one(t, key);
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, data) << n;
    const auto meta = t.stat(key);
    ASSERT_TRUE(meta);
    EXPECT_EQ(meta->size, n);
    EXPECT_EQ(meta->checksum, checksum({data.data(), data.size()}));
  }
  EXPECT_EQ(list_all(t).size(), std::size(sizes));
  EXPECT_EQ(t.used(), 0u + 1 + 4095 + 4096 + 4097 + (3 << 20));
}

TEST(DramTier, MissingEmptyAndTooSmallBuffer) {
  DramTier t(1 << 20);
  EXPECT_EQ(get_one(t, "nope").status, XferStatus::NotFound);
  EXPECT_EQ(put_one(t, "", {1, 2}), XferStatus::InvalidDesc);
  ASSERT_EQ(put_one(t, "a", random_bytes(100, 1)), XferStatus::Ok);
  std::vector<std::uint8_t> small(99);
  GetItem item = test::get_item("a", {small.data(), small.size()});
  Fault fault;
  t.get({&item, 1}, fault);
  EXPECT_EQ(item.status, XferStatus::TooLarge);
  EXPECT_EQ(item.size, 100u) << "tells the caller how much room it needs";
  EXPECT_NE(fault.detail().find("'a' has 100 bytes"), std::string::npos) << fault.detail();
  EXPECT_EQ(fault.key(), "a");
  EXPECT_FALSE(remove_one(t, "nope"));
  EXPECT_TRUE(remove_one(t, "a"));
  EXPECT_EQ(t.used(), 0u);
  EXPECT_EQ(t.free_bytes(), 1u << 20);
}

TEST(DramTier, OverwriteReplacesAndFreesTheOldRange) {
  DramTier t(64 << 10);
  for (int i = 0; i < 50; ++i) {
    const auto data = random_bytes(20000 + i, i);
    ASSERT_EQ(put_one(t, "same", data), XferStatus::Ok) << i;
    EXPECT_EQ(get_one(t, "same").data, data);
  }
  EXPECT_EQ(t.used(), 20049u);
  EXPECT_EQ(list_all(t).size(), 1u);
}

TEST(DramTier, FullAndFragmentedIsNoSpace) {
  DramTier t(4 * 4096);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(put_one(t, "p" + std::to_string(i), random_bytes(4096, i)), XferStatus::Ok);
  std::string error;
  EXPECT_EQ(put_one(t, "more", random_bytes(1, 9), &error), XferStatus::NoSpace);
  EXPECT_EQ(error, "") << "a full tier is an answer for the chain, not a fault";
  ASSERT_TRUE(remove_one(t, "p0"));
  ASSERT_TRUE(remove_one(t, "p2"));
  EXPECT_EQ(put_one(t, "two-pages", random_bytes(8192, 3), &error), XferStatus::NoSpace)
      << "8 KiB free, but in two separate pages";
  EXPECT_EQ(put_one(t, "one-page", random_bytes(4096, 3)), XferStatus::Ok);
}

TEST(DramTier, LruOrderFollowsPutsAndGets) {
  DramTier t(1 << 20);
  for (const char* k : {"a", "b", "c", "d"}) ASSERT_EQ(put_one(t, k, random_bytes(1000, 1)), XferStatus::Ok);
  ASSERT_EQ(get_one(t, "a").status, XferStatus::Ok);  // a becomes the most recent
  (void)t.stat("b");                                  // stat is not a use
  EXPECT_EQ(t.lru_victims(1), (std::vector<std::string>{"b"}));
  EXPECT_EQ(t.lru_victims(2500), (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(t.lru_victims(1 << 30), (std::vector<std::string>{"b", "c", "d", "a"}));
}

TEST(DramTier, CorruptedPoolIsDetected) {
  DramTier t(1 << 20);
  const auto data = random_bytes(10000, 5);
  ASSERT_EQ(put_one(t, "x", data), XferStatus::Ok);
  // Flip a byte in the pool, as a stray DMA would.
  auto pool = t.memory();
  std::byte* p = pool.data();
  for (std::size_t i = 0; i < pool.size(); ++i)
    if (std::memcmp(p + i, data.data(), 64) == 0) {
      p[i + 5000] ^= std::byte{1};
      break;
    }
  const auto got = get_one(t, "x");
  EXPECT_EQ(got.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(got.error.find("'x'"), std::string::npos) << got.error;
}

TEST(DramTier, RejectsZeroCapacity) {
  EXPECT_THROW(DramTier(0), Error);
}

// The agent's zero-copy path: fill a reserved range, put it, and the tier adopts
// it in place; releasing it afterwards then does nothing.
TEST(DramTier, AReservedRangeIsAdoptedWithoutACopyAndReleaseThenDoesNothing) {
  DramTier t(1 << 20);
  ASSERT_EQ(t.reservable(), &t) << "the dram tier declares the capability";
  const auto data = random_bytes(100000, 3);
  const Reserved r = reserve_one(t, data.size());
  ASSERT_NE(r.range.data, nullptr);
  EXPECT_GE(r.range.data, reinterpret_cast<std::uint8_t*>(t.memory().data()));
  std::memcpy(r.range.data, data.data(), data.size());
  PutItem item =
      test::put_item("adopted", ByteView{r.range.data, data.size()}, checksum({data.data(), data.size()}));
  Fault fault;
  t.put({&item, 1}, fault);
  ASSERT_EQ(item.status, XferStatus::Ok) << fault.detail();
  t.release({&r, 1});  // adopted: must not free the object's range
  const auto free_after = t.free_bytes();
  const Reserved other = reserve_one(t, 1 << 19);  // would land on the object if its range had been freed
  ASSERT_NE(other.range.data, nullptr);
  std::memset(other.range.data, 0xee, 1 << 19);
  t.release({&other, 1});
  EXPECT_EQ(t.free_bytes(), free_after);
  const auto got = get_one(t, "adopted");
  ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
  EXPECT_EQ(got.data, data);
}

// An adopted range can be freed by an overwrite and reserved again by another
// lane before the first lane releases its lease: the ticket keeps that release
// from freeing the second lane's live reservation.
TEST(DramTier, AStaleReleaseNeverFreesAnotherCallersReservation) {
  DramTier t(8192);
  const auto data = random_bytes(4096, 5);
  const Reserved first = reserve_one(t, data.size());
  ASSERT_NE(first.range.data, nullptr);
  std::memcpy(first.range.data, data.data(), data.size());
  PutItem item = test::put_item("k", ByteView{first.range.data, data.size()}, checksum({data.data(), data.size()}));
  Fault fault;
  t.put({&item, 1}, fault);
  ASSERT_EQ(item.status, XferStatus::Ok);
  ASSERT_TRUE(remove_one(t, "k"));  // frees the adopted range
  const Reserved second = reserve_one(t, data.size());
  ASSERT_EQ(second.range.data, first.range.data) << "best fit hands the same range out again";
  EXPECT_NE(second.ticket, first.ticket);
  t.release({&first, 1});  // stale: must leave the second reservation alone
  const Reserved third = reserve_one(t, data.size());
  EXPECT_NE(third.range.data, second.range.data) << "the second reservation was freed by the stale release";
  t.release({&second, 1});
  t.release({&third, 1});
  EXPECT_EQ(t.free_bytes(), 8192u);
}

TEST(DramTier, AnUnadoptedReservationReturnsItsRangeAndHoldsSpaceMeanwhile) {
  DramTier t(1 << 20);
  const Reserved r = reserve_one(t, 1 << 20);
  ASSERT_NE(r.range.data, nullptr);
  EXPECT_EQ(reserve_one(t, 4096).range.data, nullptr) << "the pool is fully reserved";
  EXPECT_EQ(put_one(t, "k", random_bytes(4096, 1)), XferStatus::NoSpace);
  t.release({&r, 1});
  EXPECT_EQ(put_one(t, "k", random_bytes(4096, 1)), XferStatus::Ok);
}

TEST(DramTier, ABorrowedObjectStaysReadableAfterItIsRemoved) {
  DramTier t(1 << 20);
  const auto data = random_bytes(5000, 9);
  ASSERT_EQ(put_one(t, "b", data), XferStatus::Ok);
  auto b = borrow_one(t, "b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->checksum, checksum({data.data(), data.size()}));
  ASSERT_TRUE(remove_one(t, "b"));
  ASSERT_EQ(put_one(t, "c", random_bytes(5000, 10)), XferStatus::Ok);  // must not reuse b's range yet
  EXPECT_EQ(std::memcmp(b->bytes.data, data.data(), data.size()), 0);
  EXPECT_FALSE(borrow_one(t, "b"));
}

}  // namespace
}  // namespace ferry::xfer::store
