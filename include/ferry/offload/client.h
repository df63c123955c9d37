#pragma once
// The DOCA remote-offload client (DOCA's "DPU GPU Remote Offload Application
// Guide") as a closed-loop load
// generator: each thread keeps a window of requests in flight on its own
// connection and checks every response.

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::offload {

struct ClientOptions {
  std::string server_ip = "127.0.0.1";
  std::uint16_t server_port = 0;
  std::uint32_t thread_count = 1;
  std::uint64_t iteration_count = 100000;       // per thread
  std::string message = "Hello, Ferry!";
  std::string expected_response;                // empty: the reverse of message
  bool expected_given = false;
  std::uint32_t max_concurrent_messages = 128;  // closed-loop window per connection
  double progress_interval_s = 1.0;             // progress line period on long runs; 0 = off
  double connect_timeout_s = 30.0;              // retry refused connections every 500 ms this long
};

struct ClientLatency {  // microseconds, over every response of every thread
  double p50 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

struct ClientReport {
  // One entry per thread that failed for its own reason (a thread stopped only
  // because another failed is not listed); the statistics are void when any.
  std::vector<std::string> failures;
  double duration_s = 0;      // first request sent to last response received, all threads
  std::uint64_t operations = 0;
  std::uint64_t tx_bytes = 0;  // request payload bytes (the reference counts payload only)
  std::uint64_t rx_bytes = 0;  // response payload bytes
  ClientLatency latency_us;
  std::uint32_t threads = 0;
  std::uint32_t window = 0;
  std::uint64_t message_bytes = 0;

  bool ok() const { return failures.empty(); }
  // Per second over duration_s; 0 for an empty run.
  double per_second(double x) const { return duration_s > 0 ? x / duration_s : 0.0; }
};

// Runs the load to completion. Throws ferry::Error for options that cannot run
// (no port, a bad address, a message over 64 MiB); a failed connection or a
// wrong response is reported in ClientReport::failures.
ClientReport run_client(const ClientOptions& opts);

}  // namespace ferry::offload
