#pragma once
// ferry demo: starts a server, an orchestrator and a client as child processes
// on loopback, runs a validated load, prints the statistics and shuts down by
// the reference's protocol.

#include <cstdint>
#include <string>

namespace ferry::offload {

struct DemoOptions {
  std::string backend = "auto";  // auto: cuda where a GPU is present, else cpu
  std::string launch = "persistent";
  std::uint32_t server_threads = 1;
  std::uint32_t client_threads = 4;
  std::uint64_t iterations = 50000;  // per client thread
  std::string message = "Hello from Ferry, the remote-offload demo!";
  std::uint32_t max_message_length = 256;
  std::uint32_t max_concurrent_messages = 128;
  int log_level = 50;
};

int run_demo(const DemoOptions& opts);

}  // namespace ferry::offload
