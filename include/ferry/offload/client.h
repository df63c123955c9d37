#pragma once
// ferry client: the DOCA remote-offload client, usable as a load generator.

#include <cstdint>
#include <string>

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
  std::string json_out;                         // write statistics as JSON here when set
  double progress_interval_s = 1.0;             // progress line period on long runs; 0 = off
  double connect_timeout_s = 30.0;              // retry refused connections every 500 ms this long
};

// Runs the load and prints the reference's statistics lines plus latency
// percentiles. Returns the process exit code (0 when every thread succeeded).
int run_client(const ClientOptions& opts);

}  // namespace ferry::offload
