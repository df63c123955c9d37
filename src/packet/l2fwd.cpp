#include "ferry/packet/l2fwd.h"

#include <poll.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <mutex>

#include "core/log.h"
#include "core/service_thread.h"
#include "packet_pool.h"
#include "pipeline.h"
#include "ports.h"

namespace ferry::packet {
namespace {

constexpr std::uint32_t kMaxPipelines = 64;
constexpr std::uint32_t kMaxItems = 65536;        // per list
constexpr std::uint64_t kMaxMbufs = 1u << 24;     // in all: 16 M buffers are 36 GiB at the default data room
// Beyond what a pipeline's list and rings hold, by default: room for the
// lcores' mempool caches (see pool_cache()).
constexpr std::uint32_t kSpareMbufs = 768;

// The mempool cache per lcore. An lcore's cache keeps up to 1.5 times its size
// out of the others' reach, and each of a pipeline's 2 lcores may have one
// (RX allocates, TX frees; the control thread has none): with a third of the
// spare mbufs each, the caches never take what the lists and rings need.
unsigned pool_cache(std::uint32_t spare_per_pipeline) { return std::min(256u, spare_per_pipeline / 3); }

void validate(const L2fwdOptions& o, const PacketWorker* worker) {
  if (o.pipelines == 0 || o.pipelines > kMaxPipelines)
    throw Error("L2fwdOptions::pipelines must be in 1.." + std::to_string(kMaxPipelines));
  if (o.worker.max_packets == 0 || o.worker.max_packets > 4096)
    throw Error("PacketWorkerOptions::max_packets must be in 1..4096");
  if (o.items < 2 || !std::has_single_bit(o.items))
    throw Error("L2fwdOptions::items must be a power of two, at least 2");
  if (o.data_room < 64) throw Error("L2fwdOptions::data_room must hold a minimum frame (64 bytes or more)");
  if (worker == nullptr && o.worker.launch)
    throw Error(std::string("PacketWorkerOptions::launch ") + to_string(o.worker.launch) + " needs a worker");
  if (o.memory == MemoryKind::Device && !o.worker.launch)
    throw Error(
        "MemoryKind::Device puts packets in GPU memory; with no launch method there is no GPU to own it");
  const unsigned lcores = rte_lcore_count() - 1;
  if (lcores < 2 * o.pipelines)
    throw Error(std::to_string(o.pipelines) + " pipeline(s) need " + std::to_string(2 * o.pipelines) +
                " worker lcores (an RX and a TX core each), and the EAL has " + std::to_string(lcores) +
                ": give it " + std::to_string(2 * o.pipelines + 1) + " cores with -l or --lcores");
}

// A NIC that DMAs into GPU memory (GPUDirect RDMA) can take --mem device; a PMD
// that copies packets with the CPU would fault on it.
void check_device_memory(const PortInfo& port) {
  if (port.driver.rfind("mlx5", 0) != 0)  // mlx5_pci
    throw Error(
        "MemoryKind::Device needs a NIC that writes packets into GPU memory itself (mlx5 with GPUDirect "
        "RDMA); "
        "port " +
        std::to_string(port.port) + " is " + port.driver +
        ", whose packets the CPU copies: use MemoryKind::Host");
}

PipelineStats minus(const PipelineStats& a, const PipelineStats& b) {
  PipelineStats d;
  d.rx_packets = a.rx_packets - b.rx_packets;
  d.rx_bytes = a.rx_bytes - b.rx_bytes;
  d.tx_packets = a.tx_packets - b.tx_packets;
  d.tx_bytes = a.tx_bytes - b.tx_bytes;
  d.dropped_full = a.dropped_full - b.dropped_full;
  d.dropped_tx = a.dropped_tx - b.dropped_tx;
  d.dropped_segmented = a.dropped_segmented - b.dropped_segmented;
  d.bursts = a.bursts - b.bursts;
  return d;
}

void add(PipelineStats& total, const PipelineStats& s) {
  total.rx_packets += s.rx_packets;
  total.rx_bytes += s.rx_bytes;
  total.tx_packets += s.tx_packets;
  total.tx_bytes += s.tx_bytes;
  total.dropped_full += s.dropped_full;
  total.dropped_tx += s.dropped_tx;
  total.dropped_segmented += s.dropped_segmented;
  total.bursts += s.bursts;
}

int run_rx(void* p) { return static_cast<Pipeline*>(p)->rx_loop(); }
int run_tx(void* p) { return static_cast<Pipeline*>(p)->tx_loop(); }

}  // namespace

struct L2fwd::Impl {
  // A point the report's windows start from.
  struct Mark {
    std::chrono::steady_clock::time_point time;
    std::vector<PipelineStats> pipelines;
    PortStats port;
  };

  L2fwdOptions options;
  std::vector<WorkerMemory> list_memory;
  std::vector<CommList> lists;
  std::unique_ptr<PacketPool> pool;
  AdmissionLimit limit;
  std::vector<std::unique_ptr<Pipeline>> pipelines;
  mutable std::mutex port_mutex;  // guards the port's state against reports reading its counters
  bool port_configured = false;
  bool port_started = false;
  mutable PortStats last_port_stats;
  std::atomic<std::uint64_t> pool_dry{0};  // written by the control thread, read by reports
  bool pool_was_dry = false;               // the control thread's
  log::Throttle pool_dry_throttle;
  // Declared after the memory it works in, so that it goes first.
  std::unique_ptr<PacketWorker> worker;
  ServiceThread service;

  mutable std::mutex report_mutex;  // guards the marks and the final report
  std::optional<Mark> measured_from;  // set when the warm-up ends
  std::optional<Mark> interval_from;
  std::optional<L2fwdReport> final_report;
  std::mutex latency_mutex;                     // guards latency_total
  std::vector<LatencyHistogram> latency_total;  // per pipeline, since measured_from

  Impl(const L2fwdOptions& o, std::unique_ptr<PacketWorker> w) : options(o) { worker = std::move(w); }

  // The port's counters while it is open; the last ones read once it is closed.
  PortStats port_stats() const {
    std::lock_guard lock(port_mutex);
    rte_eth_stats s{};
    if (port_configured && rte_eth_stats_get(options.port, &s) == 0)
      last_port_stats = {s.imissed, s.ierrors, s.oerrors, s.rx_nombuf};
    PortStats r = last_port_stats;
    r.pool_dry = pool_dry.load(std::memory_order_relaxed);
    return r;
  }

  // A driver may hold mbufs beyond its descriptors (net_pcap's infinite_rx
  // keeps its whole file in them), so the pool can still run dry after the
  // check at start; RX then receives nothing, and a driver that does not count
  // rx_nombuf says nothing. Counts each time fewer than a burst are free, and
  // says so at most once a second.
  void watch_pool() {
    const std::uint32_t free = pool->available();
    const bool dry = free < options.worker.max_packets;
    if (dry && !pool_was_dry) {
      pool_dry.fetch_add(1, std::memory_order_relaxed);
      if (const long long held = pool_dry_throttle.pass(); held >= 0)
        log::app().warn(
            "l2fwd: the packet pool ran dry: {} of its {} mbufs free, fewer than a burst ({}), so RX "
            "receives nothing until some come back; the port's driver may hold more mbufs than its "
            "descriptors: give L2fwdOptions::mbufs more than {}{}",
            free, pool->mbufs(), options.worker.max_packets, options.mbufs, log::suppressed_note(held));
    }
    pool_was_dry = dry;
  }

  // Stops and closes the port (its queues give their mbufs back), unless a
  // report is reading its counters at that moment.
  void close_port() {
    (void)port_stats();  // its final counters
    std::lock_guard lock(port_mutex);
    if (port_started) rte_eth_dev_stop(options.port);
    if (port_configured) rte_eth_dev_close(options.port);
    port_started = port_configured = false;
  }

  Mark mark() const {
    Mark m{std::chrono::steady_clock::now(), {}, port_stats()};
    for (const auto& p : pipelines) m.pipelines.push_back(p->counters().snapshot());
    return m;
  }

  L2fwdReport since(const Mark& from, const Mark& to) const {
    L2fwdReport r;
    r.seconds = std::chrono::duration<double>(to.time - from.time).count();
    for (std::size_t i = 0; i < pipelines.size(); ++i) {
      r.pipelines.push_back(minus(to.pipelines[i], from.pipelines[i]));
      add(r.total, r.pipelines.back());
    }
    r.port = {to.port.imissed - from.port.imissed, to.port.ierrors - from.port.ierrors,
              to.port.oerrors - from.port.oerrors, to.port.rx_nombuf - from.port.rx_nombuf,
              to.port.pool_dry - from.port.pool_dry};
    return r;
  }

  void fill_latency(L2fwdReport& r, const std::vector<LatencyHistogram>& per_pipeline) const {
    LatencyHistogram all;
    for (std::size_t i = 0; i < per_pipeline.size(); ++i) {
      r.pipelines[i].latency_p50_ns = per_pipeline[i].percentile_ns(50);
      r.pipelines[i].latency_p99_ns = per_pipeline[i].percentile_ns(99);
      all.merge(per_pipeline[i]);
    }
    r.total.latency_p50_ns = all.percentile_ns(50);
    r.total.latency_p99_ns = all.percentile_ns(99);
  }

  // Folds each pipeline's latency since the last call into the totals; the interval's.
  std::vector<LatencyHistogram> collect_latency() {
    std::lock_guard lock(latency_mutex);
    std::vector<LatencyHistogram> interval(pipelines.size());
    for (std::size_t i = 0; i < pipelines.size(); ++i) {
      pipelines[i]->take_latency(interval[i]);
      latency_total[i].merge(interval[i]);
    }
    return interval;
  }

  void set_up() {
    const PortInfo info = port_info(options.port);
    validate(options, worker.get());
    if (options.memory == MemoryKind::Device) check_device_memory(info);
    const QueuePlan plan = plan_queues(info, options.pipelines);
    log::app().info("l2fwd: port {} ({}), {} pipeline(s): {}", options.port, info.driver, options.pipelines,
                    plan.spreading);
    if (options.items > kMaxItems)
      throw Error("L2fwdOptions::items must be at most " + std::to_string(kMaxItems));
    std::uint16_t rxd = options.rx_descriptors, txd = options.tx_descriptors;
    rte_eth_dev_adjust_nb_rx_tx_desc(options.port, &rxd, &txd);
    // Where a pipeline's mbufs can all be at once: its list's items, the burst
    // RX receives into to drop while the list is full, and the port's RX and
    // TX rings. With fewer, RX can wait for an mbuf that never comes back.
    const std::uint64_t need = std::uint64_t(options.items + 1) * options.worker.max_packets + rxd + txd;
    if (options.mbufs == 0) {
      options.mbufs = static_cast<std::uint32_t>(std::min<std::uint64_t>(need + kSpareMbufs, UINT32_MAX));
    } else if (options.mbufs < need) {
      throw Error("L2fwdOptions::mbufs " + std::to_string(options.mbufs) +
                  " is too few: each pipeline needs " + std::to_string(need) + " (its list's " +
                  std::to_string(options.items) + " items of " + std::to_string(options.worker.max_packets) +
                  " packets, a burst to drop into while the list is full, " + std::to_string(rxd) +
                  " RX and " + std::to_string(txd) + " TX descriptors): give L2fwdOptions::mbufs " +
                  std::to_string(need) + " or more, or 0 for that and " + std::to_string(kSpareMbufs) +
                  " to spare");
    }
    const std::uint64_t mbufs = std::uint64_t(options.mbufs) * options.pipelines;
    if (mbufs > kMaxMbufs)
      throw Error(std::to_string(mbufs) +
                  " mbufs (L2fwdOptions::mbufs, or L2fwdOptions::items x PacketWorkerOptions::max_packets, "
                  "for each of "
                  "L2fwdOptions::pipelines) are more than " +
                  std::to_string(kMaxMbufs) + ": give fewer items, a smaller burst or fewer pipelines");
    pool = std::make_unique<PacketPool>(worker.get(), options.memory, options.port, static_cast<std::uint32_t>(mbufs),
                                        options.data_room, pool_cache(static_cast<std::uint32_t>(options.mbufs - need)));

    rte_eth_conf conf{};
    const auto queues = static_cast<std::uint16_t>(options.pipelines);
    if (plan.rss_hashes != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = plan.rss_hashes;
    }
    if (rte_eth_dev_configure(options.port, queues, queues, &conf) != 0)
      throw Error("configuring port " + std::to_string(options.port) + " failed");
    {
      std::lock_guard lock(port_mutex);
      port_configured = true;
    }
    const int socket = rte_eth_dev_socket_id(options.port);
    for (std::uint16_t q = 0; q < queues; ++q) {
      if (rte_eth_rx_queue_setup(options.port, q, rxd, socket < 0 ? 0 : socket, nullptr, pool->pool()) != 0)
        throw Error("setting up RX queue " + std::to_string(q) + " failed");
      if (rte_eth_tx_queue_setup(options.port, q, txd, socket < 0 ? 0 : socket, nullptr) != 0)
        throw Error("setting up TX queue " + std::to_string(q) + " failed");
    }

    if (options.warmup_packets != 0) {
      limit.limit = options.warmup_packets;
      limit.final_phase = false;
    } else {
      limit.limit = options.packets;
    }
    const std::size_t list_bytes = CommList::memsize(options.items, options.worker.max_packets);
    unsigned lcore = rte_get_next_lcore(-1, 1, 0);
    for (std::uint32_t p = 0; p < options.pipelines; ++p) {
      list_memory.push_back(worker != nullptr ? worker->allocate(list_bytes, MemoryKind::Host)
                                              : detail::allocate_cpu_memory(list_bytes, MemoryKind::Host));
      lists.push_back(CommList::init(list_memory.back().host, options.items, options.worker.max_packets));
      auto pl = std::make_unique<Pipeline>(p, options, lists.back(), *pool, limit);
      pl->rx_lcore = static_cast<std::uint16_t>(lcore);
      lcore = rte_get_next_lcore(lcore, 1, 0);
      pl->tx_lcore = static_cast<std::uint16_t>(lcore);
      lcore = rte_get_next_lcore(lcore, 1, 0);
      pipelines.push_back(std::move(pl));
    }
    latency_total.assign(options.pipelines, {});

    if (rte_eth_dev_start(options.port) != 0) throw Error("starting port " + std::to_string(options.port) + " failed");
    {
      std::lock_guard lock(port_mutex);
      port_started = true;
    }
    rte_eth_promiscuous_enable(options.port);  // not every PMD has it; forwarding works without
    if (worker != nullptr) worker->start(lists);
    if (options.warmup_packets == 0) start_measuring();
    for (auto& pl : pipelines) {
      if (rte_eal_remote_launch(run_tx, pl.get(), pl->tx_lcore) != 0 ||
          rte_eal_remote_launch(run_rx, pl.get(), pl->rx_lcore) != 0)
        throw Error("an EAL lcore is busy");
    }
  }

  void start_measuring() {
    collect_latency();
    {
      std::lock_guard lock(latency_mutex);
      for (auto& h : latency_total) h.reset();
    }
    std::lock_guard lock(report_mutex);
    measured_from = mark();
    interval_from = measured_from;
  }

  bool warmed_up() const {
    for (const auto& p : pipelines)
      if (!p->warmed_up()) return false;
    return true;
  }

  bool all_rx_ended() const {
    for (const auto& p : pipelines)
      if (!p->rx_ended()) return false;
    return true;
  }

  // set_up() failed part-way: undo what it started.
  void abandon_set_up() {
    for (auto& p : pipelines) {
      p->stop_rx();
      p->abort_tx();
      p->mark_error();
    }
    for (auto& p : pipelines) {
      rte_eal_wait_lcore(p->rx_lcore);
      rte_eal_wait_lcore(p->tx_lcore);
    }
    if (worker != nullptr) worker->stop(std::chrono::milliseconds(5000));
    close_port();  // before the pool goes: the queues hold its mbufs
  }

  int loop() {
    try {
      set_up();
    } catch (...) {
      abandon_set_up();
      throw;
    }
    log::app().info("l2fwd: {} pipeline(s) on port {}, bursts of {}, {}", options.pipelines, options.port,
                    options.worker.max_packets, worker != nullptr ? worker->describe() : "no worker (mode none)");
    while (!service.stop_requested() && !all_rx_ended()) {
      pollfd p{service.stop_fd(), POLLIN, 0};
      poll(&p, 1, 1);
      watch_pool();
      // Every warm-up packet admitted and sent; checked twice, so that no
      // pipeline resumed between the first check of it and of the others.
      if (!limit.final_phase.load(std::memory_order_relaxed) && limit.reached() && warmed_up() && warmed_up()) {
        start_measuring();
        limit.limit.store(options.packets == 0 ? 0 : options.warmup_packets + options.packets,
                          std::memory_order_release);
        limit.final_phase.store(true, std::memory_order_release);
      }
      if (worker != nullptr)
        if (std::string why = worker->failure(); !why.empty()) {
          service.fail(why);
          break;
        }
    }
    tear_down();
    return 0;
  }

  bool measuring_now() const {
    std::lock_guard lock(report_mutex);
    return measured_from.has_value();
  }

  void tear_down() {
    for (auto& p : pipelines) p->stop_rx();
    for (auto& p : pipelines) rte_eal_wait_lcore(p->rx_lcore);
    // TX sends what is in flight, as long as the worker finishes it in time.
    const auto deadline = std::chrono::steady_clock::now() + options.drain_timeout;
    for (auto& p : pipelines) {
      while (rte_eal_get_lcore_state(p->tx_lcore) == RUNNING && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    bool drained = true;
    for (auto& p : pipelines) drained = drained && rte_eal_get_lcore_state(p->tx_lcore) != RUNNING;
    if (!drained) {
      log::app().warn("l2fwd: bursts still in flight {} ms after stopping: dropping them",
                      options.drain_timeout.count());
      for (auto& p : pipelines) p->abort_tx();
    }
    for (auto& p : pipelines) rte_eal_wait_lcore(p->tx_lcore);
    // RX and TX are done: ERROR now has no writer but the worker, whom it ends.
    for (auto& p : pipelines) p->mark_error();
    bool worker_done = true;
    if (worker != nullptr) {
      worker->stop(std::chrono::milliseconds(5000));
      if (std::string why = worker->failure(); !why.empty()) service.fail(why);
      worker_done = !worker->stuck();
    }
    if (worker_done)
      for (auto& p : pipelines) p->free_unsent();
    {
      Mark end = mark();
      std::lock_guard lock(report_mutex);
      if (!measured_from) measured_from = end;
    }
    collect_latency();
    L2fwdReport r;
    {
      std::lock_guard lock(report_mutex);
      r = since(*measured_from, mark());
    }
    {
      std::lock_guard lock(latency_mutex);
      fill_latency(r, latency_total);
    }
    // The queues give their mbufs back once the port is closed: then the pool must be whole.
    close_port();
    if (worker_done) r.mbufs_in_use = pool->in_use();
    if (r.mbufs_in_use > 0) service.fail(std::to_string(r.mbufs_in_use) + " mbufs were not returned to the pool");
    std::lock_guard lock(report_mutex);
    final_report = r;
  }
};

L2fwd::L2fwd(const L2fwdOptions& options, std::unique_ptr<PacketWorker> worker)
    : impl_(std::make_unique<Impl>(options, std::move(worker))) {}

L2fwd::~L2fwd() {
  stop();
  wait();
  if (impl_->worker != nullptr && impl_->worker->stuck()) {
    // A kernel still runs: tearing down its memory would hang or fault. Exit reclaims it.
    (void)impl_.release();
  }
}

void L2fwd::start() {
  impl_->service.start([this] { return impl_->loop(); });
}

void L2fwd::stop() { impl_->service.request_stop(); }
std::optional<int> L2fwd::wait_for(std::chrono::milliseconds timeout) { return impl_->service.wait_for(timeout); }
int L2fwd::wait() { return impl_->service.wait(); }
std::string L2fwd::first_error() const { return impl_->service.first_error(); }

bool L2fwd::measuring() const { return impl_->measuring_now(); }

bool L2fwd::stuck() const { return impl_->worker != nullptr && impl_->worker->stuck(); }

std::string L2fwd::describe() const {
  return impl_->worker != nullptr ? impl_->worker->describe() : std::string("no worker (mode none)");
}

L2fwdReport L2fwd::report() const {
  std::lock_guard lock(impl_->report_mutex);
  if (impl_->final_report) return *impl_->final_report;
  if (!impl_->measured_from) return {};
  return impl_->since(*impl_->measured_from, impl_->mark());
}

L2fwdReport L2fwd::interval_report() {
  std::vector<LatencyHistogram> latency;
  {
    std::lock_guard lock(impl_->report_mutex);
    if (!impl_->interval_from || impl_->final_report) return {};
  }
  latency = impl_->collect_latency();
  std::lock_guard lock(impl_->report_mutex);
  const Impl::Mark now = impl_->mark();
  L2fwdReport r = impl_->since(*impl_->interval_from, now);
  impl_->interval_from = now;
  impl_->fill_latency(r, latency);
  return r;
}

}  // namespace ferry::packet
