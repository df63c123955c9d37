// The file tier's streaming (streaming.h, file_tier_stream.cpp): round trips
// in both I/O modes and across helper threads, interchange with put() and
// get(), restarts, damage, a source that fails, capacity and a full disk.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_tier_test_util.h"
#include "xfer/store/streaming.h"

namespace ferry::xfer::store {
namespace {

using namespace file_test;
using test::get_one;
using test::in_child;
using test::put_one;
using test::TempDir;

// A source over bytes in memory that can be told to fail at an offset (or,
// lent, to stop lending from one), and that records which threads read or
// hashed it.
class MemorySource final : public PieceSource {
 public:
  explicit MemorySource(const std::vector<std::uint8_t>& bytes, std::uint64_t fail_at = ~0ull, bool lend = false,
                        std::uint64_t lend_until = ~0ull)
      : bytes_(bytes), fail_at_(fail_at), lend_(lend), lend_until_(lend_until) {}
  const std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override {
    return lend_ && (at == 0 || at < lend_until_) ? bytes_.data() + at : nullptr;
  }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault& fault) const noexcept override {
    {
      std::lock_guard lock(mu_);
      threads_.insert(std::this_thread::get_id());
    }
    if (at <= fail_at_ && fail_at_ < at + len)
      return fault.raise(XferStatus::IoError, "the application's memory went away");
    leaf_checksums({bytes_.data() + at, len}, out);
    return XferStatus::Ok;
  }
  XferStatus read(std::uint64_t at, MutableByteView into, Fault& fault) const noexcept override {
    {
      std::lock_guard lock(mu_);
      threads_.insert(std::this_thread::get_id());
    }
    if (at + into.size > bytes_.size()) return fault.raise(XferStatus::InvalidDesc, "read past the source's end");
    if (at <= fail_at_ && fail_at_ < at + into.size)
      return fault.raise(XferStatus::IoError, "the application's memory went away");
    std::memcpy(into.data, bytes_.data() + at, into.size);
    return XferStatus::Ok;
  }
  std::size_t threads() const {
    std::lock_guard lock(mu_);
    return threads_.size();
  }
  bool touched_by(std::thread::id id) const {
    std::lock_guard lock(mu_);
    return threads_.contains(id);
  }

 private:
  const std::vector<std::uint8_t>& bytes_;
  std::uint64_t fail_at_;
  bool lend_;
  std::uint64_t lend_until_;
  mutable std::mutex mu_;
  mutable std::unordered_set<std::thread::id> threads_;
};

// A sink over bytes in memory that records which threads hashed it.
class MemorySink final : public PieceSink {
 public:
  explicit MemorySink(std::vector<std::uint8_t>& bytes, bool lend = false) : bytes_(bytes), lend_(lend) {}
  std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override {
    return lend_ ? bytes_.data() + at : nullptr;
  }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
    {
      std::lock_guard lock(mu_);
      threads_.insert(std::this_thread::get_id());
    }
    leaf_checksums({bytes_.data() + at, len}, out);
    return XferStatus::Ok;
  }
  bool hashed_by(std::thread::id id) const {
    std::lock_guard lock(mu_);
    return threads_.contains(id);
  }
  std::size_t threads() const {
    std::lock_guard lock(mu_);
    return threads_.size();
  }
  XferStatus write(std::uint64_t at, ByteView from, Fault& fault) const noexcept override {
    if (at + from.size > bytes_.size()) return fault.raise(XferStatus::InvalidDesc, "write past the sink's end");
    std::memcpy(bytes_.data() + at, from.data, from.size);
    return XferStatus::Ok;
  }

 private:
  std::vector<std::uint8_t>& bytes_;
  bool lend_;
  mutable std::mutex mu_;
  mutable std::unordered_set<std::thread::id> threads_;
};

XferStatus put_streamed_from(FileTier& t, const std::string& key, std::uint64_t size, const PieceSource& source) {
  Fault fault;
  std::uint64_t sum = 0;
  return t.put_streamed(key, size, source, &sum, fault);
}

XferStatus put_streamed(FileTier& t, const std::string& key, const std::vector<std::uint8_t>& data,
                        std::uint64_t* sum = nullptr, std::string* error = nullptr, bool lend = false) {
  MemorySource source(data, ~0ull, lend);
  Fault fault;
  std::uint64_t computed = 0;
  const XferStatus s = t.put_streamed(key, data.size(), source, &computed, fault);
  if (sum != nullptr) *sum = computed;
  if (error != nullptr) *error = fault.detail();
  return s;
}

struct Streamed {
  std::optional<XferStatus> status;
  std::uint64_t size = 0;
  std::vector<std::uint8_t> data;
  std::string error;
};

Streamed get_streamed(FileTier& t, const std::string& key, std::uint64_t capacity, bool lend = false) {
  Streamed out;
  out.data.assign(capacity, 0);
  MemorySink sink(out.data, lend);
  Fault fault;
  out.status = t.get_streamed(key, capacity, sink, &out.size, fault);
  out.error = fault.detail();
  if (out.status == XferStatus::Ok) out.data.resize(out.size);
  return out;
}

class FileTierStream : public FileTierModesBase {};

TEST_P(FileTierStream, RoundTripsAndInterchangesWithPutAndGet) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  // Above the pack threshold: within a piece, several pieces with a tail that
  // is no whole page, and no whole leaf; and with O_DIRECT more pieces than
  // the tier keeps in flight, so that its slots are used again.
  // Sources and sinks that lend their memory (written and read in place) and
  // ones that do not (copied through the tier's buffer).
  for (const bool lend : {false, true})
  for (const std::size_t n : {std::size_t{300000}, std::size_t{(3 << 20) + 4097}, std::size_t{(21 << 20) + 8191}}) {
    SCOPED_TRACE(lend ? "lent" : "copied");
    const auto data = random_bytes(n, n);
    const std::string key = "s/" + std::to_string(n);
    std::uint64_t sum = 0;
    std::string error;
    ASSERT_EQ(put_streamed(*t, key, data, &sum, &error, lend), XferStatus::Ok) << error;
    EXPECT_EQ(sum, checksum({data.data(), data.size()}));
    EXPECT_EQ(t->stat(key)->checksum, sum);
    EXPECT_EQ(t->stat(key)->size, n);
    // With O_DIRECT the second round replaces the first's objects, whose
    // files stay as spares; nothing else is left under a temporary name.
    EXPECT_EQ(temp_files_in(dir.path()), t->spare_files());
    EXPECT_EQ(t->spare_files() > 0, direct() && lend);
    const auto back = get_streamed(*t, key, n + 100, lend);
    ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
    EXPECT_EQ(back.size, n);
    EXPECT_EQ(back.data, data);
    EXPECT_EQ(get_one(*t, key, n).data, data) << "get() reads a streamed object";
    // And the other way: an object put() whole streams back.
    const auto other = random_bytes(n, n + 1);
    ASSERT_EQ(put_one(*t, key + "/put", other), XferStatus::Ok);
    const auto streamed = get_streamed(*t, key + "/put", n);
    ASSERT_EQ(streamed.status, XferStatus::Ok) << streamed.error;
    EXPECT_EQ(streamed.data, other);
  }
  // A restart finds streamed objects, and they stream back.
  t.reset();
  t = make(dir.path());
  const auto data = random_bytes((3 << 20) + 4097, (3 << 20) + 4097);
  const auto back = get_streamed(*t, "s/" + std::to_string(data.size()), data.size());
  ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
  EXPECT_EQ(back.data, data);
}

TEST_P(FileTierStream, AnswersMissesSmallBuffersAndPackedObjects) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  auto miss = get_streamed(*t, "absent", 1 << 20);
  EXPECT_EQ(miss.status, XferStatus::NotFound);
  EXPECT_EQ(miss.error, "") << "a miss is an answer, not raised";
  const auto data = random_bytes(1 << 20, 3);
  ASSERT_EQ(put_streamed(*t, "big", data), XferStatus::Ok);
  const auto small = get_streamed(*t, "big", (1 << 20) - 1);
  EXPECT_EQ(small.status, XferStatus::TooLarge);
  EXPECT_EQ(small.size, 1u << 20) << "TooLarge carries the object's size";
  // A packed object streams back where packs are read by offset (buffered);
  // O_DIRECT leaves it to get().
  const auto packed = random_bytes(10000, 4);
  ASSERT_EQ(put_one(*t, "packed", packed), XferStatus::Ok);
  const auto got = get_streamed(*t, "packed", 1 << 20);
  if (direct() && packs()) {
    EXPECT_FALSE(got.status.has_value());
  } else {
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, packed);
  }
}

TEST_P(FileTierStream, DamageIsAChecksumMismatchNamingTheFile) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto data = random_bytes((2 << 20) + 5, 6);
  ASSERT_EQ(put_streamed(*t, "flipped", data), XferStatus::Ok);
  flip_byte(dir.sub(object_file_name("flipped")), kFileHeaderSize + (1 << 20) + 3);
  auto back = get_streamed(*t, "flipped", data.size());
  EXPECT_EQ(back.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(back.error.find("checksum mismatch"), std::string::npos) << back.error;
  EXPECT_NE(back.error.find(object_file_name("flipped")), std::string::npos) << back.error;

  ASSERT_EQ(put_streamed(*t, "cut", data), XferStatus::Ok);
  ASSERT_EQ(truncate(dir.sub(object_file_name("cut")).c_str(), kFileHeaderSize + (1 << 20)), 0);
  back = get_streamed(*t, "cut", data.size());
  EXPECT_EQ(back.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(back.error.find("truncated"), std::string::npos) << back.error;
}

// The index gives the size a read is laid out for (O_DIRECT reads the header
// beside the data); the file's header is the authority. A file replaced by
// a version of another size, behind the tier's back, reads as that version.
TEST_P(FileTierStream, AFileReplacedBehindTheIndexReadsAsItsHeaderSays) {
  TempDir dir, other;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto indexed = random_bytes((3 << 20) + 11, 21);
  for (const std::uint64_t replaced_size : {std::uint64_t{(1 << 20) + 4097}, std::uint64_t{(5 << 20) + 3}}) {
    const auto replacement = random_bytes(replaced_size, 22);
    {
      auto writer = make(other.path());
      ASSERT_EQ(put_streamed(*writer, "k", replacement), XferStatus::Ok);
    }
    ASSERT_EQ(put_streamed(*t, "k", indexed), XferStatus::Ok);
    ASSERT_EQ(rename(other.sub(object_file_name("k")).c_str(), dir.sub(object_file_name("k")).c_str()), 0);

    // The buffer must hold what the index says (start_get checks that first).
    const auto back = get_streamed(*t, "k", std::max<std::uint64_t>(replaced_size, indexed.size()));
    ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
    EXPECT_EQ(back.size, replaced_size);
    EXPECT_EQ(back.data, replacement);
    if (replaced_size > indexed.size()) {
      const auto small = get_streamed(*t, "k", indexed.size());
      EXPECT_EQ(small.status, XferStatus::TooLarge) << small.error;
      EXPECT_EQ(small.size, replaced_size);
    }
  }
}

TEST_P(FileTierStream, ASourceThatFailsLeavesTheOlderVersionAndNoTemporary) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto v1 = random_bytes(2 << 20, 7), v2 = random_bytes(2 << 20, 8);
  ASSERT_EQ(put_streamed(*t, "k", v1), XferStatus::Ok);
  for (const bool lend : {false, true}) {
    MemorySource failing(v2, (1 << 20) + 10, lend);
    Fault fault;
    std::uint64_t sum = 0;
    EXPECT_EQ(t->put_streamed("k", v2.size(), failing, &sum, fault), XferStatus::IoError);
    EXPECT_NE(fault.detail().find("went away"), std::string::npos) << fault.detail();
    EXPECT_EQ(temp_files_in(dir.path()), 0u);
  }
  const auto back = get_streamed(*t, "k", v1.size());
  ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
  EXPECT_EQ(back.data, v1);
  EXPECT_EQ(t->used(), v1.size()) << "the failed version's reservation is given back";
}

TEST_P(FileTierStream, ATierAtItsCapacityAnswersNoSpaceWithoutRaising) {
  TempDir dir;
  FileTierOptions o = options(dir.path());
  o.capacity = 3 << 20;
  auto t = make(o);
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto data = random_bytes(2 << 20, 9);
  ASSERT_EQ(put_streamed(*t, "a", data), XferStatus::Ok);
  std::string error;
  EXPECT_EQ(put_streamed(*t, "b", data, nullptr, &error), XferStatus::NoSpace);
  EXPECT_EQ(error, "");
  EXPECT_FALSE(t->stat("b").has_value());
  EXPECT_EQ(temp_files_in(dir.path()), 0u);
}

// Page-aligned lent memory: O_DIRECT pieces go to and from the disk in place
// (only the tail, no whole page, through the tier's buffer).
TEST_P(FileTierStream, PageAlignedLentMemoryMovesInPlace) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  class AlignedSource final : public PieceSource {
   public:
    explicit AlignedSource(const std::byte* p) : p_(reinterpret_cast<const std::uint8_t*>(p)) {}
    XferStatus read(std::uint64_t at, MutableByteView into, Fault&) const noexcept override {
      std::memcpy(into.data, p_ + at, into.size);
      return XferStatus::Ok;
    }
    const std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override { return p_ + at; }
    XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
      leaf_checksums({p_ + at, len}, out);
      return XferStatus::Ok;
    }

   private:
    const std::uint8_t* p_;
  };
  class AlignedSink final : public PieceSink {
   public:
    explicit AlignedSink(std::byte* p) : p_(reinterpret_cast<std::uint8_t*>(p)) {}
    XferStatus write(std::uint64_t at, ByteView from, Fault&) const noexcept override {
      std::memcpy(p_ + at, from.data, from.size);
      return XferStatus::Ok;
    }
    std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override { return p_ + at; }
    XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
      leaf_checksums({p_ + at, len}, out);
      return XferStatus::Ok;
    }

   private:
    std::uint8_t* p_;
  };
  // Whole pages only, and a last partial page (whose piece goes through the tier's buffer).
  for (const std::size_t n : {std::size_t{4} << 20, (std::size_t{5} << 20) + 1000}) {
    SCOPED_TRACE(n);
    const auto data = random_bytes(n, 12);
    AlignedBuffer aligned(n);
    std::memcpy(aligned.data(), data.data(), n);
    Fault fault;
    std::uint64_t sum = 0;
    ASSERT_EQ(t->put_streamed("aligned", n, AlignedSource(aligned.data()), &sum, fault), XferStatus::Ok)
        << fault.detail();
    EXPECT_EQ(sum, checksum({data.data(), n}));
    AlignedBuffer back(n);
    std::uint64_t size = 0;
    ASSERT_EQ(t->get_streamed("aligned", n, AlignedSink(back.data()), &size, fault), XferStatus::Ok)
        << fault.detail();
    EXPECT_EQ(size, n);
    EXPECT_EQ(std::memcmp(back.data(), data.data(), n), 0);
    EXPECT_EQ(get_one(*t, "aligned", n).data, data);
  }
}

// Lent memory whose pages vanish under the kernel's copy (a shared file cut
// short): the read fails with EFAULT, reported as the application's memory,
// not the tier's file; the tier goes on.
TEST_P(FileTierStream, LentMemoryThatVanishesIsTheApplicationsFailure) {
  TempDir dir;
  auto t = make(dir.path());
  if (!t) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  const auto data = random_bytes(2 << 20, 13);
  ASSERT_EQ(put_streamed(*t, "k", data), XferStatus::Ok);
  const int fd = memfd_create("ferry-vanishing-sink", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, 2 << 20), 0);
  auto* map = static_cast<std::uint8_t*>(mmap(nullptr, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(ftruncate(fd, 0), 0);  // every page of the mapping is gone
  class VanishedSink final : public PieceSink {
   public:
    explicit VanishedSink(std::uint8_t* p) : p_(p) {}
    XferStatus write(std::uint64_t, ByteView, Fault& fault) const noexcept override {
      return fault.raise(XferStatus::Internal, "the tier should have read into the lent pages");
    }
    std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override { return p_ + at; }
    XferStatus leaf_sums(std::uint64_t, std::size_t, std::uint64_t*, Fault& fault) const noexcept override {
      return fault.raise(XferStatus::Internal, "nothing should have landed to hash");
    }

   private:
    std::uint8_t* p_;
  };
  Fault fault;
  std::uint64_t size = 0;
  EXPECT_EQ(t->get_streamed("k", data.size(), VanishedSink(map), &size, fault), XferStatus::IoError);
  EXPECT_NE(fault.detail().find("went away while being filled"), std::string::npos) << fault.detail();
  munmap(map, 2 << 20);
  close(fd);
  const auto back = get_streamed(*t, "k", data.size());
  ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
  EXPECT_EQ(back.data, data);
}

INSTANTIATE_TEST_SUITE_P(Modes, FileTierStream,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()), mode_name);

// Large objects split across the helper threads when the call runs alone:
// the source is read from several threads, and the object comes back whole.
TEST(FileTierStreamSplit, ALargeObjectIsCutAcrossTheHelpers) {
  TempDir dir;
  FileTierOptions o = opts(dir.path());
  o.threads = 4;
  FileTier t(o);
  const auto data = random_bytes((40 << 20) + 12345, 10);
  MemorySource source(data);
  Fault fault;
  std::uint64_t sum = 0;
  ASSERT_EQ(t.put_streamed("large", data.size(), source, &sum, fault), XferStatus::Ok) << fault.detail();
  EXPECT_GE(source.threads(), 2u);
  EXPECT_EQ(sum, checksum({data.data(), data.size()}));
  const auto back = get_streamed(t, "large", data.size());
  ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
  EXPECT_EQ(back.data, data);
  // Damage in any part is caught.
  flip_byte(dir.sub(object_file_name("large")), kFileHeaderSize + (35 << 20));
  EXPECT_EQ(get_streamed(t, "large", data.size()).status, XferStatus::ChecksumMismatch);
}

// A large lent object alone in the tier: one thread writes it while another
// hashes what was written, and the checksum is the whole object's.
TEST(FileTierStreamSplit, ALentObjectIsHashedBesideItsWriter) {
  TempDir dir;
  FileTierOptions o = opts(dir.path());
  o.threads = 2;
  FileTier t(o);
  const auto data = random_bytes((20 << 20) + 12345, 14);
  MemorySource source(data, ~0ull, true);
  Fault fault;
  std::uint64_t sum = 0;
  ASSERT_EQ(t.put_streamed("lent", data.size(), source, &sum, fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(source.threads(), 1u) << "one thread hashed every piece";
  EXPECT_FALSE(source.touched_by(std::this_thread::get_id())) << "a helper, not the writing caller";
  EXPECT_EQ(sum, checksum({data.data(), data.size()}));
  const auto back = get_streamed(t, "lent", data.size(), true);
  ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
  EXPECT_EQ(back.data, data);
  flip_byte(dir.sub(object_file_name("lent")), kFileHeaderSize + (19 << 20) + 7);
  EXPECT_EQ(get_streamed(t, "lent", data.size()).status, XferStatus::ChecksumMismatch);
}

// A source whose reads wait until released: a call that stays in the tier.
class WaitingSource final : public PieceSource {
 public:
  explicit WaitingSource(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
  XferStatus read(std::uint64_t at, MutableByteView into, Fault&) const noexcept override {
    entered = true;
    while (!release) std::this_thread::yield();
    std::memcpy(into.data, bytes_.data() + at, into.size);
    return XferStatus::Ok;
  }
  mutable std::atomic<bool> entered{false};
  std::atomic<bool> release{false};

 private:
  const std::vector<std::uint8_t>& bytes_;
};

// Beside another call, while cores are idle, a lent put and a lent get are
// each copied by their caller while a helper hashes behind the copy.
TEST(FileTierStreamSplit, BesideAnotherCallLentObjectsAreHashedByAHelper) {
  TempDir dir;
  FileTierOptions o = opts(dir.path());
  o.threads = 2;
  o.cores = 8;
  FileTier t(o);
  const auto small = random_bytes(1 << 20, 18);
  WaitingSource waiting(small);
  std::thread other([&] { EXPECT_EQ(put_streamed_from(t, "other", small.size(), waiting), XferStatus::Ok); });
  while (!waiting.entered) std::this_thread::yield();

  const auto data = random_bytes((12 << 20) + 777, 19);
  MemorySource source(data, ~0ull, true);
  Fault fault;
  std::uint64_t sum = 0;
  ASSERT_EQ(t.put_streamed("lent", data.size(), source, &sum, fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(sum, checksum({data.data(), data.size()}));
  EXPECT_FALSE(source.touched_by(std::this_thread::get_id())) << "the put was hashed by a helper";
  std::vector<std::uint8_t> back(data.size());
  MemorySink sink(back, true);
  std::uint64_t size = 0;
  ASSERT_EQ(t.get_streamed("lent", back.size(), sink, &size, fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(back, data);
  EXPECT_EQ(sink.threads(), 1u);
  EXPECT_FALSE(sink.hashed_by(std::this_thread::get_id())) << "the get was hashed by a helper";
  // Damage is caught on that path too.
  flip_byte(dir.sub(object_file_name("lent")), kFileHeaderSize + (11 << 20) + 5);
  EXPECT_EQ(t.get_streamed("lent", back.size(), sink, &size, fault), XferStatus::ChecksumMismatch);

  waiting.release = true;
  other.join();
}

// Beside one other call, a large get is read by its caller and half the
// helpers: two stripes of one chunk, read at once, each get half.
TEST(FileTierStreamSplit, BesideOneOtherCallAGetTakesHalfTheHelpers) {
  TempDir dir;
  FileTierOptions o = opts(dir.path());
  o.threads = 5;
  FileTier t(o);
  const auto data = random_bytes((40 << 20) + 4321, 23);
  MemorySource source(data);
  Fault fault;
  std::uint64_t sum = 0;
  ASSERT_EQ(t.put_streamed("large", data.size(), source, &sum, fault), XferStatus::Ok) << fault.detail();
  const auto small = random_bytes(1 << 20, 24);
  WaitingSource waiting(small);
  std::thread other([&] { EXPECT_EQ(put_streamed_from(t, "other", small.size(), waiting), XferStatus::Ok); });
  while (!waiting.entered) std::this_thread::yield();
  std::vector<std::uint8_t> back(data.size());
  MemorySink sink(back, true);
  std::uint64_t size = 0;
  ASSERT_EQ(t.get_streamed("large", back.size(), sink, &size, fault), XferStatus::Ok) << fault.detail();
  EXPECT_EQ(back, data);
  EXPECT_EQ(sink.threads(), 3u) << "the caller and 2 of the 4 helpers";
  flip_byte(dir.sub(object_file_name("large")), kFileHeaderSize + (30 << 20) + 3);
  EXPECT_EQ(t.get_streamed("large", back.size(), sink, &size, fault), XferStatus::ChecksumMismatch);
  waiting.release = true;
  other.join();
}

// Lent memory that logs the ranges the tier asks for in place.
class InPlaceLog {
 public:
  void add(std::uint64_t at, std::size_t len) {
    std::lock_guard lock(mu_);
    ranges_.emplace_back(at, len);
  }
  // The pieces (ranges of at most a buffered piece; the others are the checks
  // of a whole object or part) tile [0, size), and each ends where the file's
  // offset is a multiple of 256 KiB, but the object's last.
  void expect_pieces_on_file_boundaries(std::uint64_t size) {
    constexpr std::uint64_t kPiece = 256 << 10;
    std::vector<std::pair<std::uint64_t, std::size_t>> pieces;
    for (const auto& r : ranges_)
      if (r.second <= kPiece) pieces.push_back(r);
    std::sort(pieces.begin(), pieces.end());
    ASSERT_FALSE(pieces.empty());
    std::uint64_t next = 0;
    for (const auto& [at, len] : pieces) {
      EXPECT_EQ(at, next) << "the pieces tile the object";
      next = at + len;
      if (next != size) {
        EXPECT_EQ((kFileHeaderSize + next) % kPiece, 0u) << "a piece ends at data offset " << next;
      }
    }
    EXPECT_EQ(next, size);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::uint64_t, std::size_t>> ranges_;
};

class LoggedSource final : public PieceSource {
 public:
  LoggedSource(const std::vector<std::uint8_t>& bytes, InPlaceLog& log) : bytes_(bytes), log_(log) {}
  const std::uint8_t* in_place(std::uint64_t at, std::size_t len) const noexcept override {
    log_.add(at, len);
    return bytes_.data() + at;
  }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
    leaf_checksums({bytes_.data() + at, len}, out);
    return XferStatus::Ok;
  }
  XferStatus read(std::uint64_t at, MutableByteView into, Fault&) const noexcept override {
    std::memcpy(into.data, bytes_.data() + at, into.size);
    return XferStatus::Ok;
  }

 private:
  const std::vector<std::uint8_t>& bytes_;
  InPlaceLog& log_;
};

class LoggedSink final : public PieceSink {
 public:
  LoggedSink(std::vector<std::uint8_t>& bytes, InPlaceLog& log) : bytes_(bytes), log_(log) {}
  std::uint8_t* in_place(std::uint64_t at, std::size_t len) const noexcept override {
    log_.add(at, len);
    return bytes_.data() + at;
  }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
    leaf_checksums({bytes_.data() + at, len}, out);
    return XferStatus::Ok;
  }
  XferStatus write(std::uint64_t at, ByteView from, Fault&) const noexcept override {
    std::memcpy(bytes_.data() + at, from.data, from.size);
    return XferStatus::Ok;
  }

 private:
  std::vector<std::uint8_t>& bytes_;
  InPlaceLog& log_;
};

// Lent pieces end where the file's offset (the data starts after the 4 KiB
// header) is a multiple of 256 KiB, so that each write fills whole folios of
// the page cache; the leaves, aligned to the data, still hash right. Alone
// (one thread), and with a helper hashing behind the copy.
TEST(FileTierStreamSplit, LentPiecesEndOnTheFilesPieceBoundaries) {
  for (const unsigned threads : {1u, 2u}) {
    SCOPED_TRACE("threads=" + std::to_string(threads));
    TempDir dir;
    FileTierOptions o = opts(dir.path());
    o.threads = threads;
    o.cores = 8;
    FileTier t(o);
    const auto data = random_bytes((9 << 20) + 4321, 30 + threads);
    InPlaceLog wrote;
    Fault fault;
    std::uint64_t sum = 0;
    ASSERT_EQ(t.put_streamed("lent", data.size(), LoggedSource(data, wrote), &sum, fault), XferStatus::Ok)
        << fault.detail();
    EXPECT_EQ(sum, checksum({data.data(), data.size()}));
    wrote.expect_pieces_on_file_boundaries(data.size());

    std::vector<std::uint8_t> back(data.size());
    InPlaceLog read;
    std::uint64_t size = 0;
    ASSERT_EQ(t.get_streamed("lent", back.size(), LoggedSink(back, read), &size, fault), XferStatus::Ok)
        << fault.detail();
    EXPECT_EQ(back, data);
    read.expect_pieces_on_file_boundaries(data.size());
    // Damage to the leaf that straddles the first pieces (file offset 256 KiB + 100
    // is data byte 252 KiB + 100, in the leaf of 192-256 KiB): caught.
    flip_byte(dir.sub(object_file_name("lent")), (256 << 10) + 100);
    EXPECT_EQ(t.get_streamed("lent", back.size(), LoggedSink(back, read), &size, fault),
              XferStatus::ChecksumMismatch);
  }
}

// With every core busy, a streamed object is copied and hashed by its caller
// alone: the hash would only take turns with the copies on those cores.
TEST(FileTierStreamSplit, WithEveryCoreBusyNoHelperIsTaken) {
  TempDir dir;
  FileTierOptions o = opts(dir.path());
  o.threads = 2;
  o.cores = 2;
  FileTier t(o);
  const auto small = random_bytes(1 << 20, 20);
  WaitingSource waiting(small);
  std::thread other([&] { EXPECT_EQ(put_streamed_from(t, "other", small.size(), waiting), XferStatus::Ok); });
  while (!waiting.entered) std::this_thread::yield();
  const auto data = random_bytes(12 << 20, 21);
  MemorySource source(data, ~0ull, true);
  Fault fault;
  std::uint64_t sum = 0;
  ASSERT_EQ(t.put_streamed("lent", data.size(), source, &sum, fault), XferStatus::Ok) << fault.detail();
  EXPECT_TRUE(source.touched_by(std::this_thread::get_id()));
  EXPECT_EQ(source.threads(), 1u);
  waiting.release = true;
  other.join();
}

// Lent memory that goes away under either thread fails the put with the
// application's error; the older version stays and no temporary is left.
TEST(FileTierStreamSplit, LentMemoryThatGoesAwayBesideTheWriterFailsOnlyThatPut) {
  TempDir dir;
  FileTierOptions o = opts(dir.path());
  o.threads = 2;
  FileTier t(o);
  const auto v1 = random_bytes(12 << 20, 15), v2 = random_bytes(12 << 20, 16);
  ASSERT_EQ(put_streamed(t, "k", v1, nullptr, nullptr, true), XferStatus::Ok);
  for (const bool hasher_fails : {true, false}) {
    SCOPED_TRACE(hasher_fails ? "the hasher's piece fails" : "the writer's piece is no longer lent");
    MemorySource source(v2, hasher_fails ? (9 << 20) + 5 : ~0ull, true, hasher_fails ? ~0ull : 10 << 20);
    Fault fault;
    std::uint64_t sum = 0;
    EXPECT_EQ(t.put_streamed("k", v2.size(), source, &sum, fault), XferStatus::IoError);
    EXPECT_NE(fault.detail().find("went away"), std::string::npos) << fault.detail();
    EXPECT_EQ(temp_files_in(dir.path()), 0u);
    const auto back = get_streamed(t, "k", v1.size());
    ASSERT_EQ(back.status, XferStatus::Ok) << back.error;
    EXPECT_EQ(back.data, v1);
  }
}

// A write the file system refuses (here: the file size limit, EFBIG) is NoSpace,
// raised with the cause, and leaves nothing behind.
TEST(FileTierStreamSplit, AWriteTheDiskRefusesIsNoSpaceAndLeavesNothing) {
  TempDir dir;
  const int rc = in_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 77;
    FileTier t(opts(dir.path()));
    const auto data = random_bytes(2 << 20, 11);
    std::string error;
    if (put_streamed(t, "big", data, nullptr, &error) != XferStatus::NoSpace) return 2;
    if (error.find("File too large") == std::string::npos) return 3;
    if (temp_files_in(dir.path()) != 0) return 4;
    if (t.stat("big")) return 5;
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "cannot lower the file size limit";
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace ferry::xfer::store
