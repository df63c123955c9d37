#include "http/metrics.h"

#include <utility>

#include "core/prometheus.h"
#include "offload/server_metrics.h"

namespace ferry::http {
namespace {

std::size_t this_threads_shard() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t shard = next.fetch_add(1, std::memory_order_relaxed);
  return shard;
}

}  // namespace

std::size_t Metrics::index_of(std::uint16_t status) noexcept {
  for (std::size_t i = 0; i + 1 < kStatuses.size(); ++i)
    if (kStatuses[i] == status) return i;
  return kStatuses.size() - 1;
}

void Metrics::count(std::uint16_t status, std::uint64_t bytes) noexcept {
  Shard& s = shards_[this_threads_shard() % kShards];
  s.by_status[index_of(status)].fetch_add(1, std::memory_order_relaxed);
  s.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

std::uint64_t Metrics::responses(std::uint16_t status) const noexcept {
  std::uint64_t n = 0;
  for (const auto& s : shards_) n += s.by_status[index_of(status)].load(std::memory_order_relaxed);
  return n;
}

std::string Metrics::render() const {
  prom::TextWriter w;
  w.family("ferry_http_responses_total", "counter", "HTTP responses sent, by status code.");
  for (std::size_t i = 0; i < kStatuses.size(); ++i) {
    std::uint64_t n = 0;
    for (const auto& s : shards_) n += s.by_status[i].load(std::memory_order_relaxed);
    const std::string code = kStatuses[i] != 0 ? std::to_string(kStatuses[i]) : "other";
    w.sample("ferry_http_responses_total", {{"code", code}}, n);
  }
  std::uint64_t bytes = 0;
  for (const auto& s : shards_) bytes += s.bytes.load(std::memory_order_relaxed);
  w.counter("ferry_http_response_bytes_total", "Bytes of HTTP responses sent, heads included.", bytes);
  const offload::ServerStats st = server_stats_ ? server_stats_() : offload::ServerStats{};
  w.family("ferry_http_open_connections", "gauge", "Client connections open now.");
  w.sample("ferry_http_open_connections", {}, std::uint64_t{st.clients});
  w.family(
      "ferry_http_stage_seconds", "histogram",
      "Time of each stage of a request: read (first byte to last), queue (waiting in the channel), handle "
      "(on the worker), write (response ready to sent).");
  offload::write_stage_latencies(w, "ferry_http_stage_seconds", st);
  std::string out = w.take();
  if (extra_) out += extra_();
  return out;
}

}  // namespace ferry::http
