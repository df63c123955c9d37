// The data mover against a fake storage (store/storage.h): which memory each
// block lands in and who owns it afterwards, what a shutdown does to queued
// work, and jobs whose blocks move by different copy methods. The real chain
// and tiers are covered by tests/xfer/store and the e2e suite.
#include "xfer/agent/mover.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "core/sealed_memfd.h"
#include "ferry/xfer/checksum.h"
#include "xfer/agent/job_results.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::agent {
namespace {

bool g_gpu = false;  // --gpu: CUDA copy lanes (the test then needs a GPU)

// A storage with a small zero-copy pool of fixed 64 KiB slots, and a map for
// everything else. It records who owns each slot, so that a test can check
// that no reservation is leaked and none is freed twice.
class FakeStorage final : public store::Storage, public store::Reservable {
 public:
  static constexpr std::size_t kSlot = 64 << 10;

  explicit FakeStorage(std::size_t slots) : pool_(slots * kSlot), owner_(slots, Owner::Free), ticket_(slots, 0) {}

  // put
  void put(std::span<store::PutItem> items, Fault& fault) noexcept override {
    gate_wait();
    std::lock_guard lk(mu_);
    ++puts_;
    for (auto& it : items) {
      if (fail_keys_.count(std::string(it.key)) != 0) {
        it.status = fault.raise(XferStatus::IoError, "fake storage: '" + std::string(it.key) + "' refused", it.key);
        continue;
      }
      if (checksum(it.data) != it.checksum) {
        it.status = fault.raise(XferStatus::Internal, "fake storage: wrong checksum for " + std::string(it.key));
        continue;
      }
      // A put of exactly a reserved range adopts it, into "tier 0" (the
      // zero-copy one); anything else is copied into "tier 1".
      const std::size_t slot = slot_of(it.data.data);
      it.tier = 1;
      if (slot != kNone && owner_[slot] == Owner::Reserved) {
        owner_[slot] = Owner::Adopted;
        adopted_.insert(std::string(it.key));
        it.tier = 0;
      }
      objects_[std::string(it.key)] = {std::vector<std::uint8_t>(it.data.data, it.data.data + it.data.size),
                                       it.checksum};
      it.status = XferStatus::Ok;
    }
  }
  void get(std::span<store::GetItem> items, Fault& fault) noexcept override {
    std::lock_guard lk(mu_);
    for (auto& it : items) {
      auto found = objects_.find(std::string(it.key));
      if (found == objects_.end()) {
        it.status = XferStatus::NotFound;
        continue;
      }
      it.size = found->second.bytes.size();
      if (it.size > it.out.size) {
        it.status = fault.raise(XferStatus::TooLarge, "fake storage: too small for " + std::string(it.key), it.key);
        continue;
      }
      std::memcpy(it.out.data, found->second.bytes.data(), it.size);
      it.status = XferStatus::Ok;
      it.tier = 1;
    }
  }
  void reserve(std::span<const std::uint64_t> sizes, store::Lease& lease) noexcept override {
    store::LeaseFiller::fill(lease, this, sizes);
  }
  void borrow(std::span<const std::string_view> keys,
              std::span<std::optional<store::Borrowed>> out) noexcept override {
    std::lock_guard lk(mu_);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      out[i].reset();
      auto found = lendable_.find(std::string(keys[i]));
      if (found == lendable_.end()) continue;
      auto& b = out[i].emplace();
      b.bytes = ByteView{found->second.data(), found->second.size()};
      b.checksum = found->second.size() == 0 ? 0 : lend_sums_.at(found->first);
      b.hold = std::make_shared<int>(0);
    }
  }
  int zero_copy_tier() const noexcept override { return 0; }
  std::span<std::byte> dma_memory() const noexcept override { return {}; }

  // Streaming, once stream_above() is set: objects above it stream into "tier 2"
  // (as a file tier on top would), unless refuse_streams() says it is full.
  std::uint64_t stream_above() const noexcept override { return stream_above_; }
  std::optional<XferStatus> put_streamed(std::string_view key, std::uint64_t size, const store::PieceSource& source,
                                         int* tier, Fault& fault) noexcept override {
    if (refuse_streams_) return std::nullopt;
    std::vector<std::uint8_t> bytes(size);
    constexpr std::size_t kPiece = 300 << 10;  // not a leaf multiple: offsets matter
    for (std::uint64_t at = 0; at < size; at += kPiece) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, size - at));
      if (const XferStatus s = source.read(at, {bytes.data() + at, n}, fault); s != XferStatus::Ok) return s;
    }
    std::lock_guard lk(mu_);
    ++streamed_;
    const std::uint64_t sum = checksum({bytes.data(), bytes.size()});
    objects_[std::string(key)] = {std::move(bytes), sum};
    *tier = 2;
    return XferStatus::Ok;
  }
  std::optional<XferStatus> get_streamed(std::string_view key, std::uint64_t capacity, const store::PieceSink& sink,
                                         std::uint64_t* size, int* tier, Fault& fault) noexcept override {
    if (refuse_streams_) return std::nullopt;
    std::lock_guard lk(mu_);
    auto found = objects_.find(std::string(key));
    if (found == objects_.end()) return XferStatus::NotFound;
    *size = found->second.bytes.size();
    if (*size > capacity) return fault.raise(XferStatus::TooLarge, "fake storage: too small for " + std::string(key), key);
    ++streamed_;
    *tier = 2;
    return sink.write(0, {found->second.bytes.data(), found->second.bytes.size()}, fault);
  }

  // Reservable
  void reserve(std::span<const std::uint64_t> sizes, std::span<store::Reserved> out) noexcept override {
    std::lock_guard lk(mu_);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      out[i] = store::Reserved{};
      if (sizes[i] == 0 || sizes[i] > kSlot) continue;
      for (std::size_t s = 0; s < owner_.size(); ++s) {
        if (owner_[s] != Owner::Free) continue;
        owner_[s] = Owner::Reserved;
        ticket_[s] = ++next_ticket_;
        out[i] = store::Reserved{MutableByteView{pool_.data() + s * kSlot, static_cast<std::size_t>(sizes[i])},
                                 ticket_[s]};
        ++reserved_;
        break;
      }
    }
  }
  void release(std::span<const store::Reserved> ranges) noexcept override {
    std::lock_guard lk(mu_);
    for (const auto& r : ranges) {
      if (r.range.data == nullptr) continue;
      const std::size_t s = slot_of(r.range.data);
      if (s == kNone || ticket_[s] != r.ticket) {
        ++bad_releases_;
        continue;
      }
      if (owner_[s] == Owner::Reserved) {
        owner_[s] = Owner::Free;
        ++released_;
      }
    }
  }
  std::span<std::byte> memory() const noexcept override { return {}; }

  // What a test sets up and reads back.
  void lend(const std::string& key, std::vector<std::uint8_t> bytes, bool corrupt = false) {
    std::lock_guard lk(mu_);
    lend_sums_[key] = checksum({bytes.data(), bytes.size()}) ^ (corrupt ? 1 : 0);
    lendable_[key] = std::move(bytes);
  }
  void fail_key(const std::string& key) { fail_keys_.insert(key); }
  void stream_above(std::uint64_t bytes) { stream_above_ = bytes; }
  void refuse_streams() { refuse_streams_ = true; }
  std::size_t streamed() {
    std::lock_guard lk(mu_);
    return streamed_;
  }
  std::vector<std::uint8_t> object(const std::string& key) {
    std::lock_guard lk(mu_);
    auto it = objects_.find(key);
    return it == objects_.end() ? std::vector<std::uint8_t>{} : it->second.bytes;
  }
  std::size_t outstanding() {  // reserved, neither adopted nor released
    std::lock_guard lk(mu_);
    return static_cast<std::size_t>(std::count(owner_.begin(), owner_.end(), Owner::Reserved));
  }
  std::set<std::string> adopted() {
    std::lock_guard lk(mu_);
    return adopted_;
  }
  std::size_t reserved() { return reserved_; }
  std::size_t released() { return released_; }
  std::size_t bad_releases() { return bad_releases_; }
  std::size_t puts() {
    std::lock_guard lk(mu_);
    return puts_;
  }
  // While closed, put() waits: a lane stays busy.
  void close_gate() {
    std::lock_guard lk(gate_mu_);
    gate_open_ = false;
  }
  void open_gate() {
    {
      std::lock_guard lk(gate_mu_);
      gate_open_ = true;
    }
    gate_cv_.notify_all();
  }
  bool wait_for_blocked_put() {
    std::unique_lock lk(gate_mu_);
    return gate_cv_.wait_for(lk, std::chrono::seconds(10), [&] { return blocked_ > 0; });
  }

 private:
  enum class Owner { Free, Reserved, Adopted };
  static constexpr std::size_t kNone = ~std::size_t{0};
  struct Object {
    std::vector<std::uint8_t> bytes;
    std::uint64_t sum = 0;
  };
  std::size_t slot_of(const std::uint8_t* p) const {
    if (p < pool_.data() || p >= pool_.data() + pool_.size()) return kNone;
    return static_cast<std::size_t>(p - pool_.data()) / kSlot;
  }
  void gate_wait() {
    std::unique_lock lk(gate_mu_);
    ++blocked_;
    gate_cv_.notify_all();
    gate_cv_.wait(lk, [&] { return gate_open_; });
    --blocked_;
  }

  std::mutex mu_;
  std::vector<std::uint8_t> pool_;
  std::vector<Owner> owner_;
  std::vector<std::uint64_t> ticket_;
  std::uint64_t next_ticket_ = 0;
  std::size_t reserved_ = 0, released_ = 0, bad_releases_ = 0, puts_ = 0;
  std::map<std::string, Object> objects_;
  std::set<std::string> adopted_;
  std::map<std::string, std::vector<std::uint8_t>> lendable_;
  std::map<std::string, std::uint64_t> lend_sums_;
  std::set<std::string> fail_keys_;
  std::uint64_t stream_above_ = store::kUnbounded;
  bool refuse_streams_ = false;
  std::size_t streamed_ = 0;

  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = true;
  int blocked_ = 0;
};

// An application's buffer as the agent sees it: a sealed memfd, mapped here too.
class AppMemory {
 public:
  explicit AppMemory(std::size_t len) : len_(len) {
    const int fd = create_sealed_memfd("mover-test", len);
    map_ = static_cast<std::uint8_t*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    proto::RegisterMsg msg;
    msg.type = MemType::Dram;
    msg.len = len;
    msg.reach = proto::Reach::Memfd;
    region_ = ImportedRegion::open(msg, fd, false);
  }
  ~AppMemory() { munmap(map_, len_); }
  std::uint8_t* data() { return map_; }
  const std::shared_ptr<ImportedRegion>& region() const { return region_; }

 private:
  std::size_t len_;
  std::uint8_t* map_;
  std::shared_ptr<ImportedRegion> region_;
};

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + seed * 17 + (i >> 9));
  return v;
}

MoverOptions options(int lanes = 2) {
  MoverOptions o;
  o.staging_bytes = std::size_t{8} << 20;
  o.queue_depth = lanes;
  o.chunk_blocks = 4;
  o.copy.gpu = g_gpu;
  // With a GPU: blocks below 32 KiB by the copy kernel, from 16 KiB on hashed
  // after the engines copy, from 32 KiB by the engines alone; a job of mixed
  // sizes mixes all three.
  o.copy.kernel_below = o.copy.kernel_below_pull = 32 << 10;
  o.copy.engines_from = 16 << 10;
  return o;
}

// Submits a job and waits for on_done; returns it with its texts made.
std::shared_ptr<Job> run_job(DataMover& mover, XferOp op, AppMemory& app,
                             const std::vector<std::pair<std::string, std::size_t>>& blocks,
                             std::string_view ns = {}) {
  auto job = std::make_shared<Job>();
  job->op = op;
  for (const auto& [key, len] : blocks) job->wire += key;
  std::size_t at = 0, offset = 0;
  for (const auto& [key, len] : blocks) {
    JobDesc d;
    d.region = app.region();
    d.offset = offset;
    d.len = len;
    d.key = std::string_view(job->wire).substr(at, key.size());
    job->descs.push_back(d);
    at += key.size();
    offset += len;
  }
  std::promise<void> done;
  int calls = 0;
  job->on_done = [&](Job&) {
    ++calls;
    done.set_value();
  };
  mover.submit(job);
  done.get_future().wait();
  EXPECT_EQ(calls, 1);
  const std::vector<std::string> names = {"zero-copy", "fake", "streaming"};
  describe_results(*job, names, ns);
  return job;
}

// Blocks of 4..100 KiB: some fit the fake's 64 KiB zero-copy slots, some do
// not, and the pool has room for only a few, so one job mixes zero-copy and
// staged blocks.
std::vector<std::pair<std::string, std::size_t>> mixed_blocks(std::size_t n) {
  std::vector<std::pair<std::string, std::size_t>> blocks;
  // (No empty blocks: the session refuses them before a job is made.)
  const std::size_t sizes[] = {4 << 10, 100 << 10, 20 << 10, 64 << 10, 1, 40 << 10, 7, 12345};
  for (std::size_t i = 0; i < n; ++i) blocks.emplace_back("k" + std::to_string(i), sizes[i % std::size(sizes)]);
  return blocks;
}

TEST(DataMover, PushesLandInReservedRangesOrStagingAndEveryReservationIsAdoptedOrReturned) {
  FakeStorage storage(3);
  DataMover mover(options(), storage);
  const auto blocks = mixed_blocks(24);
  AppMemory app(4 << 20);
  std::size_t offset = 0;
  std::vector<std::vector<std::uint8_t>> data;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    data.push_back(pattern(blocks[i].second, static_cast<unsigned>(i)));
    std::memcpy(app.data() + offset, data.back().data(), data.back().size());
    offset += blocks[i].second;
  }
  auto job = run_job(mover, XferOp::Write, app, blocks);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    ASSERT_EQ(job->results[i].status, XferStatus::Ok) << blocks[i].first << ": " << job->results[i].error;
    EXPECT_EQ(job->results[i].size, blocks[i].second);
    EXPECT_EQ(job->results[i].tier, storage.adopted().count(blocks[i].first) ? "zero-copy" : "fake")
        << "named at the edge from the tier index";
    EXPECT_EQ(storage.object(blocks[i].first), data[i]) << blocks[i].first;
  }
  EXPECT_FALSE(storage.adopted().empty()) << "some blocks went straight into reserved ranges";
  EXPECT_EQ(storage.outstanding(), 0u) << "every reservation was adopted or given back";
  EXPECT_EQ(storage.bad_releases(), 0u);
  EXPECT_EQ(storage.reserved(), storage.released() + storage.adopted().size());
  EXPECT_LT(storage.released(), storage.reserved()) << "adopted ranges are forgotten, not released";
}

TEST(DataMover, AFailedPutGivesItsRangeBackAndExplainsItselfOnce) {
  FakeStorage storage(8);
  storage.fail_key("k2");
  DataMover mover(options(1), storage);
  AppMemory app(1 << 20);
  auto job = run_job(mover, XferOp::Write, app, {{"k0", 1000}, {"k1", 2000}, {"k2", 3000}, {"k3", 4000}});
  EXPECT_EQ(job->results[2].status, XferStatus::IoError);
  EXPECT_EQ(job->results[2].error, "fake storage: 'k2' refused") << "the text made where it failed";
  for (int i : {0, 1, 3}) EXPECT_EQ(job->results[i].status, XferStatus::Ok) << i;
  EXPECT_EQ(storage.outstanding(), 0u);
  EXPECT_EQ(storage.bad_releases(), 0u);
}

TEST(DataMover, PullsReadBorrowedBlocksInPlaceAndTheRestFromStorage) {
  FakeStorage storage(4);
  DataMover mover(options(), storage);
  AppMemory app(4 << 20);
  const auto blocks = mixed_blocks(16);
  // Write them all (through the mover), then lend every third one in place.
  std::size_t offset = 0;
  std::vector<std::vector<std::uint8_t>> data;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    data.push_back(pattern(blocks[i].second, 100 + static_cast<unsigned>(i)));
    std::memcpy(app.data() + offset, data.back().data(), data.back().size());
    offset += blocks[i].second;
  }
  ASSERT_EQ(run_job(mover, XferOp::Write, app, blocks)->fault.status(), XferStatus::Ok);
  for (std::size_t i = 0; i < blocks.size(); i += 3) storage.lend(blocks[i].first, data[i]);
  std::memset(app.data(), 0, 4 << 20);
  auto job = run_job(mover, XferOp::Read, app, blocks);
  offset = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    ASSERT_EQ(job->results[i].status, XferStatus::Ok) << blocks[i].first << ": " << job->results[i].error;
    EXPECT_EQ(job->results[i].tier, i % 3 == 0 ? "zero-copy" : "fake") << i;
    EXPECT_EQ(std::memcmp(app.data() + offset, data[i].data(), data[i].size()), 0) << blocks[i].first;
    offset += blocks[i].second;
  }
}

TEST(DataMover, ABorrowedBlockThatFailsItsChecksumFailsAndTheOthersDoNot) {
  FakeStorage storage(4);
  DataMover mover(options(1), storage);
  AppMemory app(1 << 20);
  storage.lend("good", pattern(5000, 1));
  storage.lend("bad", pattern(5000, 2), /*corrupt=*/true);
  auto job = run_job(mover, XferOp::Read, app, {{"good", 5000}, {"bad", 5000}, {"missing", 10}});
  EXPECT_EQ(job->results[0].status, XferStatus::Ok);
  EXPECT_EQ(job->results[1].status, XferStatus::ChecksumMismatch);
  EXPECT_NE(job->results[1].error.find("'bad' fails its checksum"), std::string::npos) << job->results[1].error;
  EXPECT_EQ(job->results[2].status, XferStatus::NotFound);
  EXPECT_EQ(job->results[2].error, "no tier holds 'missing'");
}

TEST(DataMover, ABlockLargerThanAStagingSlotIsTooLargeWithoutTouchingStorage) {
  FakeStorage storage(1);
  MoverOptions o = options(2);
  o.staging_bytes = 1 << 20;  // 512 KiB slots
  DataMover mover(o, storage);
  AppMemory app(2 << 20);
  auto job = run_job(mover, XferOp::Write, app, {{"big", 600 << 10}, {"small", 10}});
  EXPECT_EQ(job->results[0].status, XferStatus::TooLarge);
  EXPECT_NE(job->results[0].error.find("staging slot"), std::string::npos) << job->results[0].error;
  EXPECT_EQ(job->results[1].status, XferStatus::Ok);
  EXPECT_TRUE(storage.object("big").empty());
}

// Host blocks above storage's stream_above() stream, one per batch, and may be
// larger than a staging slot; the rest are staged as before.
TEST(DataMover, HostBlocksAboveTheStreamThresholdStreamAndMayOutgrowAStagingSlot) {
  FakeStorage storage(4);
  storage.stream_above(100 << 10);
  MoverOptions o = options(2);
  o.staging_bytes = 1 << 20;  // 512 KiB slots
  DataMover mover(o, storage);
  AppMemory app(4 << 20);
  const std::vector<std::pair<std::string, std::size_t>> blocks = {
      {"big", (1 << 20) + 12345}, {"small", 5000}, {"medium", 200 << 10}};
  const auto big = pattern(blocks[0].second, 1), small = pattern(5000, 2), medium = pattern(200 << 10, 3);
  std::memcpy(app.data(), big.data(), big.size());
  std::memcpy(app.data() + big.size(), small.data(), small.size());
  std::memcpy(app.data() + big.size() + small.size(), medium.data(), medium.size());
  auto job = run_job(mover, XferOp::Write, app, blocks);
  for (std::size_t i = 0; i < 3; ++i) ASSERT_EQ(job->results[i].status, XferStatus::Ok) << job->results[i].error;
  EXPECT_EQ(job->results[0].tier, "streaming");
  EXPECT_EQ(job->results[0].size, big.size());
  EXPECT_EQ(job->results[2].tier, "streaming");
  EXPECT_NE(job->results[1].tier, "streaming");
  EXPECT_EQ(storage.streamed(), 2u);
  EXPECT_EQ(storage.object("big"), big);
  EXPECT_EQ(storage.object("medium"), medium);

  std::memset(app.data(), 0, 4 << 20);
  job = run_job(mover, XferOp::Read, app, blocks);
  for (std::size_t i = 0; i < 3; ++i) ASSERT_EQ(job->results[i].status, XferStatus::Ok) << job->results[i].error;
  EXPECT_EQ(std::memcmp(app.data(), big.data(), big.size()), 0);
  EXPECT_EQ(std::memcmp(app.data() + big.size() + small.size(), medium.data(), medium.size()), 0);
  EXPECT_EQ(storage.streamed(), 4u);
  // A buffer smaller than the streamed object: TooLarge with the object's size.
  job = run_job(mover, XferOp::Read, app, {{"big", 600 << 10}});
  EXPECT_EQ(job->results[0].status, XferStatus::TooLarge);
  EXPECT_EQ(job->results[0].size, big.size());
}

// Storage that will not stream a block (a full file tier): it goes the staged
// way when it fits a slot, else it is TooLarge with both reasons.
TEST(DataMover, ABlockStorageWillNotStreamIsStagedOrTooLarge) {
  FakeStorage storage(4);
  storage.stream_above(100 << 10);
  storage.refuse_streams();
  MoverOptions o = options(2);
  o.staging_bytes = 1 << 20;  // 512 KiB slots
  DataMover mover(o, storage);
  AppMemory app(2 << 20);
  auto job = run_job(mover, XferOp::Write, app, {{"fits", 200 << 10}, {"huge", 600 << 10}});
  EXPECT_EQ(job->results[0].status, XferStatus::Ok) << job->results[0].error;
  EXPECT_EQ(job->results[0].tier, "fake");
  EXPECT_EQ(job->results[1].status, XferStatus::TooLarge);
  EXPECT_NE(job->results[1].error.find("does not stream"), std::string::npos) << job->results[1].error;
  EXPECT_EQ(storage.streamed(), 0u);
}

// The texts name the application's keys, without the session's namespace.
TEST(DataMover, TextsNameKeysWithoutTheSessionsNamespace) {
  FakeStorage storage(8);
  storage.fail_key("u7/k2");
  DataMover mover(options(1), storage);
  AppMemory app(1 << 20);
  auto job = run_job(mover, XferOp::Write, app, {{"u7/k1", 1000}, {"u7/k2", 2000}}, "u7/");
  EXPECT_EQ(job->results[1].error, "fake storage: 'k2' refused");
  job = run_job(mover, XferOp::Read, app, {{"u7/missing", 10}}, "u7/");
  EXPECT_EQ(job->results[0].error, "no tier holds 'missing'");
}

// A shutdown with work queued: the batches a lane has taken finish (with CUDA
// lanes, it begins the next batch before it ends the one in flight, so it may
// hold two), the queued ones end Cancelled, every job's on_done runs once, and
// nothing reserved is leaked.
TEST(DataMover, ShutdownCancelsQueuedBatchesAndFinishesTheOneInFlight) {
  FakeStorage storage(8);
  AppMemory app(1 << 20);
  std::atomic<int> done{0};
  std::vector<std::shared_ptr<Job>> jobs;
  storage.close_gate();
  auto mover = std::make_unique<DataMover>(options(1), storage);
  for (int j = 0; j < 4; ++j) {
    auto job = std::make_shared<Job>();
    job->op = XferOp::Write;
    job->wire = "job" + std::to_string(j);
    JobDesc d;
    d.region = app.region();
    d.offset = static_cast<std::uint64_t>(j) * 4096;
    d.len = 4096;
    d.key = job->wire;
    job->descs.push_back(d);
    job->on_done = [&](Job&) { done.fetch_add(1); };
    mover->submit(job);
    jobs.push_back(job);
  }
  ASSERT_TRUE(storage.wait_for_blocked_put()) << "the one lane took the first batch";
  std::thread stopper([&] { mover.reset(); });
  // The destructor cancels the queue before it joins the lane, which waits in put.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  storage.open_gate();
  stopper.join();
  EXPECT_EQ(done.load(), 4);
  const std::size_t taken = storage.puts();
  EXPECT_GE(taken, 1u);
  EXPECT_LE(taken, std::size_t{gpu::Lanes::kHashedSlots}) << "one lane holds at most its flights";
  for (std::size_t j = 0; j < 4; ++j) {
    if (j < taken) {
      EXPECT_EQ(jobs[j]->results[0].status, XferStatus::Ok) << j << " was taken before the shutdown";
      continue;
    }
    EXPECT_EQ(jobs[j]->results[0].status, XferStatus::Cancelled) << j;
    EXPECT_EQ(jobs[j]->fault.detail(), "the agent is shutting down");
  }
  EXPECT_EQ(storage.outstanding(), 0u);
}

// Memory reached by copy calls whose pages never answer until the test lets
// them (a hung FUSE or NFS mapping, as the kernel would hold the lane).
class HungMemory final : public RemoteMemory {
 public:
  XferStatus read(const std::uint8_t*, std::uint8_t* local, std::size_t len, Fault&) const noexcept override {
    hold();
    std::memset(local, 7, len);
    return XferStatus::Ok;
  }
  XferStatus write(std::uint8_t*, const std::uint8_t*, std::size_t, Fault&) const noexcept override {
    hold();
    return XferStatus::Ok;
  }
  std::string describe() const override { return "hung test memory"; }
  void answer() const {
    std::lock_guard lk(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait_for_a_copy() const {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }

 private:
  void hold() const {
    std::unique_lock lk(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lk, [&] { return open_; });
  }
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool open_ = false;
  mutable int waiting_ = 0;
};

// Issue 35, finding 2, for copies: a batch held by an application's memory
// past memory_timeout answers its request with an error, drops the memory,
// and the other lane goes on serving; when the memory answers at last, the
// late lane neither answers again nor runs the request's other batches.
TEST(DataMover, ABatchHeldByMemoryThatNeverAnswersIsAnsweredAtTheDeadline) {
  FakeStorage storage(8);
  MoverOptions o = options(2);
  o.memory_timeout = std::chrono::milliseconds(300);
  DataMover mover(o, storage);
  auto hung_memory = std::make_unique<HungMemory>();
  const HungMemory& hung = *hung_memory;
  // The region's bytes in the hung memory's own space, never read: not null,
  // since the mover offsets the base (null plus an offset is undefined).
  std::vector<std::uint8_t> space(1 << 20);
  auto region = ImportedRegion::wrap(std::move(hung_memory), space.data(), space.size());

  auto job = std::make_shared<Job>();
  job->op = XferOp::Write;
  // Two batches of 4 blocks (options()' chunk_blocks), the second queued
  // behind the first on the one lane it may take.
  job->wire = "hung0hung1hung2hung3hung4hung5hung6hung7";
  for (std::size_t i = 0; i < 8; ++i)
    job->descs.push_back({region, i * 4096, 4096, std::string_view(job->wire).substr(i * 5, 5)});
  std::atomic<int> done{0}, abandoned{0};
  std::promise<std::string> why;
  job->on_done = [&](Job&) { done.fetch_add(1); };
  job->on_abandoned = [&](const std::string& text) {
    abandoned.fetch_add(1);
    why.set_value(text);
  };
  const auto start = std::chrono::steady_clock::now();
  mover.submit(job);
  ASSERT_TRUE(hung.wait_for_a_copy());
  auto answer = why.get_future();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(3));
  const std::string text = answer.get();
  EXPECT_NE(text.find("did not answer a copy within 300 ms"), std::string::npos) << text;
  EXPECT_TRUE(region->remote()->gone());
  EXPECT_NE(region->remote()->gone_reason().find("AgentServiceOptions::memory_timeout_s"), std::string::npos);
  EXPECT_EQ(mover.stuck_lanes(), 1u);

  // The other lane serves everyone else meanwhile.
  AppMemory app(64 << 10);
  const auto data = pattern(64 << 10, 3);
  std::memcpy(app.data(), data.data(), data.size());
  auto fine = run_job(mover, XferOp::Write, app, {{"fine", 64 << 10}});
  EXPECT_EQ(fine->results[0].status, XferStatus::Ok);

  // The memory answers: the lane comes back and answers nothing more.
  hung.answer();
  for (int i = 0; i < 1000 && (mover.stuck_lanes() > 0 || job->batches_left.load() > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(job->batches_left.load(), 0u);
  EXPECT_EQ(done.load(), 0);
  EXPECT_EQ(abandoned.load(), 1);
  EXPECT_EQ(storage.outstanding(), 0u);
}

}  // namespace
}  // namespace ferry::xfer::agent

// --gpu: the same tests with CUDA copy lanes (label gpu); 77 without a GPU.
int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--gpu") ferry::xfer::agent::g_gpu = true;
  if (ferry::xfer::agent::g_gpu && !ferry::xfer::gpu::available()) {
    std::fprintf(stderr, "no GPU: skipping\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
