// Concurrent put/get/remove through each tier and through chains that evict.
// CI runs it under ASan+UBSan as well (and it is quick enough to).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/shared_store.h"
#include "xfer/store/store_stress.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {
namespace {

using test::run_stress;
using test::StressParams;
using test::TempDir;

std::unique_ptr<FileTier> file_tier(const std::string& dir, bool direct = false) {
  FileTierOptions o;
  o.dir = dir;
  o.queue_depth = 8;
  o.direct = direct;
  return std::make_unique<FileTier>(o);
}

TEST(StoreStress, DramTier) {
  DramTier t(16 << 20);
  run_stress(t, StressParams{});
}

TEST(StoreStress, FileTier) {  // small objects: in packs
  TempDir dir;
  auto t = file_tier(dir.path());
  run_stress(*t, StressParams{});
}

TEST(StoreStress, FileTierAFilePerObject) {
  TempDir dir;
  FileTierOptions o;
  o.dir = dir.path();
  o.queue_depth = 8;
  o.pack_threshold = 0;
  FileTier t(o);
  run_stress(t, StressParams{});
}

TEST(StoreStress, FileTierPacksAndFilesWithCompaction) {  // sizes on both sides of pack=
  TempDir dir;
  FileTierOptions o;
  o.dir = dir.path();
  o.queue_depth = 8;
  o.pack_threshold = 6000;
  o.compact_min_dead = 0;
  FileTier t(o);
  run_stress(t, StressParams{});
}

// A dram tier far smaller than the working set: most puts evict, and evictions
// race with the owners' gets and removes.
TEST(StoreStress, ChainThatEvictsAllTheTime) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::make_unique<DramTier>(96 << 10));
  tiers.push_back(file_tier(dir.path()));
  TierChain c(std::move(tiers));
  run_stress(c, StressParams{});
  EXPECT_GT(c.stats().moved_objects, 100u);
  EXPECT_EQ(c.stats().failed_moves, 0u);
}

// A file tier on top that streams most objects and is often full: streamed
// puts race with the puts that fall back to the chain and move objects down,
// and with gets that stream or fall back.
TEST(StoreStress, ChainStreamingIntoAFullFileTier) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  FileTierOptions o;
  o.dir = dir.path();
  o.queue_depth = 8;
  o.pack_threshold = 64 << 10;  // streamed above 256 KiB (FileTier::kStreamFloor), packed below 64
  o.capacity = 4 << 20;
  tiers.push_back(std::make_unique<FileTier>(o));
  tiers.push_back(std::make_unique<DramTier>(64 << 20));
  TierChain c(std::move(tiers));
  StressParams p;
  p.stream = true;
  p.max_size = 600 << 10;
  p.ops_per_thread = 400;
  run_stress(c, p);
  EXPECT_GT(c.stats().moved_objects, 20u);
  EXPECT_EQ(c.stats().failed_moves, 0u);
}

TEST(StoreStress, ThreeTierChainWithDirectIo) {
  TempDir dir;
  std::vector<std::unique_ptr<Tier>> tiers;
  tiers.push_back(std::make_unique<DramTier>(64 << 10));
  FileTierOptions o;
  o.dir = dir.sub("mid");
  o.capacity = 128 << 10;
  o.queue_depth = 4;
  tiers.push_back(std::make_unique<FileTier>(o));
  std::unique_ptr<FileTier> last;
  try {
    last = file_tier(dir.sub("last"), true);
  } catch (const Error&) {
    last = file_tier(dir.sub("last"), false);  // tmpfs: no O_DIRECT; still three tiers
  }
  tiers.push_back(std::move(last));
  TierChain c(std::move(tiers));
  run_stress(c, StressParams{});
  EXPECT_GT(c.stats().moved_objects, 100u);
}

// Two agents' threads overwrite, read and remove the same keys at once: every
// read is a miss or one of the versions written, whole (for TSan: the checks,
// drops and write-throughs race with each other's stripes).
TEST(StoreStress, AgentsOverOneSharedTierReadOnlyVersionsTheyWrote) {
  test::SharedStore store;
  auto a = test::agent(store, 256 << 10), b = test::agent(store, 256 << 10);
  constexpr int kVersions = 4, kKeys = 8;
  std::vector<std::vector<std::uint8_t>> versions;
  for (int v = 0; v < kVersions; ++v) versions.push_back(test::random_bytes(16384, v));
  std::atomic<int> wrong{0};
  auto run = [&](TierChain& c, int seed) {
    for (int i = 0; i < 300; ++i) {
      const std::string key = "k" + std::to_string((i * 7 + seed) % kKeys);
      switch ((i + seed) % 5) {
        case 0:
        case 1: (void)test::put_one(c, key, versions[(i + seed) % kVersions]); break;
        case 2: (void)test::remove_one(c, key); break;
        default: {
          const auto r = test::get_one(c, key);
          if (r.status == XferStatus::Ok &&
              std::find(versions.begin(), versions.end(), r.data) == versions.end())
            ++wrong;
        }
      }
    }
  };
  std::thread t1(run, std::ref(*a), 0), t2(run, std::ref(*a), 1), t3(run, std::ref(*b), 2),
      t4(run, std::ref(*b), 3);
  t1.join();
  t2.join();
  t3.join();
  t4.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace ferry::xfer::store
