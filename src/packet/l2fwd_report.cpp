// ferry l2fwd's statistics as text (l2fwd-nv's per-pipeline lines) and JSON.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ferry/packet/l2fwd.h"

namespace ferry::packet {
namespace {

double per_second(std::uint64_t n, double seconds) { return seconds > 0 ? n / seconds : 0.0; }

std::string line(const std::string& name, const PipelineStats& s, double seconds) {
  return fmt::format(
      "{:<10} rx {:>12} pkts {:>8.3f} Mpps {:>8.3f} Gbps | tx {:>12} pkts {:>8.3f} Mpps {:>8.3f} Gbps | "
      "dropped {:>10} (full {}, tx {}, segmented {}) | burst latency p50 {:.1f} us p99 {:.1f} us\n",
      name, s.rx_packets, per_second(s.rx_packets, seconds) / 1e6, per_second(s.rx_bytes * 8, seconds) / 1e9,
      s.tx_packets, per_second(s.tx_packets, seconds) / 1e6, per_second(s.tx_bytes * 8, seconds) / 1e9, s.dropped(),
      s.dropped_full, s.dropped_tx, s.dropped_segmented, s.latency_p50_ns / 1e3, s.latency_p99_ns / 1e3);
}

nlohmann::json pipeline_json(const PipelineStats& s, double seconds) {
  return {{"rx_packets", s.rx_packets},
          {"rx_bytes", s.rx_bytes},
          {"tx_packets", s.tx_packets},
          {"tx_bytes", s.tx_bytes},
          {"rx_mpps", per_second(s.rx_packets, seconds) / 1e6},
          {"tx_mpps", per_second(s.tx_packets, seconds) / 1e6},
          {"rx_gbps", per_second(s.rx_bytes * 8, seconds) / 1e9},
          {"tx_gbps", per_second(s.tx_bytes * 8, seconds) / 1e9},
          {"dropped", s.dropped()},
          {"dropped_full", s.dropped_full},
          {"dropped_tx", s.dropped_tx},
          {"dropped_segmented", s.dropped_segmented},
          {"bursts", s.bursts},
          {"burst_latency_p50_us", s.latency_p50_ns / 1e3},
          {"burst_latency_p99_us", s.latency_p99_ns / 1e3}};
}

}  // namespace

std::string format_report(const L2fwdReport& r, const std::string& title) {
  std::string out = fmt::format("== {} ({:.3f} s)\n", title, r.seconds);
  for (std::size_t i = 0; i < r.pipelines.size(); ++i)
    out += line("pipeline " + std::to_string(i), r.pipelines[i], r.seconds);
  out += line("total", r.total, r.seconds);
  out += fmt::format("port       imissed {} ierrors {} oerrors {} rx_nombuf {} pool_dry {}", r.port.imissed,
                     r.port.ierrors, r.port.oerrors, r.port.rx_nombuf, r.port.pool_dry);
  if (r.mbufs_in_use >= 0) out += fmt::format(" | mbufs not returned {}", r.mbufs_in_use);
  return out + "\n";
}

std::string report_json(const L2fwdReport& r) {
  nlohmann::json j;
  j["seconds"] = r.seconds;
  j["total"] = pipeline_json(r.total, r.seconds);
  j["pipelines"] = nlohmann::json::array();
  for (const auto& p : r.pipelines) j["pipelines"].push_back(pipeline_json(p, r.seconds));
  j["port"] = {{"imissed", r.port.imissed},
               {"ierrors", r.port.ierrors},
               {"oerrors", r.port.oerrors},
               {"rx_nombuf", r.port.rx_nombuf},
               {"pool_dry", r.port.pool_dry}};
  if (r.mbufs_in_use >= 0) j["mbufs_not_returned"] = r.mbufs_in_use;
  return j.dump(2);
}

}  // namespace ferry::packet
