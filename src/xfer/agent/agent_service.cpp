#include "ferry/xfer/agent_service.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "ferry/core/signal_fd.h"
#include "ferry/core/status.h"
#include "xfer/agent/mover.h"
#include "xfer/agent/session.h"
#include "xfer/agent/session_loop.h"
#include "xfer/gpu.h"
#include "xfer/protocol.h"
#include "xfer/store/sizes.h"
#include "xfer/store/tier_chain.h"
#include "xfer/store/tier_spec.h"

namespace ferry::xfer {
namespace {

void pin_process(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) throw Error("--cpus: core " + std::to_string(c) + " is out of range");
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) throw_errno("pinning the agent to --cpus");
}

bool decide_gpu(const std::string& gpu, int* device) {
  if (gpu == "none") return false;
  const bool present = gpu::available();
  if (gpu == "auto") {
    *device = 0;
    return present;
  }
  try {
    *device = std::stoi(gpu);
  } catch (const std::logic_error&) {
    throw Error("--gpu must be auto, none or a device index, not '" + gpu + "'");
  }
  if (!present) throw Error("--gpu " + gpu + ": no CUDA device here (use --gpu none for a CPU-only agent)");
  return true;
}

std::vector<BackendInfo> declared_backends(bool gpu, const store::TierChain& chain) {
  std::vector<BackendInfo> out;
  // Copy engines: how the agent reaches application memory.
  out.push_back({"memfd", {MemType::Dram, MemType::Vram}, true, false, true});
  if (gpu) out.push_back({"cuda-ipc", {MemType::Vram}, true, false, true});
  // Storage: each tier holds objects by key; file tiers are files too.
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const std::string kind(chain.tier(i).kind());
    std::vector<MemType> types{MemType::Obj};
    if (kind == "file") types.push_back(MemType::File);
    out.push_back({kind, types, true, false, true});
  }
  return out;
}

}  // namespace

int run_agent(const AgentServiceOptions& o) {
  if (o.tiers.empty()) throw Error("at least one --tier is needed, e.g. --tier dram:1GiB");
  if (o.copy != "auto" && o.copy != "batch" && o.copy != "loop" && o.copy != "kernel")
    throw Error("--copy must be auto, batch, loop or kernel, not '" + o.copy + "'");
  if (o.staging_mib == 0) throw Error("--staging-mib must be positive");
  if (o.chunk_blocks == 0) throw Error("--chunk-blocks must be positive");
  if (o.max_sessions == 0) throw Error("--max-sessions must be at least 1");
  if (o.max_session_mib == 0) throw Error("--max-session-mib must be positive");
  if (o.max_regions == 0) throw Error("--max-regions must be at least 1");
  if (!(o.stall_timeout_s > 0)) throw Error("--stall-timeout must be a positive number of seconds");
  pin_process(o.cpus);
  SignalFd signals;  // before any thread, so every thread blocks SIGINT/SIGTERM

  std::vector<std::unique_ptr<store::Tier>> tiers;
  for (const auto& spec : o.tiers) tiers.push_back(store::make_tier(spec));
  store::TierChain chain(std::move(tiers));

  agent::MoverOptions mo;
  mo.staging_bytes = o.staging_mib << 20;
  mo.chunk_bytes = o.chunk_kib << 10;  // 0: the mover picks
  mo.chunk_blocks = o.chunk_blocks;
  mo.queue_depth = o.queue_depth;
  mo.gpu = decide_gpu(o.gpu, &mo.device);
  mo.copy = o.copy == "batch"    ? gpu::CopyMethod::Batch
            : o.copy == "loop"   ? gpu::CopyMethod::Loop
            : o.copy == "kernel" ? gpu::CopyMethod::Kernel
                                 : gpu::CopyMethod::Auto;
  mo.kernel_below = store::parse_size(o.kernel_below, "--kernel-below");
  mo.kernel_below_pull = store::parse_size(o.kernel_below_pull, "--kernel-below-pull");
  mo.engines_from = store::parse_size(o.engines_from, "--engines-from");
  mo.lane_spin_us = static_cast<unsigned>(o.lane_spin_us >= 0 ? o.lane_spin_us : o.cpus.empty() ? 0 : 200);
  auto mover = std::make_unique<agent::DataMover>(mo, chain);

  agent::AgentContext ctx;
  ctx.mover = mover.get();
  ctx.shared_namespace = o.shared_namespace;
  ctx.limits.max_bytes = o.max_session_mib << 20;
  ctx.limits.max_regions = o.max_regions;
  ctx.limits.stall = std::chrono::milliseconds(static_cast<long long>(o.stall_timeout_s * 1000));
  ctx.chain = &chain;
  ctx.gpu_here = mo.gpu;
  ctx.backends = declared_backends(mo.gpu, chain);
  for (std::size_t i = 0; i < chain.size(); ++i) ctx.tiers.push_back(chain.tier(i).describe());
  ctx.stats_json = [&] {
    const agent::MoverStats s = ctx.mover->stats();
    nlohmann::json j;
    j["bytes_written"] = s.bytes_written;
    j["bytes_read"] = s.bytes_read;
    j["objects_written"] = s.objects_written;
    j["objects_read"] = s.objects_read;
    j["failed_descriptors"] = s.failures;
    j["batches"] = s.batches;
    j["transfers"] = ctx.transfers.load();
    j["bad_requests"] = ctx.bad_requests.load();
    j["refused_requests"] = ctx.refused_requests.load();
    j["sessions_cut_off"] = ctx.cut_off.load();
    for (std::size_t i = 0; i < chain.size(); ++i) {
      const auto& t = chain.tier(i);
      nlohmann::json tj;
      tj["tier"] = t.describe();
      tj["used_bytes"] = t.used();
      if (t.capacity() != store::kUnbounded) tj["capacity_bytes"] = t.capacity();
      j["tiers"].push_back(tj);
    }
    return j.dump();
  };

  const proto::Endpoint ep = proto::Endpoint::parse(o.endpoint);
  std::uint16_t port = ep.port;
  const int listen_fd = proto::listen_on(ep, &port);
  proto::Endpoint bound = ep;
  bound.port = port;
  std::string chain_text;
  for (const auto& t : ctx.tiers) chain_text += (chain_text.empty() ? "" : " -> ") + t;
  log::app().info("agent listening on {}; tiers: {}", bound.to_string(), chain_text);
  log::app().info("data path: {}{}", mover->describe(), mo.gpu ? ", GPU " + std::to_string(mo.device) : "");
  if (!o.ready_file.empty()) {
    std::ofstream(o.ready_file + ".tmp") << bound.to_string() << "\n";
    std::rename((o.ready_file + ".tmp").c_str(), o.ready_file.c_str());
  }

  agent::LoopOptions lo;
  lo.peers = o.peers;
  lo.max_sessions = o.max_sessions;
  log::app().info("applications admitted: {}; key namespaces: {}; at most {} sessions of {} MiB each",
                  o.peers.describe(), o.shared_namespace ? "one, shared" : "one per uid", o.max_sessions,
                  o.max_session_mib);
  agent::MoverStats last_stats;
  std::string phases;
  {
    agent::SessionLoop loop(ctx, listen_fd, ep.tcp, lo);
    loop.run(signals.fd());
    log::app().info("{}: shutting down", signals.read_name());
    // The copy threads finish (or cancel) what is queued before the loop, whose
    // wake-ups they may still call, goes away.
    last_stats = mover->stats();
    phases = mover->phases().describe();
    mover.reset();
  }
  const agent::MoverStats st = last_stats;
  log::app().info("agent done: {} objects written ({} bytes), {} read ({} bytes), {} failed descriptors",
                  st.objects_written, st.bytes_written, st.objects_read, st.bytes_read, st.failures);
  log::app().info("agent time per phase (summed over threads): {}", phases);
  return 0;
}

}  // namespace ferry::xfer
