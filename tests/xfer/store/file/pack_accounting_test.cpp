// The file tier's pack accounting (pack_accounting.h), in memory only.

#include "xfer/store/file/pack_accounting.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/key_map.h"

namespace ferry::xfer::store {
namespace {

class PackAccountingTest : public ::testing::Test {
 protected:
  static PackLimits limits(std::uint64_t min_dead, std::uint64_t small_packs) {
    PackLimits l;
    l.pack_max = 1 << 20;  // small: under 128 KiB
    l.compact_min_dead = min_dead;
    l.compact_small_packs = small_packs;
    return l;
  }
  // Registers a pack of file size `file_size` holding `objects` records of
  // `size` bytes, makes `live` of them live and unpins it.
  std::shared_ptr<PackFile> pack(PackAccounting& acc, std::uint64_t seq, std::uint64_t file_size, int objects,
                                 std::uint64_t size, int live) {
    auto file = std::make_shared<PackFile>(&fds_, seq, "p" + std::to_string(seq), -1, file_size);
    keys_.emplace_back();
    std::vector<PackItem> items;
    for (int i = 0; i < objects; ++i) {
      keys_.back().push_back("k" + std::to_string(seq) + "/" + std::to_string(i));
    }
    for (int i = 0; i < objects; ++i) items.push_back(PackItem{keys_.back()[i], {nullptr, size}, 0, seq, 0});
    acc.add_new(file, items);
    for (int i = 0; i < live; ++i) acc.object_lives(seq, size);
    acc.unpin(seq, &emptied_);
    return file;
  }

  PackFds fds_{-1, false, 4};
  std::vector<std::vector<std::string>> keys_;
  EmptiedPacks emptied_;
};

TEST_F(PackAccountingTest, APackIsDroppedWhenItsLastObjectDies) {
  PackAccounting acc(limits(1 << 30, 100));
  auto p = pack(acc, 1, 1 << 20, 3, 5000, 3);
  EXPECT_EQ(acc.count(), 1u);
  EXPECT_EQ(acc.live_bytes(), 3 * io_round_up(5000));
  EXPECT_EQ(acc.packed_objects(), 3u);
  acc.object_died(1, 5000, &emptied_);
  acc.object_died(1, 5000, &emptied_);
  EXPECT_EQ(acc.dead_bytes(), 2 * io_round_up(5000));
  EXPECT_TRUE(emptied_.empty());
  acc.object_died(1, 5000, &emptied_);
  ASSERT_EQ(emptied_.size(), 1u);
  EXPECT_EQ(emptied_[0], p);
  EXPECT_TRUE(acc.empty());
  EXPECT_EQ(acc.dead_bytes(), 0u);
  EXPECT_EQ(acc.live_bytes(), 0u);
}

TEST_F(PackAccountingTest, APinnedPackStaysWhileItHasNothingLiveYet) {
  PackAccounting acc(limits(1 << 30, 100));
  auto file = std::make_shared<PackFile>(&fds_, 5, "p5", -1, 1 << 20);
  const std::string key = "k";
  std::vector<PackItem> items{PackItem{key, {nullptr, 100}, 0, 5, 0}};
  acc.add_new(file, items);
  EXPECT_EQ(acc.count(), 1u);
  EXPECT_TRUE(acc.find(5)->pinned);
  EXPECT_EQ(acc.find(5)->records.size(), 1u);
  acc.unpin(5, &emptied_);
  EXPECT_EQ(emptied_.size(), 1u) << "nothing became live: dropped at unpin";
}

TEST_F(PackAccountingTest, SparsePacksAreDueAndTheSparsestGoFirst) {
  PackAccounting acc(limits(0, 100));
  pack(acc, 1, 1 << 20, 10, 4096, 9);  // 90% live
  auto sparse = pack(acc, 2, 1 << 20, 10, 4096, 1);  // 10% live
  pack(acc, 3, 1 << 20, 10, 4096, 10);  // no dead bytes: never a victim
  EXPECT_FALSE(acc.compaction_due()) << "dead 10 pages < live 20";
  pack(acc, 4, 1 << 20, 10, 4096, 5);
  for (int i = 0; i < 5; ++i) acc.object_died(4, 4096, &emptied_);  // 0 live: dropped
  ASSERT_EQ(emptied_.size(), 1u);
  for (int i = 0; i < 7; ++i) acc.object_died(1, 4096, &emptied_);  // 2 live of 10
  EXPECT_TRUE(acc.sparse_packs_due()) << acc.dead_bytes() << " dead, " << acc.live_bytes() << " live";
  const EmptiedPacks victims = acc.pick_victims();
  ASSERT_EQ(victims.size(), 2u);
  EXPECT_EQ(victims[0], sparse);   // 1 live of 10 ...
  EXPECT_EQ(victims[1]->seq, 1u);  // ... then 2 of 10
  acc.mark_unreadable(2);
  const EmptiedPacks again = acc.pick_victims();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]->seq, 1u) << "an unreadable pack is left alone";
}

TEST_F(PackAccountingTest, TooManySmallPacksAreMergedFewestLiveBytesFirst) {
  PackAccounting acc(limits(1 << 30, 2));
  pack(acc, 1, 4096 * 10, 3, 4096, 3);
  pack(acc, 2, 4096 * 10, 1, 4096, 1);
  pack(acc, 3, 1 << 20, 1, 4096, 1);  // not small
  EXPECT_EQ(acc.small_packs(), 2u);
  EXPECT_FALSE(acc.compaction_due());
  pack(acc, 4, 4096 * 10, 2, 4096, 2);
  EXPECT_TRUE(acc.compaction_due());
  EXPECT_FALSE(acc.sparse_packs_due());
  const EmptiedPacks victims = acc.pick_victims();
  ASSERT_EQ(victims.size(), 3u);
  EXPECT_EQ(victims[0]->seq, 2u);
  EXPECT_EQ(victims[1]->seq, 4u);
  EXPECT_EQ(victims[2]->seq, 1u);
  acc.note_compacted(3);
  EXPECT_EQ(acc.compactions(), 3u);
}

TEST_F(PackAccountingTest, OneSmallPackIsNothingToMerge) {
  PackAccounting acc(limits(1 << 30, 0));
  pack(acc, 1, 4096 * 10, 1, 4096, 1);
  EXPECT_TRUE(acc.compaction_due());
  EXPECT_TRUE(acc.pick_victims().empty());
}

TEST_F(PackAccountingTest, OldestRecordsSpanEveryPack) {
  PackAccounting acc(limits(1 << 30, 100));
  pack(acc, 3, 1 << 20, 2, 100, 2);
  PackState loaded;
  loaded.file = std::make_shared<PackFile>(&fds_, 9, "p9", -1, 1 << 20);
  loaded.live_objects = 1;
  loaded.live_bytes = 4096;
  loaded.records = {{KeyHash{}("k3/0"), 9}, {KeyHash{}("other"), 8}};
  acc.add_loaded(std::move(loaded));
  EXPECT_EQ(acc.packed_objects(), 3u);
  std::unordered_map<std::size_t, std::uint64_t> oldest;
  acc.oldest_records(&oldest);
  EXPECT_EQ(oldest.at(KeyHash{}("k3/0")), 3u);
  EXPECT_EQ(oldest.at(KeyHash{}("other")), 8u);
  EXPECT_EQ(oldest.size(), 3u);
}

}  // namespace
}  // namespace ferry::xfer::store
