#include "ferry/xfer/agent_service.h"

#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/metrics_endpoint.h"
#include "core/prometheus.h"
#include "core/service_thread.h"
#include "ferry/core/status.h"
#include "ferry/xfer/tier_registry.h"
#include "xfer/agent/mover.h"
#include "xfer/agent/session.h"
#include "xfer/agent/session_loop.h"
#include "xfer/gpu/gpu.h"
#include "xfer/store/tier_chain.h"
#include "xfer/wire/protocol.h"

namespace ferry::xfer {
namespace {

void pin_process(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE)
      throw Error("AgentServiceOptions::cpus: core " + std::to_string(c) + " is out of range");
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    throw_errno("pinning the agent to AgentServiceOptions::cpus");
}

bool decide_gpu(int gpu, int* device) {
  if (gpu == kGpuNone) return false;
  const bool present = gpu::available();
  if (gpu == kGpuAuto) {
    *device = 0;
    return present;
  }
  if (gpu < 0)
    throw Error("AgentServiceOptions::gpu must be kGpuAuto, kGpuNone or a device index, not " +
                std::to_string(gpu));
  if (!present)
    throw Error("AgentServiceOptions::gpu " + std::to_string(gpu) +
                ": no CUDA device here (use AgentServiceOptions::gpu kGpuNone for a CPU-only agent)");
  *device = gpu;
  return true;
}

gpu::CopyMethod copy_method(CopyMode mode) {
  switch (mode) {
    case CopyMode::Batch: return gpu::CopyMethod::Batch;
    case CopyMode::Loop: return gpu::CopyMethod::Loop;
    case CopyMode::Kernel: return gpu::CopyMethod::Kernel;
    case CopyMode::Auto: break;
  }
  return gpu::CopyMethod::Auto;
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

class AgentService::Impl {
 public:
  explicit Impl(AgentServiceOptions options) : o_(std::move(options)) { validate(); }
  ~Impl() {
    metrics_.reset();
    service_.request_stop();
    (void)service_.wait();
  }
  void start();
  int run();
  // For the host's threads: "{}" once the agent has stopped.
  std::string stats_json() const {
    std::lock_guard lk(mu_);
    return mover_ != nullptr ? build_stats() : "{}";
  }

  // For the metrics endpoint's thread: the families of docs/xfer.md, "Metrics".
  std::string metrics_text() const;

  AgentServiceOptions o_;
  std::string endpoint_;
  ServiceThread service_;
  std::uint16_t metrics_port_ = 0;

 private:
  void validate() const;
  std::string build_stats() const;

  mutable std::mutex mu_;  // mover_'s reset at stop against stats_json() from the host
  std::unique_ptr<store::TierChain> chain_;
  std::unique_ptr<agent::DataMover> mover_;
  agent::AgentContext ctx_;
  std::unique_ptr<agent::SessionLoop> loop_;
  std::unique_ptr<MetricsEndpoint> metrics_;  // last: gone before what it reads
};

std::string AgentService::Impl::metrics_text() const {
  static constexpr const char* kDirections[] = {"push", "pull"};  // XferOp::Write, XferOp::Read
  const agent::AgentMetrics& m = ctx_.metrics;
  const agent::AgentMetrics::Reading r = m.read();
  prom::TextWriter w;
  w.family("ferry_agent_transfers_total", "counter", "Transfer requests, by direction.");
  for (std::size_t op = 0; op < agent::AgentMetrics::kOps; ++op)
    w.sample("ferry_agent_transfers_total", {{"direction", kDirections[op]}}, r.transfers[op]);
  w.family("ferry_agent_objects_total", "counter", "Objects stored (push) or read (pull), by tier.");
  for (std::size_t op = 0; op < agent::AgentMetrics::kOps; ++op)
    for (std::size_t t = 0; t < m.tiers(); ++t)
      w.sample("ferry_agent_objects_total", {{"direction", kDirections[op]}, {"tier", ctx_.tiers[t]}},
               m.objects(static_cast<XferOp>(op), t));
  w.family("ferry_agent_bytes_total", "counter", "Bytes stored (push) or read (pull), by tier.");
  for (std::size_t op = 0; op < agent::AgentMetrics::kOps; ++op)
    for (std::size_t t = 0; t < m.tiers(); ++t)
      w.sample("ferry_agent_bytes_total", {{"direction", kDirections[op]}, {"tier", ctx_.tiers[t]}},
               m.bytes(static_cast<XferOp>(op), t));
  w.family(
      "ferry_agent_failed_descriptors_total", "counter",
      "Descriptors answered with an error, by status (a refused request counts each of its descriptors).");
  for (std::size_t k = 0; k < agent::kFailureKinds.size(); ++k)
    w.sample("ferry_agent_failed_descriptors_total", {{"kind", agent::kFailureKinds[k]}}, r.failures[k]);
  w.family(
      "ferry_agent_errors_total", "counter",
      "Errors beyond descriptors: bad_request (a malformed frame: its session is closed), refused_request "
      "(a transfer refused whole), session_cut_off (a session that stalled or held too much).");
  w.sample("ferry_agent_errors_total", {{"kind", "bad_request"}},
           ctx_.bad_requests.load(std::memory_order_relaxed));
  w.sample("ferry_agent_errors_total", {{"kind", "refused_request"}},
           ctx_.refused_requests.load(std::memory_order_relaxed));
  w.sample("ferry_agent_errors_total", {{"kind", "session_cut_off"}},
           ctx_.cut_off.load(std::memory_order_relaxed));
  w.gauge("ferry_agent_sessions", "Applications connected now.", static_cast<double>(r.sessions));
  w.gauge("ferry_agent_transfers_in_flight", "Transfers accepted and not yet answered.",
          static_cast<double>(r.in_flight));
  // The mover and the chain go at stop (mu_); what they report is left out then.
  std::lock_guard lk(mu_);
  if (mover_ == nullptr || chain_ == nullptr) return w.take();
  w.gauge("ferry_agent_queue_depth", "Batches waiting for a copy lane.",
          static_cast<double>(mover_->queued()));
  w.family("ferry_agent_tier_used_bytes", "gauge", "Bytes each tier holds.");
  for (std::size_t t = 0; t < chain_->size(); ++t)
    w.sample("ferry_agent_tier_used_bytes", {{"tier", ctx_.tiers[t]}}, std::uint64_t{chain_->tier(t).used()});
  w.family(
      "ferry_agent_tier_capacity_bytes", "gauge",
      "What each tier may hold: its configured bound, or what its medium allows now; absent where nobody "
      "can say (Redis).");
  for (std::size_t t = 0; t < chain_->size(); ++t)
    if (const auto cap = chain_->tier(t).capacity_now(); cap != store::kUnbounded)
      w.sample("ferry_agent_tier_capacity_bytes", {{"tier", ctx_.tiers[t]}}, std::uint64_t{cap});
  w.family(
      "ferry_agent_stage_seconds", "histogram",
      "Time of each stage, per batch or per request: queue (a batch waiting for a lane), decode, reserve, "
      "copy, put, lookup, verify, answer, stream (docs/xfer.md).");
  for (int p = 0; p < static_cast<int>(agent::Phase::kCount); ++p)
    mover_->phases()
        .histogram(static_cast<agent::Phase>(p))
        .write(w, "ferry_agent_stage_seconds", {{"stage", agent::kPhaseNames[p]}});
  w.family("ferry_agent_transfer_seconds", "histogram",
           "A transfer's whole time, from its request's arrival to its answer, by direction.");
  for (std::size_t op = 0; op < agent::AgentMetrics::kOps; ++op)
    m.transfer_seconds(static_cast<XferOp>(op))
        .write(w, "ferry_agent_transfer_seconds", {{"direction", kDirections[op]}});
  return w.take();
}

void AgentService::Impl::validate() const {
  const AgentServiceOptions& o = o_;
  if (o.tiers.empty()) throw Error("AgentServiceOptions::tiers needs at least one tier, e.g. dram:1GiB");
  if (o.staging_mib == 0) throw Error("AgentServiceOptions::staging_mib must be positive");
  if (o.chunk_blocks == 0) throw Error("AgentServiceOptions::chunk_blocks must be positive");
  if (o.max_sessions == 0) throw Error("AgentServiceOptions::max_sessions must be at least 1");
  if (o.max_session_mib == 0) throw Error("AgentServiceOptions::max_session_mib must be positive");
  if (o.max_regions == 0) throw Error("AgentServiceOptions::max_regions must be at least 1");
  if (!(o.stall_timeout_s > 0))
    throw Error("AgentServiceOptions::stall_timeout_s must be a positive number of seconds");
  if (!(o.memory_timeout_s > 0) || !std::isfinite(o.memory_timeout_s))
    throw Error("AgentServiceOptions::memory_timeout_s must be a positive number of seconds");
}

std::string AgentService::Impl::build_stats() const {
  const agent::MoverStats s = mover_->stats();
  nlohmann::json j;
  j["bytes_written"] = s.bytes_written;
  j["bytes_read"] = s.bytes_read;
  j["objects_written"] = s.objects_written;
  j["objects_read"] = s.objects_read;
  j["failed_descriptors"] = s.failures;
  j["batches"] = s.batches;
  j["transfers"] = ctx_.transfers.load();
  j["bad_requests"] = ctx_.bad_requests.load();
  j["refused_requests"] = ctx_.refused_requests.load();
  j["sessions_cut_off"] = ctx_.cut_off.load();
  for (std::size_t i = 0; i < chain_->size(); ++i) {
    const auto& t = chain_->tier(i);
    nlohmann::json tj;
    tj["tier"] = t.describe();
    tj["used_bytes"] = t.used();
    // capacity_bytes: the configured bound, or what the medium allows now
    // (capacity_bounded false: an unbounded file tier's disk); absent where
    // nobody can say (Redis).
    if (const auto cap = t.capacity_now(); cap != store::kUnbounded) tj["capacity_bytes"] = cap;
    tj["capacity_bounded"] = t.capacity() != store::kUnbounded;
    j["tiers"].push_back(tj);
  }
  return j.dump();
}

void AgentService::Impl::start() {
  const AgentServiceOptions& o = o_;
  pin_process(o.cpus);

  std::vector<std::unique_ptr<store::Tier>> tiers;
  for (const auto& spec : o.tiers) tiers.push_back(store::make_tier(spec));
  chain_ = std::make_unique<store::TierChain>(std::move(tiers));
  store::TierChain& chain = *chain_;

  agent::MoverOptions mo;
  mo.staging_bytes = o.staging_mib << 20;
  mo.chunk_bytes = o.chunk_kib << 10;  // 0: the mover picks
  mo.chunk_blocks = o.chunk_blocks;
  mo.queue_depth = o.queue_depth;
  mo.copy.gpu = decide_gpu(o.gpu, &mo.copy.device);
  mo.copy.method = copy_method(o.copy);
  mo.copy.kernel_below = o.kernel_below;
  mo.copy.kernel_below_pull = o.kernel_below_pull;
  mo.copy.engines_from = o.engines_from;
  mo.lane_spin_us = static_cast<unsigned>(o.lane_spin_us >= 0 ? o.lane_spin_us : o.cpus.empty() ? 0 : 200);
  mo.memory_timeout = std::chrono::milliseconds(static_cast<long long>(o.memory_timeout_s * 1000));
  mover_ = std::make_unique<agent::DataMover>(mo, chain);

  agent::AgentContext& ctx = ctx_;
  ctx.mover = mover_.get();
  ctx.shared_namespace = o.shared_namespace;
  ctx.limits.max_bytes = o.max_session_mib << 20;
  ctx.limits.max_regions = o.max_regions;
  ctx.limits.stall = std::chrono::milliseconds(static_cast<long long>(o.stall_timeout_s * 1000));
  // Every uid gets one key limit, whatever the length of its own prefix.
  const std::size_t prefix_room = o.shared_namespace ? 0 : std::string("u4294967295/").size();
  ctx.limits.max_key = proto::kMaxKey;
  for (std::size_t i = 0; i < chain.size(); ++i)
    if (const std::size_t tier_max = chain.tier(i).max_key_length(); tier_max - prefix_room < ctx.limits.max_key) {
      ctx.limits.max_key = tier_max - prefix_room;
      ctx.limits.max_key_why = " (tier " + chain.tier(i).describe() + " stores keys of " + std::to_string(tier_max) +
                               " bytes" + (prefix_room > 0 ? ", and " + std::to_string(prefix_room) +
                                                                 " of them are kept for the per-user namespace)"
                                                           : ")");
    }
  ctx.limits.memory_wait = std::chrono::milliseconds(static_cast<long long>(o.memory_timeout_s * 1000));
  ctx.chain = &chain;
  ctx.gpu_here = mo.copy.gpu;
  ctx.backends = declared_backends(mo.copy.gpu, chain);
  for (std::size_t i = 0; i < chain.size(); ++i) ctx.tiers.push_back(chain.tier(i).describe());
  ctx.metrics.set_tiers(chain.size());
  // The loop thread calls it only while it runs, when mover_ is alive.
  ctx.stats_json = [this] { return build_stats(); };

  const proto::Endpoint ep = proto::Endpoint::parse(o.endpoint);
  std::uint16_t port = ep.port;
  const int listen_fd = proto::listen_on(ep, &port);
  proto::Endpoint bound = ep;
  bound.port = port;
  endpoint_ = bound.to_string();
  std::string chain_text;
  for (const auto& t : ctx.tiers) chain_text += (chain_text.empty() ? "" : " -> ") + t;
  log::app().info("agent listening on {}; tiers: {}", endpoint_, chain_text);
  log::app().info("data path: {}{}", mover_->describe(), mo.copy.gpu ? ", GPU " + std::to_string(mo.copy.device) : "");

  agent::LoopOptions lo;
  lo.peers = o.peers;
  lo.max_sessions = o.max_sessions;
  loop_ = std::make_unique<agent::SessionLoop>(ctx, listen_fd, ep.tcp, lo);
  log::app().info("applications admitted: {}; key namespaces: {}; at most {} sessions of {} MiB each",
                  o.peers.describe(), o.shared_namespace ? "one, shared" : "one per uid", o.max_sessions,
                  o.max_session_mib);
  if (o.metrics_port) {
    metrics_ = std::make_unique<MetricsEndpoint>(o.metrics_address, *o.metrics_port,
                                                 [this] { return metrics_text(); });
    metrics_port_ = metrics_->port();
    log::app().info("metrics on http://{}:{}/metrics", o.metrics_address, metrics_port_);
  }
  if (!o.ready_file.empty()) {
    std::ofstream(o.ready_file + ".tmp") << endpoint_ << "\n";
    std::rename((o.ready_file + ".tmp").c_str(), o.ready_file.c_str());
  }
  service_.start([this] { return run(); });
}

int AgentService::Impl::run() {
  loop_->run(service_.stop_fd());
  log::app().debug("asked to stop: shutting down");
  // The copy threads finish (or cancel) what is queued before the loop, whose
  // wake-ups they may still call, goes away.
  const agent::MoverStats st = mover_->stats();
  const std::string phases = mover_->phases().describe();
  if (const std::size_t stuck = mover_->stuck_lanes(); stuck > 0) {
    // Such a lane sleeps in the kernel on an application's page and cannot be
    // joined. The mover and the storage it uses stay, unreleased, so that
    // the lane finds them when the page answers; the process exits meanwhile.
    log::app().error("{} copy lane(s) still wait on an application's memory that never answered; shutting down "
                     "without them", stuck);
    std::lock_guard lk(mu_);
    (void)mover_.release();
    (void)chain_.release();
  }
  {
    std::lock_guard lk(mu_);
    mover_.reset();
  }
  loop_.reset();
  log::app().info("agent done: {} objects written ({} bytes), {} read ({} bytes), {} failed descriptors",
                  st.objects_written, st.bytes_written, st.objects_read, st.bytes_read, st.failures);
  log::app().info("agent time per phase (summed over threads): {}", phases);
  return 0;
}

AgentService::AgentService(AgentServiceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
AgentService::~AgentService() = default;
void AgentService::start() { impl_->start(); }
std::string AgentService::endpoint() const { return impl_->endpoint_; }
std::uint16_t AgentService::metrics_port() const noexcept {
  return impl_->metrics_port_;
}
void AgentService::stop() noexcept { impl_->service_.request_stop(); }
int AgentService::wait() { return impl_->service_.wait(); }
std::optional<int> AgentService::wait_for(std::chrono::milliseconds timeout) {
  return impl_->service_.wait_for(timeout);
}
std::string AgentService::stats_json() const { return impl_->stats_json(); }
std::string AgentService::first_error() const { return impl_->service_.first_error(); }

}  // namespace ferry::xfer
