// The tier chain over a shared tier (tier_chain.h, "A shared tier"): two
// chains, as two agents, each with its own dram tier over one store.

#include <gtest/gtest.h>

#include <memory>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/shared_store.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {
namespace {

using test::agent;
using test::SharedStore;
using test::SharedTier;

using test::get_one;
using test::put_one;
using test::random_bytes;
using test::remove_one;

std::optional<Borrowed> borrow_one(TierChain& c, std::string_view key) {
  std::optional<Borrowed> out;
  c.borrow({&key, 1}, {&out, 1});
  return out;
}

TEST(TierChainShared, APutIsWrittenThroughAndKeptAbove) {
  SharedStore store;
  auto a = agent(store);
  const auto v1 = random_bytes(4096, 1);
  ASSERT_EQ(put_one(*a, "k", v1), XferStatus::Ok);
  EXPECT_TRUE(a->tier(0).stat("k"));
  EXPECT_TRUE(store.inner.stat("k"));
  const auto r = get_one(*a, "k");
  EXPECT_EQ(r.status, XferStatus::Ok);
  EXPECT_EQ(r.tier, 0);
  EXPECT_EQ(r.data, v1);
}

TEST(TierChainShared, AnOverwriteByAnotherAgentIsSeenOnGetBorrowAndStat) {
  SharedStore store;
  auto a = agent(store), b = agent(store);
  const auto v1 = random_bytes(4096, 1), v2 = random_bytes(4096, 2);
  ASSERT_EQ(put_one(*b, "k", v1), XferStatus::Ok);  // B's dram holds v1
  ASSERT_EQ(put_one(*a, "k", v2), XferStatus::Ok);
  EXPECT_FALSE(borrow_one(*b, "k")) << "B lent its stale copy";
  ASSERT_EQ(put_one(*b, "k", v1), XferStatus::Ok);
  ASSERT_EQ(put_one(*a, "k", v2), XferStatus::Ok);
  const auto r = get_one(*b, "k");
  EXPECT_EQ(r.status, XferStatus::Ok);
  EXPECT_EQ(r.tier, 1);
  EXPECT_EQ(r.data, v2);
  EXPECT_FALSE(b->tier(0).stat("k")) << "B's stale copy stayed";
  ASSERT_EQ(put_one(*b, "k", v1), XferStatus::Ok);
  ASSERT_EQ(put_one(*a, "k", v2), XferStatus::Ok);
  const auto found = b->stat("k");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->tier, 1);
  EXPECT_EQ(found->meta.size, v2.size());
  EXPECT_EQ(b->stats().dropped_stale, 3u);
}

TEST(TierChainShared, ARemovalByAnotherAgentIsAMiss) {
  SharedStore store;
  auto a = agent(store), b = agent(store);
  ASSERT_EQ(put_one(*b, "k", random_bytes(4096, 1)), XferStatus::Ok);
  EXPECT_TRUE(remove_one(*a, "k"));
  EXPECT_EQ(get_one(*b, "k").status, XferStatus::NotFound);
  EXPECT_FALSE(b->tier(0).stat("k"));
  ASSERT_EQ(put_one(*b, "k", random_bytes(4096, 1)), XferStatus::Ok);
  EXPECT_TRUE(remove_one(*a, "k"));
  EXPECT_FALSE(b->stat("k"));
  ASSERT_EQ(put_one(*b, "k", random_bytes(4096, 1)), XferStatus::Ok);
  EXPECT_TRUE(remove_one(*a, "k"));
  EXPECT_FALSE(borrow_one(*b, "k"));
}

TEST(TierChainShared, ACurrentHitCostsOneHeaderReadPerBatch) {
  SharedStore store;
  auto a = agent(store);
  const auto v1 = random_bytes(4096, 1), v2 = random_bytes(4096, 2);
  ASSERT_EQ(put_one(*a, "k1", v1), XferStatus::Ok);
  ASSERT_EQ(put_one(*a, "k2", v2), XferStatus::Ok);
  std::vector<std::uint8_t> b1(4096), b2(4096);
  GetItem items[2] = {test::get_item("k1", {b1.data(), b1.size()}),
                      test::get_item("k2", {b2.data(), b2.size()})};
  store.header_calls = 0;
  Fault fault;
  a->get(items, fault);
  EXPECT_EQ(store.header_calls, 1);
  EXPECT_EQ(items[0].status, XferStatus::Ok);
  EXPECT_EQ(items[0].tier, 0);
  EXPECT_EQ(b1, v1);
  EXPECT_EQ(items[1].tier, 0);
  EXPECT_EQ(b2, v2);
}

TEST(TierChainShared, EvictionAboveDropsWhatTheSharedTierHolds) {
  SharedStore store;
  auto a = agent(store, 64 << 10);
  for (int i = 0; i < 32; ++i)
    ASSERT_EQ(put_one(*a, "k" + std::to_string(i), random_bytes(8192, i)), XferStatus::Ok);
  const auto s = a->stats();
  EXPECT_GT(s.dropped_shared, 0u);
  EXPECT_EQ(s.moved_objects, 0u);
  for (int i = 0; i < 32; ++i) {
    const auto r = get_one(*a, "k" + std::to_string(i));
    EXPECT_EQ(r.status, XferStatus::Ok);
    EXPECT_EQ(r.data, random_bytes(8192, i));
  }
}

TEST(TierChainShared, ASharedTierThatIsDownFailsPutsAndMakesHitsMisses) {
  SharedStore store;
  auto a = agent(store);
  const auto v1 = random_bytes(4096, 1);
  ASSERT_EQ(put_one(*a, "k", v1), XferStatus::Ok);
  store.down = true;
  std::string error;
  EXPECT_EQ(put_one(*a, "j", v1, &error), XferStatus::Unavailable);
  EXPECT_NE(error.find("shared"), std::string::npos) << error;
  EXPECT_FALSE(a->tier(0).stat("j")) << "a put the shared tier refused stayed above it";
  EXPECT_EQ(get_one(*a, "k").status, XferStatus::NotFound);
  EXPECT_FALSE(borrow_one(*a, "k"));
  EXPECT_FALSE(a->stat("k"));
  EXPECT_TRUE(a->tier(0).stat("k")) << "a copy that may be current was dropped";
  store.down = false;
  const auto r = get_one(*a, "k");
  EXPECT_EQ(r.status, XferStatus::Ok);
  EXPECT_EQ(r.tier, 0);
}

TEST(TierChainShared, ASharedTierMustBeTheLast) {
  SharedStore store;
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::make_unique<SharedTier>(store));
  tiers.push_back(std::make_unique<DramTier>(1 << 20));
  EXPECT_THROW(TierChain(std::move(tiers)), Error);
}

}  // namespace
}  // namespace ferry::xfer::store
