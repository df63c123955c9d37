// ferry-stream-probe: what a chunk's trip between shared memory and the page
// cache costs, taken apart, so that the file tier's streaming
// (file_tier_stream.cpp) can be compared with LMCache's fs_native piece by piece
// (docs/bench/lmcache.md). Every thread moves its own chunk of a POSIX shm
// mapping, as LMCache's L1 pool is, to or from its own file, all threads at
// once:
//
//   store write        open a temporary, write(2) the chunk whole, rename (fs_native)
//   store pwrite/P     the same in pwrite(2)s of P bytes
//   store hash+pwrite/P  each piece hashed (leaf sums) and then written from where it is
//   store pwrite+hash/P  written, then hashed; pwrite|hash/P: a second thread hashes
//   store fallocate+...  the same into a file allocated whole first
//   store tier         the file tier's put_streamed, the source lent in place
//   load  read         read(2) the file whole into the chunk (fs_native)
//   load  pread/P, pread+hash/P, pread|hash/P (a second thread hashes behind), tier
//
//   ferry-stream-probe --dir /var/tmp/probe --threads 1,8,16 --pieces 128KiB,256KiB,1MiB
//
// --pages MS asks instead where a store's pages come from: pages freed just
// before, pages that rested MS ms after being freed, or a file already cached.
// --mapped K,.. has K threads write each chunk through a shared mapping of its file.
// --compare interleaves the ways that matter to the tier round by round, and
// gives each one's time as a ratio to fs_native's within the same round: this
// machine's speed drifts by more within a call than the differences sought.
//
// Each point is the median wall time over --rounds of the whole set of threads.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ferry/xfer/checksum.h"
#include "ferry/xfer/tier_registry.h"
#include "xfer/store/sizes.h"
#include "xfer/store/streaming.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer {
// checksum_avx2.cpp, checksum_avx512.cpp: XXH3-64 built for one instruction set
// each (leaf_checksums takes the widest the CPU runs).
std::uint64_t checksum_avx2(const void* data, std::size_t size) noexcept;
std::uint64_t checksum_avx512(const void* data, std::size_t size) noexcept;
}  // namespace ferry::xfer

namespace store = ferry::xfer::store;
using ferry::xfer::Fault;
using ferry::xfer::XferStatus;

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what + ": " + std::strerror(errno));
}

void write_all(int fd, const std::uint8_t* p, std::size_t n, off_t at, bool positioned) {
  while (n > 0) {
    const ssize_t w = positioned ? ::pwrite(fd, p, n, at) : ::write(fd, p, n);
    check(w > 0, "write");
    p += w;
    n -= static_cast<std::size_t>(w);
    at += w;
  }
}

void read_all(int fd, std::uint8_t* p, std::size_t n, off_t at, bool positioned) {
  while (n > 0) {
    const ssize_t r = positioned ? ::pread(fd, p, n, at) : ::read(fd, p, n);
    check(r > 0, "read");
    p += r;
    n -= static_cast<std::size_t>(r);
    at += r;
  }
}

// The pool: POSIX shm mapped shared, as LMCache's multiprocess server maps its L1.
class ShmPool {
 public:
  explicit ShmPool(std::size_t bytes) : bytes_(bytes) {
    name_ = "/ferry-stream-probe-" + std::to_string(::getpid());
    const int fd = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    check(fd >= 0, "shm_open");
    check(::ftruncate(fd, static_cast<off_t>(bytes)) == 0, "ftruncate");
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    ::close(fd);
    check(p != MAP_FAILED, "mmap");
    base_ = static_cast<std::uint8_t*>(p);
    std::mt19937_64 rng(42);
    for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(base_ + i, &v, 8);
    }
  }
  ~ShmPool() {
    ::munmap(base_, bytes_);
    ::shm_unlink(name_.c_str());
  }
  std::uint8_t* at(std::size_t off) { return base_ + off; }

 private:
  std::string name_;
  std::size_t bytes_;
  std::uint8_t* base_ = nullptr;
};

class LentSource final : public store::PieceSource {
 public:
  explicit LentSource(const std::uint8_t* p) : p_(p) {}
  XferStatus read(std::uint64_t at, ferry::MutableByteView into, Fault&) const noexcept override {
    std::memcpy(into.data, p_ + at, into.size);
    return XferStatus::Ok;
  }
  const std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override { return p_ + at; }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
    ferry::xfer::leaf_checksums({p_ + at, len}, out);
    return XferStatus::Ok;
  }

 private:
  const std::uint8_t* p_;
};

class LentSink final : public store::PieceSink {
 public:
  explicit LentSink(std::uint8_t* p) : p_(p) {}
  XferStatus write(std::uint64_t at, ferry::ByteView from, Fault&) const noexcept override {
    std::memcpy(p_ + at, from.data, from.size);
    return XferStatus::Ok;
  }
  std::uint8_t* in_place(std::uint64_t at, std::size_t) const noexcept override { return p_ + at; }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault&) const noexcept override {
    ferry::xfer::leaf_checksums({p_ + at, len}, out);
    return XferStatus::Ok;
  }

 private:
  std::uint8_t* p_;
};

struct Probe {
  std::string dir;
  std::size_t chunk = 0;
  ShmPool* pool = nullptr;
  store::Tier* tier_itself = nullptr;
  store::Streamable* tier = nullptr;

  // Chunks that start at `base` in their files have files of their own.
  std::string file(unsigned t, std::size_t base = 0) const {
    return dir + "/chunk-" + std::to_string(t) + (base != 0 ? "@" + std::to_string(base) : "");
  }
  static constexpr std::size_t kHeaderBase = 4096;  // the tier's header

  // Where a piece's hash runs: not at all, on this thread before or after its
  // copy, on a second thread beside the copying one, following the pieces
  // the copier has passed, or (stores only) on a second thread that reads the
  // whole source on its own from the start.
  enum class Hash { None, Before, After, Beside, Alongside };

  // The instruction set of the leaves' XXH3: the file tier's (the widest), or one named.
  enum class Isa { Tier, Avx2, Avx512 };
  Isa isa = Isa::Tier;

  void hash(const std::uint8_t* p, std::size_t at, std::size_t n, std::vector<std::uint64_t>& leaves) const {
    constexpr std::size_t kLeaf = ferry::xfer::kChecksumLeafBytes;
    std::uint64_t* out = &leaves[at / kLeaf];
    if (isa == Isa::Tier) {
      ferry::xfer::leaf_checksums({p + at, n}, out);
      return;
    }
    for (std::size_t i = 0; i < n; i += kLeaf)
      *out++ = isa == Isa::Avx2 ? ferry::xfer::checksum_avx2(p + at + i, std::min(kLeaf, n - i))
                                : ferry::xfer::checksum_avx512(p + at + i, std::min(kLeaf, n - i));
  }

  // Hashes each piece once `done` has passed it.
  void follow(const std::atomic<std::size_t>& done, const std::uint8_t* p, std::size_t piece,
              std::vector<std::uint64_t>& leaves) const {
    for (std::size_t at = 0; at < chunk; at += piece) {
      for (std::size_t seen = done.load(std::memory_order_acquire); seen <= at;
           seen = done.load(std::memory_order_acquire))
        done.wait(seen, std::memory_order_acquire);
      hash(p, at, std::min(piece, chunk - at), leaves);
    }
  }

  // fs_native's store: a temporary written whole (piece 0) or in pieces, then renamed.
  // allocate: fallocate(2) the whole chunk first, so that the writes land in
  // allocated (unwritten) extents rather than reserving blocks page by page.
  // base: where the chunk starts in its file (the tier's files start with a 4 KiB header).
  void store_plain(unsigned t, std::size_t piece, Hash how, bool allocate = false, std::size_t base = 0) const {
    const std::string tmp = file(t, base) + ".tmp";
    const int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open " + tmp);
    if (allocate) check(::fallocate(fd, 0, 0, static_cast<off_t>(base + chunk)) == 0, "fallocate " + tmp);
    const std::uint8_t* src = pool->at(t * chunk);
    std::vector<std::uint64_t> leaves(chunk / ferry::xfer::kChecksumLeafBytes + 1);
    std::atomic<std::size_t> written_to{0};
    std::jthread beside;
    if (how == Hash::Beside)  // behind the writes, so the pieces come from the writer's cache
      beside = std::jthread([&] { follow(written_to, src, piece, leaves); });
    if (how == Hash::Alongside) beside = std::jthread([&] { hash(src, 0, chunk, leaves); });
    if (piece == 0) {
      write_all(fd, src, chunk, static_cast<off_t>(base), base != 0);
    } else {
      for (std::size_t at = 0; at < chunk; at += piece) {
        const std::size_t n = std::min(piece, chunk - at);
        if (how == Hash::Before) hash(src, at, n, leaves);
        write_all(fd, src + at, n, static_cast<off_t>(base + at), true);
        if (how == Hash::After) hash(src, at, n, leaves);
        written_to.store(at + n, std::memory_order_release);
        written_to.notify_one();
      }
    }
    if (beside.joinable()) beside.join();
    ::close(fd);
    check(std::rename(tmp.c_str(), file(t, base).c_str()) == 0, "rename");
  }

  // A temporary allocated whole and already in the page cache (its unwritten
  // extents read back as zeros), untimed: what a store would find if spare
  // files were kept ready, so that it allocates no page.
  void prepare(unsigned t) const {
    const std::string tmp = file(t) + ".tmp";
    const int fd = ::open(tmp.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open " + tmp);
    check(::fallocate(fd, 0, 0, static_cast<off_t>(chunk)) == 0, "fallocate " + tmp);
    std::vector<std::uint8_t> scratch(1 << 20);
    for (std::size_t at = 0; at < chunk; at += scratch.size())
      read_all(fd, scratch.data(), std::min(scratch.size(), chunk - at), static_cast<off_t>(at), true);
    ::close(fd);
  }

  // The chunk written whole into the prepared temporary, then renamed.
  void store_prepared(unsigned t) const {
    const std::string tmp = file(t) + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
    check(fd >= 0, "open " + tmp);
    write_all(fd, pool->at(t * chunk), chunk, 0, false);
    ::close(fd);
    check(std::rename(tmp.c_str(), file(t).c_str()) == 0, "rename");
  }

  // One chunk written by `copiers` threads at once through a shared mapping of
  // its file (allocated whole first): buffered write(2)s of one file take its
  // lock in turn, page faults on its mapping do not. populate: each copier
  // faults its range in writable (MADV_POPULATE_WRITE) before copying; hash:
  // each hashes its pieces of 256 KiB as it copies them.
  void store_mapped(unsigned t, unsigned copiers, bool populate, bool hash_pieces) const {
    const std::string tmp = file(t) + ".tmp";
    const int fd = ::open(tmp.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open " + tmp);
    check(::fallocate(fd, 0, 0, static_cast<off_t>(chunk)) == 0, "fallocate " + tmp);
    void* m = ::mmap(nullptr, chunk, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    check(m != MAP_FAILED, "mmap " + tmp);
    auto* dst = static_cast<std::uint8_t*>(m);
    const std::uint8_t* src = pool->at(t * chunk);
    std::vector<std::uint64_t> leaves(chunk / ferry::xfer::kChecksumLeafBytes + 1);
    const std::size_t share = (chunk / copiers + 4095) & ~std::size_t{4095};
    const auto copy = [&](unsigned c) {
      const std::size_t from = std::min(chunk, c * share), to = std::min(chunk, from + share);
      if (from == to) return;
      if (populate) check(::madvise(dst + from, to - from, MADV_POPULATE_WRITE) == 0, "madvise");
      constexpr std::size_t kPiece = 256 << 10;
      for (std::size_t at = from; at < to; at += kPiece) {
        const std::size_t n = std::min(kPiece, to - at);
        std::memcpy(dst + at, src + at, n);
        if (hash_pieces) hash(src, at, n, leaves);
      }
    };
    {
      std::vector<std::jthread> others;
      for (unsigned c = 1; c < copiers; ++c) others.emplace_back(copy, c);
      copy(0);
    }
    ::munmap(m, chunk);
    ::close(fd);
    check(std::rename(tmp.c_str(), file(t).c_str()) == 0, "rename");
  }

  void load_plain(unsigned t, unsigned threads, std::size_t piece, Hash how, std::size_t base = 0) const {
    const int fd = ::open(file(t, base).c_str(), O_RDONLY | O_CLOEXEC);
    check(fd >= 0, "open " + file(t, base));
    std::uint8_t* dst = pool->at((threads + t) * chunk);
    std::vector<std::uint64_t> leaves(chunk / ferry::xfer::kChecksumLeafBytes + 1);
    std::atomic<std::size_t> read_to{0};
    std::jthread beside;
    if (how == Hash::Beside) beside = std::jthread([&] { follow(read_to, dst, piece, leaves); });
    if (piece == 0) {
      read_all(fd, dst, chunk, static_cast<off_t>(base), base != 0);
    } else {
      for (std::size_t at = 0; at < chunk; at += piece) {
        const std::size_t n = std::min(piece, chunk - at);
        read_all(fd, dst + at, n, static_cast<off_t>(base + at), true);
        if (how == Hash::After) hash(dst, at, n, leaves);
        read_to.store(at + n, std::memory_order_release);
        read_to.notify_one();
      }
    }
    if (beside.joinable()) beside.join();
    ::close(fd);
  }

  // Untimed, before each store round: the last round's files go, so that no
  // store pays for freeing an older version's pages (the benchmark's keys are new).
  void forget(unsigned threads, bool in_tier) const {
    for (unsigned t = 0; t < threads; ++t) {
      Fault fault;
      if (in_tier)
        (void)tier_itself->remove("chunk-" + std::to_string(t), fault);  // absent at first
      else
        for (const std::size_t base : {std::size_t{0}, kHeaderBase}) ::unlink(file(t, base).c_str());
    }
  }

  void store_tier(unsigned t) const {
    Fault fault;
    std::uint64_t sum = 0;
    const XferStatus s = tier->put_streamed("chunk-" + std::to_string(t), chunk, LentSource(pool->at(t * chunk)),
                                            &sum, fault);
    if (s != XferStatus::Ok) throw std::runtime_error("put_streamed: " + fault.detail());
  }

  void load_tier(unsigned t, unsigned threads) const {
    Fault fault;
    std::uint64_t size = 0;
    const auto s = tier->get_streamed("chunk-" + std::to_string(t), chunk, LentSink(pool->at((threads + t) * chunk)),
                                      &size, fault);
    if (!s || *s != XferStatus::Ok) throw std::runtime_error("get_streamed: " + fault.detail());
  }
};

// Seconds of one run of fn(t) on `threads` threads started together: from
// the first thread's start to the last one's end (a barrier's waiters wake at
// different times, so the main thread's clock would miss part of it).
double run_once(unsigned threads, const std::function<void(unsigned)>& fn) {
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> starts(threads), ends(threads);
  std::barrier start(static_cast<std::ptrdiff_t>(threads));
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        start.arrive_and_wait();
        starts[t] = Clock::now();
        fn(t);
        ends[t] = Clock::now();
      });
  }  // joined
  const auto first = *std::min_element(starts.begin(), starts.end());
  const auto last = *std::max_element(ends.begin(), ends.end());
  return std::chrono::duration<double>(last - first).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of `rounds` runs, each after an untimed before(), and after
// one untimed run: a fresh virtual machine's first touch of a page costs more
// than the copy into it.
double timed(unsigned threads, int rounds, const std::function<void(unsigned)>& fn,
             const std::function<void()>& before = [] {}) {
  std::vector<double> times;
  for (int r = -1; r < rounds; ++r) {
    before();
    const double s = run_once(threads, fn);
    if (r >= 0) times.push_back(s);
  }
  return median(std::move(times));
}

// One way of moving the chunks, for --compare.
struct Variant {
  std::string how;
  std::function<void(unsigned)> fn;
  std::function<void()> before = [] {};
  Probe::Isa isa = Probe::Isa::Tier;
};

struct Compared {
  double seconds;   // the median run
  double vs_first;  // the median over rounds of this run's time over the first variant's in the same round
};

// Every round runs each variant once, starting one further along the list
// each round, so that a machine that slows down or speeds up during the
// rounds moves every variant alike; the ratio to the first variant is taken
// within each round. One untimed round first.
std::vector<Compared> compare(Probe& probe, unsigned threads, int rounds, const std::vector<Variant>& variants) {
  const std::size_t n = variants.size();
  std::vector<std::vector<double>> times(n);
  for (int r = -1; r < rounds; ++r) {
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (k + static_cast<std::size_t>(r + 1)) % n;
      variants[i].before();
      probe.isa = variants[i].isa;
      const double s = run_once(threads, variants[i].fn);
      if (r >= 0) times[i].push_back(s);
    }
  }
  probe.isa = Probe::Isa::Tier;
  std::vector<Compared> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> ratios;
    for (std::size_t r = 0; r < times[i].size(); ++r) ratios.push_back(times[i][r] / times[0][r]);
    out.push_back({median(times[i]), median(std::move(ratios))});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The cost of a chunk's trip between POSIX shm and the page cache, taken apart (fs_native's write(2) "
               "against the file tier's hashed pieces)"};
  std::string dir = "/var/tmp/ferry-stream-probe", threads_text = "1,8,16", pieces_text = "128KiB,256KiB,1MiB";
  std::string chunk_text = "32MiB", json_out;
  int rounds = 7;
  app.add_option("--dir", dir, "where the files go (emptied first)");
  app.add_option("--threads", threads_text, "thread counts, comma-separated");
  app.add_option("--pieces", pieces_text, "piece sizes, comma-separated");
  app.add_option("--chunk", chunk_text, "bytes per thread");
  app.add_option("--rounds", rounds, "runs per point (the median is kept)")->check(CLI::PositiveNumber);
  app.add_option("--json-out", json_out, "also write the results here");
  std::string mapped_text;
  app.add_option("--mapped", mapped_text,
                 "instead of the pieces: each chunk written through a shared mapping of its file by this many "
                 "threads (comma-separated counts), beside write(2) and the tier");
  int settle_ms = 0;
  app.add_option("--pages", settle_ms,
                 "instead of the pieces: where a store's page-cache pages come from. write(2) and the tier into pages "
                 "freed just before, the same after the freed pages have rested this many ms (a virtual machine may "
                 "hand resting free pages back to its host), and write(2) into a file already allocated and cached")
      ->check(CLI::PositiveNumber);
  unsigned tier_threads = 0;
  app.add_option("--tier-threads", tier_threads,
                 "the tier's helper threads (its threads=); default: the most --threads");
  bool compare_mode = false;
  app.add_flag("--compare", compare_mode,
               "instead of one point after another: the ways that matter to the file tier (fs_native's, the tier's, "
               "and hashing behind or beside the copy in each piece size, with the tier's XXH3 and with AVX2's) "
               "interleaved round by round, each also as its median ratio to fs_native's within a round");
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<unsigned> thread_counts;
    for (const auto& t : split(threads_text)) {
      unsigned n = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
      if (ec != std::errc{} || end != t.data() + t.size() || n == 0)
        throw std::runtime_error("--threads: '" + t + "' is not a count of at least 1");
      thread_counts.push_back(n);
    }
    std::vector<std::size_t> pieces;
    for (const auto& p : split(pieces_text)) {
      pieces.push_back(store::parse_size(p, "--pieces"));
      if (pieces.back() < 4096) throw std::runtime_error("--pieces: " + p + " is less than a page (4KiB)");
    }
    const std::size_t chunk = store::parse_size(chunk_text, "--chunk");
    if (chunk == 0) throw std::runtime_error("--chunk: 0 bytes");
    if (thread_counts.empty()) throw std::runtime_error("--threads: give counts of at least 1, comma-separated");
    const unsigned most = *std::max_element(thread_counts.begin(), thread_counts.end());

    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/plain");
    ShmPool pool(2 * most * chunk);
    auto tier = store::make_tier("file:" + dir + "/tier,threads=" + std::to_string(tier_threads != 0 ? tier_threads : most));
    Probe probe{dir + "/plain", chunk, &pool, tier.get(), tier->streamable()};
    if (probe.tier == nullptr) throw std::runtime_error("the file tier does not stream");

    nlohmann::json rows = nlohmann::json::array();
    std::printf("%-8s %-36s %8s %10s %10s%s\n", "op", "how", "threads", "ms", "GB/s",
                compare_mode ? " time/fs_native" : "");
    const auto report = [&](const char* op, const std::string& how, unsigned threads, double s,
                            double vs_first = 0) {
      const double gbps = static_cast<double>(threads) * static_cast<double>(chunk) / s / 1e9;
      std::printf("%-8s %-36s %8u %10.2f %10.2f", op, how.c_str(), threads, s * 1e3, gbps);
      rows.push_back({{"op", op}, {"how", how}, {"threads", threads}, {"ms", s * 1e3}, {"gbps", gbps}});
      if (vs_first > 0) {
        std::printf(" %9.3f", vs_first);
        rows.back()["time_vs_fs_native"] = vs_first;
      }
      std::printf("\n");
      std::fflush(stdout);
    };
    // The page cache's first pages of a fresh machine, untimed (see timed()).
    timed(most, 3, [&](unsigned t) { probe.store_plain(t, 0, Probe::Hash::None); }, [&] { probe.forget(most, false); });
    for (const unsigned n : thread_counts) {
      const auto forget = [&] { probe.forget(n, false); };
      using Hash = Probe::Hash;
      if (compare_mode) {
        using Isa = Probe::Isa;
        const auto kib = [](std::size_t p) { return std::to_string(p >> 10) + "KiB"; };
        const auto forget_tier = [&] { probe.forget(n, true); };
        std::vector<Variant> stores = {
            {"write", [&](unsigned t) { probe.store_plain(t, 0, Hash::None); }, forget},
            {"fallocate+write", [&](unsigned t) { probe.store_plain(t, 0, Hash::None, true); }, forget},
            {"tier", [&](unsigned t) { probe.store_tier(t); }, forget_tier},
            {"fallocate+write||hash", [&](unsigned t) { probe.store_plain(t, 0, Hash::Alongside, true); }, forget}};
        std::vector<Variant> loads = {{"read", [&](unsigned t) { probe.load_plain(t, n, 0, Hash::None); }},
                                      {"tier", [&](unsigned t) { probe.load_tier(t, n); }}};
        for (const std::size_t p : pieces) {
          stores.push_back({"fallocate+pwrite/" + kib(p),
                            [&, p](unsigned t) { probe.store_plain(t, p, Hash::None, true); }, forget});
          stores.push_back({"fallocate+hash+pwrite/" + kib(p),
                            [&, p](unsigned t) { probe.store_plain(t, p, Hash::Before, true); }, forget});
          for (const auto& [beside_or_after, name] :
               {std::pair{Hash::Beside, "|"}, std::pair{Hash::After, "+"}}) {
            const Hash how = beside_or_after;  // a variable, so lambdas may capture it (not a binding)
            stores.push_back({std::string("fallocate+pwrite") + name + "hash/" + kib(p),
                              [&, p, how](unsigned t) { probe.store_plain(t, p, how, true); }, forget});
            loads.push_back({std::string("pread") + name + "hash/" + kib(p),
                             [&, p, how](unsigned t) { probe.load_plain(t, n, p, how); }});
            if (p != pieces.front()) continue;
            stores.push_back({stores.back().how + " avx2", stores.back().fn, forget, Isa::Avx2});
            loads.push_back({loads.back().how + " avx2", loads.back().fn, [] {}, Isa::Avx2});
            // Where the tier's data starts, after its header.
            stores.push_back({std::string("fallocate+pwrite") + name + "hash/" + kib(p) + " @4KiB",
                              [&, p, how](unsigned t) { probe.store_plain(t, p, how, true, Probe::kHeaderBase); },
                              forget});
            loads.push_back({std::string("pread") + name + "hash/" + kib(p) + " @4KiB",
                             [&, p, how](unsigned t) { probe.load_plain(t, n, p, how, Probe::kHeaderBase); }});
          }
        }
        const auto show = [&](const char* op, const std::vector<Variant>& variants) {
          const auto got = compare(probe, n, rounds, variants);
          for (std::size_t i = 0; i < variants.size(); ++i) report(op, variants[i].how, n, got[i].seconds, got[i].vs_first);
        };
        show("store", stores);
        // Every file and object the loads read, as the stores write them.
        run_once(n, [&](unsigned t) {
          probe.store_plain(t, 0, Hash::None);
          probe.store_plain(t, pieces.front(), Hash::None, true, Probe::kHeaderBase);
          probe.store_tier(t);
        });
        show("load", loads);
        continue;
      }
      if (!mapped_text.empty()) {
        report("store", "write", n, timed(n, rounds, [&](unsigned t) { probe.store_plain(t, 0, Hash::None); }, forget));
        report("store", "fallocate+write", n,
               timed(n, rounds, [&](unsigned t) { probe.store_plain(t, 0, Hash::None, true); }, forget));
        report("store", "tier", n,
               timed(n, rounds, [&](unsigned t) { probe.store_tier(t); }, [&] { probe.forget(n, true); }));
        for (const auto& k : split(mapped_text)) {
          const unsigned copiers = static_cast<unsigned>(std::stoul(k));
          for (const bool populate : {false, true})
            for (const bool hash_pieces : {false, true})
              report("store",
                     "mapped x" + k + (populate ? " populate" : "") + (hash_pieces ? " +hash" : ""), n,
                     timed(n, rounds, [&](unsigned t) { probe.store_mapped(t, copiers, populate, hash_pieces); },
                           forget));
        }
        continue;
      }
      if (settle_ms > 0) {
        const auto rest = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms)); };
        const auto store_write = [&](unsigned t) { probe.store_plain(t, 0, Hash::None); };
        const auto store_tier = [&](unsigned t) { probe.store_tier(t); };
        const std::string rested = ", rested " + std::to_string(settle_ms) + "ms";
        report("store", "write", n, timed(n, rounds, store_write, forget));
        report("store", "write" + rested, n, timed(n, rounds, store_write, [&] { forget(); rest(); }));
        report("store", "tier", n, timed(n, rounds, store_tier, [&] { probe.forget(n, true); }));
        report("store", "tier" + rested, n, timed(n, rounds, store_tier, [&] { probe.forget(n, true); rest(); }));
        report("store", "write into cached" + rested, n,
               timed(n, rounds, [&](unsigned t) { probe.store_prepared(t); }, [&] {
                 forget();
                 for (unsigned t = 0; t < n; ++t) probe.prepare(t);
                 rest();
               }));
        continue;
      }
      report("store", "write", n, timed(n, rounds, [&](unsigned t) { probe.store_plain(t, 0, Hash::None); }, forget));
      report("store", "tier", n,
             timed(n, rounds, [&](unsigned t) { probe.store_tier(t); }, [&] { probe.forget(n, true); }));
      const std::pair<Hash, const char*> stores[] = {
          {Hash::None, "pwrite/"}, {Hash::Before, "hash+pwrite/"}, {Hash::After, "pwrite+hash/"}, {Hash::Beside, "pwrite|hash/"}};
      const std::pair<Hash, const char*> loads[] = {
          {Hash::None, "pread/"}, {Hash::After, "pread+hash/"}, {Hash::Beside, "pread|hash/"}};
      report("store", "fallocate+write", n,
             timed(n, rounds, [&](unsigned t) { probe.store_plain(t, 0, Hash::None, true); }, forget));
      for (const std::size_t p : pieces)
        report("store", "fallocate+hash+pwrite/" + std::to_string(p >> 10) + "KiB", n,
               timed(n, rounds, [&](unsigned t) { probe.store_plain(t, p, Hash::Before, true); }, forget));
      for (const std::size_t p : pieces)
        for (const auto& [hash, name] : stores) {
          const Hash how = hash;  // a variable, so the lambda may capture it (not a binding)
          report("store", name + std::to_string(p >> 10) + "KiB", n,
                 timed(n, rounds, [&](unsigned t) { probe.store_plain(t, p, how); }, forget));
        }
      report("load", "read", n, timed(n, rounds, [&](unsigned t) { probe.load_plain(t, n, 0, Hash::None); }));
      report("load", "tier", n, timed(n, rounds, [&](unsigned t) { probe.load_tier(t, n); }));
      for (const std::size_t p : pieces)
        for (const auto& [hash, name] : loads) {
          const Hash how = hash;  // a variable, so the lambda may capture it (not a binding)
          report("load", name + std::to_string(p >> 10) + "KiB", n,
                 timed(n, rounds, [&](unsigned t) { probe.load_plain(t, n, p, how); }));
        }
    }
    if (!json_out.empty()) {
      std::ofstream(json_out) << nlohmann::json{{"chunk_bytes", chunk}, {"rounds", rounds}, {"rows", rows}}.dump(2);
      std::printf("wrote %s\n", json_out.c_str());
    }
    std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-stream-probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
