#pragma once
// The server's /metrics (ServerOptions::metrics_port), and the stage
// histograms that `ferry http` reports from the same statistics.

#include <array>
#include <string>
#include <string_view>

#include "core/prometheus.h"
#include "ferry/offload/server.h"

namespace ferry::offload {

// StageLatency's bounds in seconds, without its last one, which stands for +Inf.
inline constexpr auto kStageBoundsSeconds = [] {
  std::array<double, StageLatency::kBoundsUs.size() - 1> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = StageLatency::kBoundsUs[i] / 1e6;
  return out;
}();

// The samples of one histogram family, a series per stage (label
// stage="read|queue|handle|write"), in seconds; the caller writes the family line.
void write_stage_latencies(prom::TextWriter& w, std::string_view name, const ServerStats& st);

// Every ferry_server_* family: requests, responses, bytes each way, errors by
// kind, clients, requests in the channels, the orchestrator's attachment and
// the stage histograms.
std::string render_server_metrics(const ServerStats& st);

}  // namespace ferry::offload
