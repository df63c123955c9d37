// ferry-store-bench: put and get throughput of one storage tier (or a chain), in
// batches of --batch objects of --block-size bytes, --total bytes in all. The file
// tier is compared with fio and the redis tier with redis-benchmark by
// store_bench.py, which runs this with the same block size, queue depth and
// O_DIRECT setting.
//
//   ferry-store-bench --tier file:/mnt/nvme/bench --block-size 1MiB --qd 32 --batch 256 --total 2GiB --direct
//
// A call returns when its whole batch is done, so the queue drains at the end of
// every call: with --batch equal to --qd the device sees a full queue only part
// of the time. fio keeps its queue full; compare with --batch several times --qd
// (or several --threads), as the agent's copy threads run.
//
// GB/s are 1e9 bytes per second of object data (headers not counted). Checksums
// are computed before the timed put (the agent computes them as data arrives);
// the timed get includes the tier's checksum verification.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include "ferry/core/status.h"
#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/sizes.h"
#include "xfer/store/tier_chain.h"

namespace store = ferry::xfer::store;
using ferry::xfer::XferStatus;
using ferry::xfer::checksum;

namespace {

struct Phase {
  double seconds = 0;
  std::uint64_t errors = 0;
  std::string first_error;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-store-bench: put/get throughput of a storage tier"};
  std::vector<std::string> tiers;
  std::string block_text = "1MiB", total_text = "1GiB", json_out;
  unsigned qd = 32, batch = 0, threads = 1;
  std::uint64_t distinct_keys = 0;
  bool direct = false, keep = false;
  app.add_option("--tier", tiers,
                 "tier spec (repeat for a chain), e.g. file:/tmp/b or redis://127.0.0.1:6379")
      ->required();
  app.add_option("--block-size", block_text, "object size (e.g. 4KiB, 1MiB)");
  app.add_option("--qd", qd, "the file tier's queue depth (objects in flight)")->check(CLI::Range(1u, 4096u));
  app.add_option("--batch", batch,
                 "objects per put/get call (default: --qd); for Redis the pipeline window (up to 128)")
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--total", total_text, "bytes written, then read, per run");
  app.add_option("--threads", threads, "concurrent callers (connections for Redis)")
      ->check(CLI::Range(1u, 256u));
  app.add_flag("--direct", direct, "add ',direct' (O_DIRECT) to file tier specs");
  app.add_option("--keys", distinct_keys,
                 "cycle over this many keys (1: every put overwrites one key, as redis-benchmark does by "
                 "default); default: a key per object");
  app.add_flag("--keep", keep, "leave the objects in the tier (default: remove them)");
  app.add_option("--json-out", json_out, "write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::uint64_t block = store::parse_size(block_text, "--block-size");
    const std::uint64_t total = store::parse_size(total_text, "--total");
    if (block == 0) throw ferry::Error("--block-size must be more than 0");
    const std::uint64_t objects = std::max<std::uint64_t>(1, total / block);
    if (batch == 0) batch = qd;
    for (auto& t : tiers) {
      if (t.rfind("file:", 0) == 0) {
        if (direct && t.find(",direct") == std::string::npos) t += ",direct";
        if (t.find(",qd=") == std::string::npos) t += ",qd=" + std::to_string(qd);
      }
      if (t.rfind("redis://", 0) == 0 && t.find("connections=") == std::string::npos)
        t += std::string(t.find('?') == std::string::npos ? "?" : "&") +
             "connections=" + std::to_string(threads);
    }
    auto chain = store::make_chain(tiers);

    // One page-aligned source buffer per batch slot (O_DIRECT writes them in
    // place), each with its own random content and checksum.
    std::vector<store::AlignedBuffer> src(batch);
    std::vector<std::uint64_t> sums(batch);
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (unsigned s = 0; s < batch; ++s) {
      src[s].resize(block);
      auto* p = reinterpret_cast<std::uint64_t*>(src[s].data());
      for (std::uint64_t i = 0; i < store::io_round_up(block) / 8; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = x;
      }
    }
    const double c0 = now_s();
    for (unsigned s = 0; s < batch; ++s)
      sums[s] = checksum({reinterpret_cast<const std::uint8_t*>(src[s].data()), block});
    const double checksum_gbps = static_cast<double>(batch) * block / (now_s() - c0) / 1e9;

    if (distinct_keys == 0 || distinct_keys > objects) distinct_keys = objects;
    std::vector<std::string> keys(objects);
    for (std::uint64_t i = 0; i < objects; ++i) keys[i] = "bench/" + std::to_string(i % distinct_keys);

    // Destination buffers for the gets, one set per thread, touched now: first-touch
    // page faults belong to the benchmark, not to the tier (fio reuses its buffers too).
    std::vector<std::vector<store::AlignedBuffer>> dsts(threads);
    for (auto& dst : dsts) {
      dst.resize(batch);
      for (auto& d : dst) {
        d.resize(block);
        std::memset(d.data(), 0, d.size());
      }
    }

    // Each thread takes every threads-th batch.
    const auto run = [&](bool is_put) {
      Phase ph;
      std::atomic<std::uint64_t> errors{0};
      std::mutex err_mu;
      const double t0 = now_s();
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
          auto& dst = dsts[t];
          std::vector<store::PutItem> puts(batch);
          std::vector<store::GetItem> gets(batch);
          for (std::uint64_t first = std::uint64_t{t} * batch; first < objects;
               first += std::uint64_t{threads} * batch) {
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, objects - first));
            for (std::size_t k = 0; k < n; ++k) {
              if (is_put) {
                puts[k] = store::PutItem();
                puts[k].key = keys[first + k];
                puts[k].data = {reinterpret_cast<const std::uint8_t*>(src[k].data()), block};
                puts[k].checksum = sums[k];
              } else {
                gets[k] = store::GetItem();
                gets[k].key = keys[first + k];
                gets[k].out = {reinterpret_cast<std::uint8_t*>(dst[k].data()), dst[k].size()};
              }
            }
            ferry::xfer::Fault fault;
            if (is_put)
              chain->put({puts.data(), n}, fault);
            else
              chain->get({gets.data(), n}, fault);
            for (std::size_t k = 0; k < n; ++k) {
              const XferStatus s = is_put ? puts[k].status : gets[k].status;
              if (s == XferStatus::Ok) continue;
              if (errors.fetch_add(1) == 0) {
                std::lock_guard lock(err_mu);
                ph.first_error = fault.failed() ? fault.detail() : std::string(to_string(s));
              }
            }
          }
        });
      }
      for (auto& th : ts) th.join();
      ph.seconds = now_s() - t0;
      ph.errors = errors.load();
      return ph;
    };

    const Phase put = run(true);
    const Phase get = run(false);
    if (!keep)
      for (std::uint64_t i = 0; i < distinct_keys; ++i) {
        ferry::xfer::Fault fault;  // a key that stays is logged where it failed
        (void)chain->remove(keys[i], fault);
      }

    const double bytes = static_cast<double>(objects * block);
    const auto phase_json = [&](const Phase& p) {
      return nlohmann::json{{"seconds", p.seconds},
                            {"gbps", bytes / p.seconds / 1e9},
                            {"ops_per_s", objects / p.seconds},
                            {"errors", p.errors},
                            {"first_error", p.first_error}};
    };
    nlohmann::json out{{"tiers", tiers},
                       {"block_size", block},
                       {"qd", qd},
                       {"batch", batch},
                       {"threads", threads},
                       {"direct", direct},
                       {"objects", objects},
                       {"distinct_keys", distinct_keys},
                       {"total_bytes", objects * block},
                       {"checksum_gbps", checksum_gbps},
                       {"put", phase_json(put)},
                       {"get", phase_json(get)}};
    std::printf("%-40s %10s %4s %6s %8s %10s %10s %8s\n", "tier", "block", "qd", "batch", "objects",
                "put GB/s", "get GB/s", "errors");
    std::printf("%-40s %10s %4u %6u %8llu %10.3f %10.3f %8llu\n", tiers.front().c_str(),
                store::format_size(block).c_str(), qd, batch, static_cast<unsigned long long>(objects),
                bytes / put.seconds / 1e9, bytes / get.seconds / 1e9,
                static_cast<unsigned long long>(put.errors + get.errors));
    if (!put.first_error.empty()) std::fprintf(stderr, "first put error: %s\n", put.first_error.c_str());
    if (!get.first_error.empty()) std::fprintf(stderr, "first get error: %s\n", get.first_error.c_str());
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
    return put.errors + get.errors == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-store-bench: %s\n", e.what());
    return 2;
  }
}
