#pragma once
// The Prometheus text exposition format (version 0.0.4), written by every
// service that serves /metrics: `ferry http` and the metrics endpoint of the
// agent, the server and the orchestrator (metrics_endpoint.h).
//
//   # HELP name text           one family: its HELP and TYPE lines, then its samples
//   # TYPE name counter|gauge|histogram
//   name{label="value",...} 12
//   name_bucket{le="0.001"} 3  a histogram: cumulative buckets, the last le="+Inf",
//   name_sum 0.0021            then the sum and the count
//   name_count 3
//
// DurationHistogram is the one fixed-bucket latency histogram that the data
// paths record into: relaxed atomics, no allocation, no lock; a scrape reads
// each word on its own, so a reading taken while threads record may be off by
// the samples in progress, never torn within a word.

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace ferry::prom {

struct Label {
  std::string_view name;
  std::string_view value;  // escaped by the writer
};

class TextWriter {
 public:
  // Begins a family. `type` is "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, std::initializer_list<Label> labels, double value);
  void sample(std::string_view name, std::initializer_list<Label> labels, std::uint64_t value);
  // A family of one unlabelled sample.
  void counter(std::string_view name, std::string_view help, std::uint64_t value);
  void gauge(std::string_view name, std::string_view help, double value);
  // One histogram series: counts[i] samples fell at or below upper_bounds[i]
  // and above the bound before; counts has one more entry than upper_bounds
  // (the +Inf bucket). Writes cumulative buckets, the sum and the count.
  void histogram(std::string_view name, std::initializer_list<Label> labels,
                 std::span<const double> upper_bounds, std::span<const std::uint64_t> counts, double sum);
  const std::string& text() const noexcept { return out_; }
  std::string take() noexcept { return std::move(out_); }

 private:
  void labels(std::initializer_list<Label> labels, std::string_view le = {});
  std::string out_;
};

// Seconds, 1 µs to 10 s in 1-2-5 steps; a 23rd bucket holds the rest.
inline constexpr std::array<double, 22> kDurationBounds = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4,
                                                           5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,
                                                           0.2,  0.5,  1,    2,    5,    10};

class DurationHistogram {
 public:
  // Data path: noexcept, two relaxed adds. Negative durations count as 0.
  void record(std::int64_t ns) noexcept;
  // One series of `name`, in seconds.
  void write(TextWriter& w, std::string_view name, std::initializer_list<Label> labels) const;
  std::uint64_t count() const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kDurationBounds.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

}  // namespace ferry::prom
