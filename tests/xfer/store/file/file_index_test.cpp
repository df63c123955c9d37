// The file tier's index (file_index.h), in memory only: no directory, no file.
// Packs are PackFiles that are never opened (a descriptor cache with no
// directory behind it).

#include "xfer/store/file/file_index.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/pack_io.h"

namespace ferry::xfer::store {
namespace {

class FileIndexTest : public ::testing::Test {
 protected:
  FileIndexTest() : index_(limits()) {}
  static PackLimits limits() {
    PackLimits l;
    l.pack_max = 1 << 20;
    l.compact_min_dead = 0;
    l.compact_small_packs = 100;
    return l;
  }
  // A pack of `items` (key, size), registered as a put registers it: pinned, every record dead.
  std::shared_ptr<PackFile> add_pack(std::uint64_t seq, const std::vector<std::pair<std::string, std::size_t>>& items) {
    auto file = std::make_shared<PackFile>(&fds_, seq, "pack-" + std::to_string(seq), -1, 4 << 20);
    std::vector<PackItem> pack_items;
    for (const auto& [key, size] : items) pack_items.push_back(PackItem{key, {nullptr, size}, 0, seq, 0});
    index_.packs().add_new(file, pack_items);
    return file;
  }

  PackFds fds_{-1, false, 4};  // never opens anything here
  FileIndex index_;
  EmptiedPacks emptied_;
  bool unlink_ = false;
};

TEST_F(FileIndexTest, InstallsLooksUpAndOverwrites) {
  EXPECT_EQ(index_.find("a"), nullptr);
  index_.install("a", nullptr, 0, 100, 0xa, 1, &unlink_, &emptied_);
  index_.install("b", nullptr, 0, 50, 0xb, 2, &unlink_, &emptied_);
  ASSERT_NE(index_.find("a"), nullptr);
  EXPECT_EQ(index_.find("a")->size, 100u);
  EXPECT_EQ(index_.used(), 150u);
  EXPECT_EQ(index_.size(), 2u);
  const auto meta = index_.meta("b");
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(meta->checksum, 0xbu);
  EXPECT_FALSE(meta->whole_sum);
  const std::uint64_t gen = index_.find("a")->generation;
  index_.install("a", nullptr, 0, 10, 0xaa, 3, &unlink_, &emptied_);
  EXPECT_EQ(index_.used(), 60u);
  EXPECT_NE(index_.find("a")->generation, gen) << "a re-published object gets a new generation";
  EXPECT_FALSE(unlink_);
  EXPECT_TRUE(index_.superseded("a", 2));
  EXPECT_FALSE(index_.superseded("a", 3)) << "equal seqs: the later one wins";
  EXPECT_FALSE(index_.superseded("new", 1));
  index_.erase("a", &emptied_);
  EXPECT_EQ(index_.find("a"), nullptr);
  EXPECT_EQ(index_.used(), 50u);
  std::vector<std::pair<std::string, ObjectMeta>> all;
  index_.list(&all);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, "b");
}

TEST_F(FileIndexTest, TheLruOrderFollowsPutsAndGets) {
  for (int i = 0; i < 4; ++i)
    index_.install("k" + std::to_string(i), nullptr, 0, 10, 0, i + 1, &unlink_, &emptied_);
  EXPECT_EQ(index_.lru_victims(1), std::vector<std::string>{"k0"});
  index_.touch(*index_.find("k0"));  // a get
  EXPECT_EQ(index_.lru_victims(15), (std::vector<std::string>{"k1", "k2"}));
  index_.install("k1", nullptr, 0, 10, 0, 9, &unlink_, &emptied_);  // a put
  EXPECT_EQ(index_.lru_victims(1000), (std::vector<std::string>{"k2", "k3", "k0", "k1"}));
  EXPECT_TRUE(index_.lru_victims(0).empty());
}

TEST_F(FileIndexTest, ReservationsCountAgainstTheCapacity) {
  index_.install("a", nullptr, 0, 600, 0, 1, &unlink_, &emptied_);
  EXPECT_TRUE(index_.try_reserve(300, 1000));
  EXPECT_FALSE(index_.try_reserve(200, 1000)) << "600 stored + 300 being written + 200 > 1000";
  EXPECT_FALSE(index_.try_reserve(2000, 1000));
  EXPECT_EQ(index_.reserved(), 300u);
  index_.unreserve(300);
  EXPECT_TRUE(index_.try_reserve(400, 1000));
  EXPECT_TRUE(index_.try_reserve(1 << 30, kUnbounded));
}

TEST_F(FileIndexTest, PackedVersionsMoveBytesBetweenLiveAndDead) {
  auto p1 = add_pack(1, {{"a", 100}, {"b", 5000}});
  EXPECT_EQ(index_.packs().dead_bytes(), io_round_up(100) + io_round_up(5000)) << "registered all dead";
  index_.install("a", p1, 4096, 100, 0, 1, &unlink_, &emptied_);
  index_.install("b", p1, 8192, 5000, 0, 1, &unlink_, &emptied_);
  index_.packs().unpin(1, &emptied_);
  EXPECT_TRUE(emptied_.empty());
  EXPECT_EQ(index_.packs().live_bytes(), io_round_up(100) + io_round_up(5000));
  EXPECT_EQ(index_.packs().dead_bytes(), 0u);
  EXPECT_EQ(index_.packs().packed_objects(), 2u);

  // An object file over a packed version: the packed bytes die, and the entry
  // remembers that a packed version may still hide in the pack.
  index_.install("a", nullptr, 0, 300000, 0, 5, &unlink_, &emptied_);
  EXPECT_FALSE(unlink_);
  EXPECT_EQ(index_.find("a")->shadow_seq, 1u);
  EXPECT_EQ(index_.packs().dead_bytes(), io_round_up(100));
  // A packed version over an object file: the caller unlinks the file.
  auto p2 = add_pack(6, {{"a", 200}});
  index_.install("a", p2, 4096, 200, 0, 6, &unlink_, &emptied_);
  index_.packs().unpin(6, &emptied_);
  EXPECT_TRUE(unlink_);
  // Removing b empties p1 (a's record there is dead): it is handed back to unlink.
  index_.erase("b", &emptied_);
  ASSERT_EQ(emptied_.size(), 1u);
  EXPECT_EQ(emptied_[0], p1);
  EXPECT_EQ(index_.packs().count(), 1u);
  EXPECT_EQ(index_.packs().dead_bytes(), 0u) << "an emptied pack's dead bytes leave with it";
}

TEST_F(FileIndexTest, ARecordThatLostAtBirthShadowsTheNewerVersion) {
  index_.install("k", nullptr, 0, 10, 0, 8, &unlink_, &emptied_);
  auto p = add_pack(7, {{"k", 10}});
  ASSERT_TRUE(index_.superseded("k", 7));
  index_.shadow("k", 7);
  EXPECT_EQ(index_.find("k")->shadow_seq, 7u);
  index_.packs().unpin(7, &emptied_);
  ASSERT_EQ(emptied_.size(), 1u) << "nothing in it lives";
}

TEST_F(FileIndexTest, RelocationKeepsTheGenerationAndTheLruOrder) {
  auto from = add_pack(1, {{"a", 1000}, {"b", 1000}});
  index_.install("a", from, 4096, 1000, 0x1, 1, &unlink_, &emptied_);
  index_.install("b", from, 8192, 1000, 0x2, 1, &unlink_, &emptied_);
  index_.packs().unpin(1, &emptied_);
  const std::uint64_t gen = index_.find("a")->generation;
  auto to = add_pack(2, {{"a", 1000}});
  index_.relocate(*index_.find("a"), to, 4096, 0x11, &emptied_);
  index_.packs().unpin(2, &emptied_);
  const IndexEntry& e = *index_.find("a");
  EXPECT_EQ(e.pack, to);
  EXPECT_EQ(e.checksum, 0x11u);
  EXPECT_EQ(e.generation, gen);
  EXPECT_EQ(index_.lru_victims(1), std::vector<std::string>{"a"}) << "not a use";
  EXPECT_EQ(index_.packs().find(1)->live_objects, 1u);
  EXPECT_EQ(index_.packs().find(2)->live_objects, 1u);
}

TEST_F(FileIndexTest, LoadedEntriesTakeTheOrderTheyAreOffered) {
  for (const char* key : {"oldest", "middle", "newest"}) {
    IndexEntry e;
    e.size = 10;
    e.seq = 1;
    index_.load(key, e);
  }
  EXPECT_EQ(index_.used(), 30u);
  EXPECT_EQ(index_.lru_victims(1000), (std::vector<std::string>{"oldest", "middle", "newest"}));
  EXPECT_NE(index_.find("oldest")->generation, index_.find("newest")->generation);
}

}  // namespace
}  // namespace ferry::xfer::store
