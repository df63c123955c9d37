#include "pipeline.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <time.h>

#include "ferry/core/detail/backoff.h"

namespace ferry::packet {
namespace {

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000u + ts.tv_nsec;
}

// TX hands its latency samples over after this many bursts, or whenever it idles.
constexpr std::uint32_t kPublishEvery = 64;

}  // namespace

PipelineStats PipelineCounters::snapshot() const {
  PipelineStats s;
  s.rx_packets = rx_packets.load(std::memory_order_relaxed);
  s.rx_bytes = rx_bytes.load(std::memory_order_relaxed);
  s.tx_packets = tx_packets.load(std::memory_order_relaxed);
  s.tx_bytes = tx_bytes.load(std::memory_order_relaxed);
  s.dropped_full = dropped_full.load(std::memory_order_relaxed);
  s.dropped_tx = dropped_tx.load(std::memory_order_relaxed);
  s.dropped_segmented = dropped_segmented.load(std::memory_order_relaxed);
  s.bursts = bursts.load(std::memory_order_relaxed);
  return s;
}

std::uint32_t AdmissionLimit::reserve(std::uint32_t want) {
  const std::uint64_t l = limit.load(std::memory_order_acquire);
  if (l == 0) {
    admitted.fetch_add(want, std::memory_order_relaxed);
    return want;
  }
  std::uint64_t cur = admitted.load(std::memory_order_relaxed);
  for (;;) {
    if (cur >= l) return 0;
    const std::uint64_t grant = std::min<std::uint64_t>(want, l - cur);
    if (admitted.compare_exchange_weak(cur, cur + grant, std::memory_order_relaxed))
      return static_cast<std::uint32_t>(grant);
  }
}

Pipeline::Pipeline(std::uint32_t index, const L2fwdOptions& options, CommList list, const PacketPool& pool,
                   AdmissionLimit& limit)
    : index_(index),
      options_(options),
      list_(list),
      pool_(pool),
      limit_(limit),
      mbufs_(std::size_t(list.capacity()) * list.max_packets(), nullptr) {}

// Up to `want` packets from the queue into mbufs: the burst goes on once it is
// full, or burst_timeout_us after its first packet, or at stop. Under a packet
// limit, an empty queue also gives up after burst_timeout_us, so that its
// reservation goes back to the pipelines that have traffic.
std::uint32_t Pipeline::gather(rte_mbuf** mbufs, std::uint32_t want) {
  std::uint32_t n = 0;
  std::uint64_t first_ns = 0;
  const std::uint64_t timeout_ns = std::uint64_t(options_.burst_timeout_us) * 1000;
  const bool limited = limit_.limit.load(std::memory_order_relaxed) != 0;
  const std::uint64_t started_ns = limited ? now_ns() : 0;
  Backoff backoff(1000, 0, 0);
  while (n < want && !stop_rx_.load(std::memory_order_relaxed)) {
    const std::uint16_t got = rte_eth_rx_burst(options_.port, static_cast<std::uint16_t>(index_), mbufs + n,
                                               static_cast<std::uint16_t>(want - n));
    n += got;
    if (got != 0) {
      if (first_ns == 0) first_ns = now_ns();
      continue;
    }
    if (n != 0 && now_ns() - first_ns >= timeout_ns) break;
    if (n == 0 && limited && now_ns() - started_ns >= timeout_ns) break;
    if (n == 0 && backoff.idle()) continue;
    cpu_pause();
  }
  return n;
}

int Pipeline::rx_loop() {
  const std::uint32_t burst = list_.max_packets();
  std::vector<rte_mbuf*> scratch(burst);
  const bool pass_through = !options_.worker.launch;
  std::uint32_t k = 0;
  while (!stop_rx_.load(std::memory_order_relaxed)) {
    if (limit_.exhausted()) {
      // final_phase, then the limit again: a new phase's limit is stored before the flag.
      if (limit_.final_phase.load(std::memory_order_acquire) && limit_.exhausted()) break;
      rx_paused_.store(true, std::memory_order_release);  // the warm-up is in: wait for the measured phase
      cpu_pause();
      continue;
    }
    rx_paused_.store(false, std::memory_order_relaxed);
    CommItem& item = list_.item(k);
    if (comm_status(item) != kCommFree) {  // C1: pairs with TX's FREE
      if (options_.when_full == FullPolicy::Drop) {
        const std::uint32_t want = limit_.reserve(burst);
        const std::uint16_t got = rte_eth_rx_burst(options_.port, static_cast<std::uint16_t>(index_),
                                                   scratch.data(), static_cast<std::uint16_t>(want));
        limit_.give_back(want - got);
        if (got != 0) {
          rte_pktmbuf_free_bulk(scratch.data(), got);
          counters_.dropped_full.fetch_add(got, std::memory_order_relaxed);
        }
      }
      cpu_pause();
      continue;
    }
    const std::uint32_t want = limit_.reserve(burst);
    if (want == 0) continue;
    rte_mbuf** mbufs = &mbufs_[std::size_t(k & (list_.capacity() - 1)) * burst];
    std::uint32_t got = gather(mbufs, want);
    limit_.give_back(want - got);
    // A worker handles each packet as one buffer in place: a chained mbuf has no such buffer.
    std::uint32_t kept = 0;
    std::uint64_t bytes = 0;
    CommPacket* packets = list_.packets(k);
    for (std::uint32_t i = 0; i < got; ++i) {
      rte_mbuf* m = mbufs[i];
      if (m->nb_segs != 1) {
        rte_pktmbuf_free(m);
        counters_.dropped_segmented.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      mbufs[kept] = m;
      packets[kept] = {pool_.worker_address(rte_pktmbuf_mtod(m, void*)), m->data_len,
                       static_cast<std::uint32_t>(m->buf_len - m->data_off)};
      bytes += m->data_len;
      ++kept;
    }
    if (kept == 0) continue;
    item.num_packets = kept;
    item.ready_ns = now_ns();
    std::atomic_ref<std::uint32_t>(item.sequence).store(k, std::memory_order_relaxed);  // read by the burst dispatcher
    counters_.rx_packets.fetch_add(kept, std::memory_order_relaxed);
    counters_.rx_bytes.fetch_add(bytes, std::memory_order_relaxed);
    set_comm_status(item, pass_through ? kCommDone : kCommReady);  // C2
    rx_next_.store(++k, std::memory_order_release);
  }
  rx_ended_.store(true, std::memory_order_release);
  return 0;
}

int Pipeline::tx_loop() {
  const std::uint32_t burst = list_.max_packets();
  const auto queue = static_cast<std::uint16_t>(index_);
  LatencyHistogram pending;
  std::uint32_t since_publish = 0;
  std::uint32_t k = 0;
  Backoff backoff(1000, 0, 0);
  for (;;) {
    CommItem& item = list_.item(k);
    const std::uint32_t s = comm_status(item);  // C1: pairs with the worker's DONE
    if (s == kCommError) break;
    if (s != kCommDone) {
      if (rx_ended() && k == rx_next_.load(std::memory_order_acquire)) break;  // drained
      if (abort_tx_.load(std::memory_order_relaxed)) break;                    // the drain timed out
      if (pending.count() != 0) publish_latency(pending);
      since_publish = 0;
      if (backoff.idle()) cpu_pause();
      continue;
    }
    backoff.reset();
    const std::uint32_t n = item.num_packets;
    rte_mbuf** mbufs = &mbufs_[std::size_t(k & (list_.capacity() - 1)) * burst];
    const CommPacket* packets = list_.packets(k);
    std::uint64_t bytes = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      mbufs[i]->data_len = static_cast<std::uint16_t>(packets[i].size);
      mbufs[i]->pkt_len = packets[i].size;
      bytes += packets[i].size;
    }
    pending.record(now_ns() - item.ready_ns);
    std::uint32_t sent = 0;
    while (sent < n) {
      const std::uint16_t got = rte_eth_tx_burst(options_.port, queue, mbufs + sent, static_cast<std::uint16_t>(n - sent));
      sent += got;
      // A port that takes nothing after the drain timed out will not drain: the rest are dropped.
      if (got == 0 && abort_tx_.load(std::memory_order_relaxed)) break;
    }
    if (sent < n) {
      rte_pktmbuf_free_bulk(mbufs + sent, n - sent);
      counters_.dropped_tx.fetch_add(n - sent, std::memory_order_relaxed);
      for (std::uint32_t i = sent; i < n; ++i) bytes -= packets[i].size;
    }
    counters_.tx_packets.fetch_add(sent, std::memory_order_relaxed);
    counters_.tx_bytes.fetch_add(bytes, std::memory_order_relaxed);
    counters_.bursts.fetch_add(1, std::memory_order_relaxed);
    // During the warm-up every sample is handed over before the burst counts as
    // sent, so that none is still pending when the measured window opens.
    if (!limit_.final_phase.load(std::memory_order_relaxed)) publish_latency(pending);
    // C2: RX may refill it. A compare-exchange, so that teardown's ERROR, once
    // written, is never turned back into FREE under a worker waiting on the item.
    std::uint32_t done = kCommDone;
    std::atomic_ref<std::uint32_t>(item.status).compare_exchange_strong(done, kCommFree, std::memory_order_release,
                                                                        std::memory_order_relaxed);
    tx_next_.store(++k, std::memory_order_release);
    if (++since_publish == kPublishEvery) {
      publish_latency(pending);
      since_publish = 0;
    }
  }
  publish_latency(pending);
  return 0;
}

void Pipeline::publish_latency(LatencyHistogram& pending) {
  std::lock_guard lock(latency_mutex_);
  latency_interval_.merge(pending);
  pending.reset();
}

void Pipeline::take_latency(LatencyHistogram& interval) {
  std::lock_guard lock(latency_mutex_);
  interval = latency_interval_;
  latency_interval_.reset();
}

void Pipeline::mark_error() { detail::mark_error({list_}); }

void Pipeline::free_unsent() {
  const std::uint32_t burst = list_.max_packets();
  const std::uint32_t end = rx_next_.load(std::memory_order_acquire);
  for (std::uint32_t k = tx_next_.load(std::memory_order_acquire); k != end; ++k) {
    const std::uint32_t n = list_.item(k).num_packets;
    rte_pktmbuf_free_bulk(&mbufs_[std::size_t(k & (list_.capacity() - 1)) * burst], n);
    counters_.dropped_tx.fetch_add(n, std::memory_order_relaxed);
  }
}

}  // namespace ferry::packet
