#include "http/metrics.h"

#include <cstdio>
#include <utility>

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
  std::string out;
  out += "# HELP ferry_http_responses_total HTTP responses sent, by status code.\n";
  out += "# TYPE ferry_http_responses_total counter\n";
  for (std::size_t i = 0; i < kStatuses.size(); ++i) {
    std::uint64_t n = 0;
    for (const auto& s : shards_) n += s.by_status[i].load(std::memory_order_relaxed);
    out += "ferry_http_responses_total{code=\"";
    out += kStatuses[i] != 0 ? std::to_string(kStatuses[i]) : "other";
    out += "\"} " + std::to_string(n) + "\n";
  }
  std::uint64_t bytes = 0;
  for (const auto& s : shards_) bytes += s.bytes.load(std::memory_order_relaxed);
  out += "# HELP ferry_http_response_bytes_total Bytes of HTTP responses sent, heads included.\n";
  out += "# TYPE ferry_http_response_bytes_total counter\n";
  out += "ferry_http_response_bytes_total " + std::to_string(bytes) + "\n";
  const offload::ServerStats st = server_stats_ ? server_stats_() : offload::ServerStats{};
  out += "# HELP ferry_http_open_connections Client connections open now.\n";
  out += "# TYPE ferry_http_open_connections gauge\n";
  out += "ferry_http_open_connections " + std::to_string(st.clients) + "\n";
  out += "# HELP ferry_http_stage_seconds Time of each stage of a request: read (first byte to last), queue "
         "(waiting in the channel), handle (on the worker), write (response ready to sent).\n";
  out += "# TYPE ferry_http_stage_seconds histogram\n";
  const std::pair<const char*, const offload::StageLatency*> stages[] = {
      {"read", &st.read}, {"queue", &st.queue}, {"handle", &st.handle}, {"write", &st.write}};
  char num[64];
  for (const auto& [name, h] : stages) {
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < h->counts.size(); ++b) {
      cumulative += h->counts[b];
      const bool last = b + 1 == h->counts.size();
      if (last)
        std::snprintf(num, sizeof(num), "+Inf");
      else
        std::snprintf(num, sizeof(num), "%g", offload::StageLatency::kBoundsUs[b] / 1e6);
      out += std::string("ferry_http_stage_seconds_bucket{stage=\"") + name + "\",le=\"" + num + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    std::snprintf(num, sizeof(num), "%.9g", h->sum_us / 1e6);
    out += std::string("ferry_http_stage_seconds_sum{stage=\"") + name + "\"} " + num + "\n";
    out += std::string("ferry_http_stage_seconds_count{stage=\"") + name + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  if (extra_) out += extra_();
  return out;
}

}  // namespace ferry::http
