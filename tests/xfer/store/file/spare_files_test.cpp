// Spare files (spare_files.h): the pool's rules on its own, then the file
// tier with O_DIRECT reusing replaced objects' files and emptied packs, and
// readers racing the replacements of what they read.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_tier_test_util.h"
#include "xfer/store/file/spare_files.h"

namespace ferry::xfer::store::file_test {
namespace {

using test::get_one;
using test::put_one;

// A file of `size` bytes in dir, named name.
void make_file(const std::string& dir, const std::string& name, std::size_t size) {
  std::ofstream(dir + "/" + name, std::ios::binary) << std::string(size, 'x');
}

bool exists(const std::string& dir, const std::string& name) {
  return fs::exists(dir + "/" + name);
}

class Pool {
 public:
  Pool()
      : fd_(open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY)), spares_(std::make_unique<SpareFiles>(fd_)) {}
  ~Pool() {
    spares_.reset();
    close(fd_);
  }
  const std::string& dir() const { return dir_.path(); }
  SpareFiles& spares() { return *spares_; }
  void drop() { spares_.reset(); }

 private:
  test::TempDir dir_;
  int fd_;
  std::unique_ptr<SpareFiles> spares_;
};

TEST(SpareFiles, TakesTheSmallestThatFitsAndNoneTwiceAsLarge) {
  Pool p;
  for (const auto& [name, size] : {std::pair{"a", 8192}, {"b", 4096}, {"c", 20000}}) {
    make_file(p.dir(), name, size);
    p.spares().offer(name, size);
  }
  EXPECT_FALSE(p.spares().take(30000)) << "none is large enough";
  EXPECT_FALSE(p.spares().take(1000)) << "4096 bytes is more than twice 1000";
  const auto small = p.spares().take(4000);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->name, "b");
  const auto next = p.spares().take(4100);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->name, "a") << "the next smallest, within twice the size";
  EXPECT_EQ(p.spares().reused(), 2u);
  EXPECT_EQ(p.spares().count(), 1u);
}

TEST(SpareFiles, ASpareSwappedWhileAReaderWasOpenWaitsUntilNoReaderIs) {
  Pool p;
  make_file(p.dir(), "old", 4096);
  p.spares().reader_opening();  // a reader of the old version, open across the swap
  p.spares().offer("old", 4096);
  p.spares().reader_opening();  // and one that came after
  EXPECT_FALSE(p.spares().take(4096)) << "the first reader may still read it";
  p.spares().reader_closed();
  EXPECT_FALSE(p.spares().take(4096)) << "one reader is still open";
  p.spares().reader_closed();
  EXPECT_TRUE(p.spares().take(4096)) << "no reader was open a moment ago";

  make_file(p.dir(), "quiet", 4096);
  p.spares().offer("quiet", 4096);
  EXPECT_TRUE(p.spares().take(4096)) << "no reader was open at the swap";
}

TEST(SpareFiles, ARetiredPackWaitsUntilNoReadHoldsIt) {
  Pool p;
  make_file(p.dir(), "pack", 8192);
  auto read_in_flight = std::make_shared<int>(0);
  p.spares().offer("pack", 8192, read_in_flight);
  p.spares().reader_opening();  // a reader of some object file does not matter to a pack
  EXPECT_FALSE(p.spares().take(8192)) << "a read still holds the pack";
  read_in_flight.reset();
  EXPECT_TRUE(p.spares().take(8192)) << "no read holds it any more";
  p.spares().reader_closed();
}

TEST(SpareFiles, APoolThatIsFullUnlinksWhatItIsOfferedAndItsDestructorTheRest) {
  Pool p;
  for (std::size_t i = 0; i <= SpareFiles::kMaxFiles; ++i) {
    const std::string name = "f" + std::to_string(i);
    make_file(p.dir(), name, 4096);
    p.spares().offer(name, 4096);
  }
  EXPECT_EQ(p.spares().count(), SpareFiles::kMaxFiles);
  EXPECT_FALSE(exists(p.dir(), "f" + std::to_string(SpareFiles::kMaxFiles)));
  make_file(p.dir(), "huge", 16);
  const auto taken = p.spares().take(4096);
  ASSERT_TRUE(taken);
  p.spares().offer("huge", SpareFiles::kMaxBytes);  // past the bytes the pool keeps
  EXPECT_FALSE(exists(p.dir(), "huge"));
  p.drop();
  EXPECT_EQ(files_in(p.dir()), std::vector<std::string>{taken->name}) << "only the one taken out stays";
}

std::size_t packs_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& name : files_in(dir)) n += name.ends_with(".fpk");
  return n;
}

// pack: FileTierOptions::pack_threshold (0: a file per object).
std::unique_ptr<FileTier> direct_tier(const std::string& dir, std::uint64_t pack = 0) {
  FileTierOptions o = opts(dir, true);
  o.pack_threshold = pack;
  try {
    return std::make_unique<FileTier>(o);
  } catch (const Error& e) {
    if (std::string(e.what()).find("O_DIRECT") != std::string::npos) return nullptr;
    throw;
  }
}

TEST(FileTierSpares, AReplacedObjectsFileIsOverwrittenByTheNextPut) {
  test::TempDir dir;
  auto t = direct_tier(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto v1 = random_bytes(1 << 20, 1), v2 = random_bytes(1 << 20, 2),
             b = random_bytes((1 << 20) - 100, 3);
  ASSERT_EQ(put_one(*t, "a", v1), XferStatus::Ok);
  EXPECT_EQ(t->spare_files(), 0u);
  ASSERT_EQ(put_one(*t, "a", v2), XferStatus::Ok);
  EXPECT_EQ(t->spare_files(), 1u) << "the first version's file";
  EXPECT_EQ(temp_files_in(dir.path()), 1u);
  // b is a little smaller: it lands in the spare, cut to its size.
  ASSERT_EQ(put_one(*t, "b", b), XferStatus::Ok);
  EXPECT_EQ(t->spare_files(), 0u) << "b's put took the spare";
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
  EXPECT_EQ(fs::file_size(dir.path() + "/" + object_file_name("b")), kFileHeaderSize + b.size());
  EXPECT_EQ(get_one(*t, "a", 2 << 20).data, v2);
  EXPECT_EQ(get_one(*t, "b", 2 << 20).data, b);
  // A restart reads both, and a spare left behind is removed as any temporary.
  ASSERT_EQ(put_one(*t, "b", v1), XferStatus::Ok);
  EXPECT_EQ(t->spare_files(), 1u);
  t.reset();
  EXPECT_EQ(temp_files_in(dir.path()), 0u) << "the tier unlinks its spares when it closes";
  t = direct_tier(dir.path());
  EXPECT_EQ(get_one(*t, "a", 2 << 20).data, v2);
  EXPECT_EQ(get_one(*t, "b", 2 << 20).data, v1);
}

TEST(FileTierSpares, AnEmptiedPackIsOverwrittenByTheNextPack) {
  test::TempDir dir;
  auto t = direct_tier(dir.path(), 1 << 20);
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto v1 = random_bytes(512 << 10, 1), v2 = random_bytes(512 << 10, 2), b = random_bytes(500 << 10, 3);
  ASSERT_EQ(put_one(*t, "a", v1), XferStatus::Ok);  // a pack of one object
  ASSERT_EQ(put_one(*t, "a", v2), XferStatus::Ok);  // a second pack; the first is empty
  EXPECT_EQ(t->stats().packs, 1u);
  EXPECT_EQ(t->spare_files(), 1u) << "the emptied pack is kept";
  EXPECT_EQ(packs_in(dir.path()), 1u) << "and is out of the packs' names";
  EXPECT_EQ(temp_files_in(dir.path()), 1u);
  // b's pack is a little smaller: it overwrites the spare, cut to its size.
  ASSERT_EQ(put_one(*t, "b", b), XferStatus::Ok);
  EXPECT_EQ(t->spare_files(), 0u) << "b's pack took the spare";
  EXPECT_EQ(t->spare_files_reused(), 1u);
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
  EXPECT_EQ(packs_in(dir.path()), 2u);
  EXPECT_EQ(get_one(*t, "a", 1 << 20).data, v2);
  EXPECT_EQ(get_one(*t, "b", 1 << 20).data, b);
  // A restart reads both from their packs.
  t.reset();
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
  t = direct_tier(dir.path(), 1 << 20);
  EXPECT_EQ(get_one(*t, "a", 1 << 20).data, v2);
  EXPECT_EQ(get_one(*t, "b", 1 << 20).data, b);
}

// Readers of a hot key and a writer replacing it and other keys of its size,
// which take the spares the hot key's replacements leave (object files or
// emptied packs): every read gets one whole version.
void race_readers_and_replacements(FileTier& t, std::size_t size) {
  const std::vector<std::vector<std::uint8_t>> versions{random_bytes(size, 10), random_bytes(size, 11),
                                                        random_bytes(size, 12)};
  ASSERT_EQ(put_one(t, "hot", versions[0]), XferStatus::Ok);
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, wrong{0};
  std::vector<std::string> errors;
  std::mutex errors_mu;
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        std::this_thread::yield();  // moments with no reader, when spares may be reused
        const auto got = get_one(t, "hot", size);
        ++reads;
        bool known = false;
        for (const auto& v : versions) known |= got.data == v;
        if (got.status != XferStatus::Ok || !known) {
          ++wrong;
          std::lock_guard lock(errors_mu);
          if (errors.size() < 5) errors.push_back(got.error.empty() ? "unknown bytes" : got.error);
        }
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(put_one(t, "hot", versions[i % versions.size()]), XferStatus::Ok);
    ASSERT_EQ(put_one(t, "cold" + std::to_string(i % 4), versions[(i + 1) % versions.size()]),
              XferStatus::Ok);
  }
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(wrong.load(), 0) << (errors.empty() ? "" : errors.front());
  EXPECT_GT(t.spare_files_reused(), 0u) << "no put reused a spare: the race was not run";
}

TEST(FileTierSpares, ReadersRacingReplacementsReadOneWholeVersion) {
  test::TempDir dir;
  auto t = direct_tier(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  race_readers_and_replacements(*t, 256 << 10);
}

TEST(FileTierSpares, ReadersRacingPackReplacementsReadOneWholeVersion) {
  test::TempDir dir;
  auto t = direct_tier(dir.path(), 1 << 20);
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  race_readers_and_replacements(*t, 256 << 10);
  EXPECT_EQ(t->stats().packed_objects, 5u) << "every object lives in a pack";
}

}  // namespace
}  // namespace ferry::xfer::store::file_test
