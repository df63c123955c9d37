// `ferry kv bench`: push and pull through a running agent, measured at the
// application's API, beside the copy baselines in the same run (docs/bench/xfer.md).
// Columns follow nixlbench: block size, batch, GB/s (1e9), average latency, and
// the average prep (create_xfer_req), post and transfer (post -> done) times.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/xfer/agent.h"
#include "bench/kv/kv_bench.h"
#include "xfer/gpu/leaf_segments.h"
#include "xfer/gpu/gpu.h"
#include "xfer/checksum/xxh3_parts.h"

namespace ferry::xfer {
namespace {

using Clock = std::chrono::steady_clock;
double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct Row {
  std::string what;  // "ferry push", "ferry pull", "cudaMemcpyAsync loop D2H" ...
  std::size_t block = 0, batch = 0, iterations = 0;
  double gbps = 0, avg_lat_us = 0, prep_us = 0, post_us = 0, tx_us = 0;
};

nlohmann::json to_json(const Row& r) {
  return {{"what", r.what},       {"block_bytes", r.block}, {"batch", r.batch},    {"iterations", r.iterations},
          {"gbps", r.gbps},       {"avg_lat_us", r.avg_lat_us}, {"prep_us", r.prep_us}, {"post_us", r.post_us},
          {"tx_us", r.tx_us}};
}

void print_row(const Row& r) {
  std::printf("%-28s %10zu %6zu %9.2f %12.1f %10.1f %10.1f %12.1f\n", r.what.c_str(), r.block, r.batch, r.gbps,
              r.avg_lat_us, r.prep_us, r.post_us, r.tx_us);
  std::fflush(stdout);
}

// `memory`: what the application's memory is, in the row's name ("" for the
// bench's Buffer; "plain" for memory the agent reaches by cross-memory attach).
Row run_agent_op(Agent& agent, XferOp op, const void* base, std::size_t block, std::size_t batch,
                 std::size_t iterations, const std::string& memory = {}) {
  std::vector<MemDesc> descs(batch);
  std::vector<std::string> keys(batch);
  for (std::size_t i = 0; i < batch; ++i) {
    descs[i] = {reinterpret_cast<std::uint64_t>(base) + i * block, block, 0};
    keys[i] = "bench/" + std::to_string(block) + "/" + std::to_string(i);
  }
  Row row{std::string(op == XferOp::Write ? "ferry push" : "ferry pull") + (memory.empty() ? "" : " (" + memory + ")"),
          block, batch, iterations};
  double prep = 0, post = 0, tx = 0;
  const auto start = Clock::now();
  for (std::size_t it = 0; it < iterations; ++it) {
    const auto t0 = Clock::now();
    const XferReq req = agent.create_xfer_req(op, descs, keys);
    const auto t1 = Clock::now();
    XferStatus s = agent.post(req);
    const auto t2 = Clock::now();
    if (s == XferStatus::InProgress) s = agent.wait(req);
    const auto t3 = Clock::now();
    if (s != XferStatus::Ok) {
      std::string why = to_string(s);
      for (const auto& r : agent.results(req))
        if (is_error(r.status)) {
          why = r.error;
          break;
        }
      throw Error(std::string("kv bench: ") + row.what + " of " + std::to_string(block) + "-byte blocks failed: " + why);
    }
    agent.release(req);
    prep += us_between(t0, t1);
    post += us_between(t1, t2);
    tx += us_between(t2, t3);
  }
  const double total_us = us_between(start, Clock::now());
  const auto n = static_cast<double>(iterations);
  row.gbps = static_cast<double>(block * batch) * n / (total_us * 1e3);
  row.prep_us = prep / n;
  row.post_us = post / n;
  row.tx_us = tx / n;
  row.avg_lat_us = (post + tx) / n;
  return row;
}

std::string method_name(gpu::CopyMethod m) {
  switch (m) {
    case gpu::CopyMethod::Batch: return "cudaMemcpyBatchAsync";
    case gpu::CopyMethod::Loop: return "cudaMemcpyAsync loop";
    case gpu::CopyMethod::Auto: return "engines, kernel XXH3";  // see run_baseline
    default: return "copy kernel+XXH3";
  }
}

// The same bytes copied by the application itself into pinned host memory:
// what the agent's path is measured against. The copy kernel (the agent's
// --copy kernel, one lane here) also checksums every block as the agent does:
// leaf by leaf on the GPU, combined on the CPU (agent/leaf_segments.h). Auto
// stands for the agent's other way to do that: cudaMemcpyBatchAsync copies, and
// the kernel hashes the blocks in device memory (gpu::HashedCopy::Engines).
Row run_baseline(const Buffer& buf, void* host, std::size_t block, std::size_t batch, std::size_t iterations,
                 bool to_device, gpu::CopyMethod method) {
  Row row{(buf.on_gpu() ? method_name(method) : std::string("memcpy loop")) + (to_device ? " H2D" : " D2H"), block,
          batch, iterations};
  const bool kernel = buf.on_gpu() && (method == gpu::CopyMethod::Kernel || method == gpu::CopyMethod::Auto);
  const auto how = method == gpu::CopyMethod::Auto ? gpu::HashedCopy::Engines : gpu::HashedCopy::Fused;
  std::vector<gpu::Segment> segs;
  std::vector<std::size_t> first_leaf(batch);
  for (std::size_t i = 0; i < batch; ++i) {
    auto* dev = static_cast<std::uint8_t*>(buf.data()) + i * block;
    auto* h = static_cast<std::uint8_t*>(host) + i * block;
    const gpu::Segment s = to_device ? gpu::Segment{dev, h, block} : gpu::Segment{h, dev, block};
    first_leaf[i] = segs.size();
    if (kernel)
      gpu::append_leaves(s, &segs);
    else
      segs.push_back(s);
  }
  std::unique_ptr<gpu::Lanes> lanes;
  std::vector<std::uint64_t> sums(segs.size());
  std::vector<std::uint8_t> hashed(segs.size());
  std::uint64_t unhashed = 0;
  if (buf.on_gpu()) lanes = std::make_unique<gpu::Lanes>(buf.device(), 1, method, block * batch, xxh3_default_secret());
  const auto start = Clock::now();
  for (std::size_t it = 0; it < iterations; ++it) {
    if (lanes) {
      Fault fault;
      const XferStatus s = kernel ? lanes->copy_hashed(0, segs, to_device, how, sums.data(), hashed.data(), fault)
                                  : lanes->copy(0, segs, to_device, fault);
      if (s != XferStatus::Ok) throw Error("kv bench baseline: " + fault.detail());
      for (std::size_t i = 0; kernel && i < batch; ++i)
        if (!gpu::checksum_from_leaves(sums, hashed, first_leaf[i], block)) ++unhashed;
    } else {
      for (const auto& s : segs) std::memcpy(s.dst, s.src, s.len);
    }
  }
  const double total_us = us_between(start, Clock::now());
  row.gbps = static_cast<double>(block * batch) * static_cast<double>(iterations) / (total_us * 1e3);
  row.tx_us = row.avg_lat_us = total_us / static_cast<double>(iterations);
  // The agent would hash such blocks on the CPU; this baseline does not, so say so.
  if (unhashed > 0) row.what += " (" + std::to_string(unhashed) + " blocks unhashed)";
  return row;
}

// cudaMemcpyAsync a block at a time over several streams, each fed by a thread
// of its own: the strongest plain CUDA copy of small blocks, with no checksum.
// One thread cannot issue 64 KiB copies as fast as one engine moves them.
Row run_streams_baseline(const Buffer& buf, void* host, std::size_t block, std::size_t batch,
                         std::size_t iterations, bool to_device, int streams) {
  Row row{"cudaMemcpyAsync x" + std::to_string(streams) + (to_device ? " H2D" : " D2H"), block, batch,
          iterations};
  gpu::Lanes lanes(buf.device(), streams, gpu::CopyMethod::Loop);
  std::vector<std::vector<gpu::Segment>> shares(static_cast<std::size_t>(streams));
  for (std::size_t i = 0; i < batch; ++i) {
    auto* dev = static_cast<std::uint8_t*>(buf.data()) + i * block;
    auto* h = static_cast<std::uint8_t*>(host) + i * block;
    shares[i * static_cast<std::size_t>(streams) / batch].push_back(to_device ? gpu::Segment{dev, h, block}
                                                                              : gpu::Segment{h, dev, block});
  }
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  {
    std::vector<std::jthread> threads;
    for (int l = 0; l < streams; ++l)
      threads.emplace_back([&, l] {
        Fault fault;
        for (std::size_t it = 0; it < iterations && !failed; ++it)
          if (lanes.start(l, shares[static_cast<std::size_t>(l)], to_device, fault) != XferStatus::Ok ||
              lanes.finish(l, fault) != XferStatus::Ok)
            failed = true;
      });
  }
  const double total_us = us_between(start, Clock::now());
  if (failed) throw Error("kv bench baseline: " + row.what + " failed");
  row.gbps = static_cast<double>(block * batch) * static_cast<double>(iterations) / (total_us * 1e3);
  row.tx_us = row.avg_lat_us = total_us / static_cast<double>(iterations);
  return row;
}

}  // namespace

int kv_bench(const KvBenchOptions& o) {
  if (o.mem != "vram" && o.mem != "dram") throw Error("--mem must be vram or dram");
  AgentConfig cfg;
  cfg.endpoint = o.endpoint;
  cfg.name = "ferry kv bench";
  Agent agent(cfg);
  const MemType type = o.mem == "vram" ? MemType::Vram : MemType::Dram;
  const std::size_t largest = *std::max_element(o.block_sizes.begin(), o.block_sizes.end());
  const std::size_t buf_bytes = std::max(o.batch_bytes, largest);
  Buffer buf = Buffer::allocate(type, buf_bytes);
  // Random contents, so a pull that returned the wrong object cannot pass the check.
  std::vector<std::uint8_t> pattern(buf_bytes), back(buf_bytes);
  std::mt19937_64 rng(42);
  for (std::size_t i = 0; i + 8 <= pattern.size(); i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(&pattern[i], &v, 8);
  }
  buf.write(0, pattern.data(), buf_bytes);
  agent.register_memory(buf);
  void* host = buf.on_gpu() ? gpu::alloc_pinned(buf_bytes) : std::malloc(buf_bytes);
  // Host memory Ferry did not allocate (what LMCache or NumPy hands over): the
  // agent reaches it by cross-memory attach instead of a mapped memfd, and the
  // two are measured side by side.
  std::vector<std::uint8_t> plain;
  if (!buf.on_gpu()) {
    plain = pattern;
    agent.register_memory(MemType::Dram, plain.data(), plain.size());
  }

  std::printf("ferry kv bench: %s memory (%s), agent %s, tiers: ", o.mem.c_str(),
              buf.on_gpu() ? "GPU" : "host", o.endpoint.c_str());
  for (const auto& t : agent.tiers()) std::printf("%s ", t.c_str());
  std::printf("\n%-28s %10s %6s %9s %12s %10s %10s %12s\n", "what", "block (B)", "batch", "GB/s", "avg lat (us)",
              "prep (us)", "post (us)", "transfer (us)");
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t block : o.block_sizes) {
    const std::size_t batch = std::max<std::size_t>(1, o.batch_bytes / block);
    const std::size_t per_iter = batch * block;
    const std::size_t iterations = std::max<std::size_t>(1, o.total_bytes / per_iter);
    run_agent_op(agent, XferOp::Write, buf.data(), block, batch, 1);  // warm-up: first touch of tier memory
    std::vector<Row> results;
    results.push_back(run_agent_op(agent, XferOp::Write, buf.data(), block, batch, iterations));
    buf.write(0, std::vector<std::uint8_t>(per_iter, 0).data(), per_iter);  // so the pull must refill it
    results.push_back(run_agent_op(agent, XferOp::Read, buf.data(), block, batch, iterations));
    buf.read(0, back.data(), per_iter);
    if (std::memcmp(back.data(), pattern.data(), per_iter) != 0)
      throw Error("kv bench: pulled data differs from what was pushed (" + std::to_string(block) + "-byte blocks)");
    if (!plain.empty()) {
      results.push_back(run_agent_op(agent, XferOp::Write, plain.data(), block, batch, iterations, "plain"));
      std::memset(plain.data(), 0, per_iter);
      results.push_back(run_agent_op(agent, XferOp::Read, plain.data(), block, batch, iterations, "plain"));
      if (std::memcmp(plain.data(), pattern.data(), per_iter) != 0)
        throw Error("kv bench: pulled data differs from what was pushed (plain memory, " + std::to_string(block) +
                    "-byte blocks)");
    }
    if (o.baselines) {
      using M = gpu::CopyMethod;
      for (M m : buf.on_gpu() ? std::vector<M>{M::Loop, M::Batch, M::Kernel, M::Auto} : std::vector<M>{M::Loop}) {
        results.push_back(run_baseline(buf, host, block, batch, iterations, false, m));
        results.push_back(run_baseline(buf, host, block, batch, iterations, true, m));
      }
      if (buf.on_gpu() && o.baseline_streams > 1) {
        results.push_back(
            run_streams_baseline(buf, host, block, batch, iterations, false, o.baseline_streams));
        results.push_back(
            run_streams_baseline(buf, host, block, batch, iterations, true, o.baseline_streams));
      }
    }
    for (const auto& r : results) {
      print_row(r);
      rows.push_back(to_json(r));
    }
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < batch; ++i) keys.push_back("bench/" + std::to_string(block) + "/" + std::to_string(i));
    agent.remove(keys);
  }
  if (buf.on_gpu())
    gpu::free_pinned(host);
  else
    std::free(host);
  nlohmann::json out{{"mem", o.mem},
                     {"on_gpu", buf.on_gpu()},
                     {"tiers", agent.tiers()},
                     {"total_bytes_per_point", o.total_bytes},
                     {"batch_bytes", o.batch_bytes},
                     {"rows", rows}};
  std::ofstream(o.json_out) << out.dump(2) << "\n";
  std::printf("wrote %s\n", o.json_out.c_str());
  return 0;
}

}  // namespace ferry::xfer
