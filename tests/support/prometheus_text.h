#pragma once
// A strict reader of the Prometheus text exposition format (0.0.4) for the
// tests of every /metrics: it throws std::runtime_error, naming the line, on
// anything a Prometheus server would refuse or that breaks the format's
// rules (a sample before its TYPE, a family declared twice, histogram
// buckets that are not cumulative or whose +Inf bucket differs from _count).

#include <cstdint>
#include <map>
#include <string>

namespace ferry::test {

struct PrometheusText {
  // Each sample by its series as written, labels in their order:
  // "ferry_agent_bytes_total{direction=\"push\",tier=\"dram:1GiB\"}".
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family name -> counter, gauge, histogram ...

  // The sample's value; throws when the series is absent.
  double at(const std::string& series) const;
};

PrometheusText parse_prometheus(const std::string& text);

// GET `path` from 127.0.0.1:port on a connection of its own: the status and body.
struct Scrape {
  int status = 0;
  std::string content_type;
  std::string body;
};
Scrape scrape(std::uint16_t port, const std::string& path = "/metrics");

}  // namespace ferry::test
