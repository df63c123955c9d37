#include "commands.h"
#include "ferry/offload/client.h"

namespace ferry::app {

void register_client(CLI::App& app, GeneralFlags& general, Command& command) {
  static offload::ClientOptions o;
  CLI::App* sub = app.add_subcommand(
      "client",
      "Closed-loop client and load generator: each thread keeps a window of requests in flight, validates "
      "every response and reports throughput and latency.");
  add_general_flags(*sub, general);
  sub->add_option("-s,--server-ip-address", o.server_ip, "Server IPv4 address")->capture_default_str();
  sub->add_option("-p,--server-ip-port", o.server_port, "Server TCP port")->required();
  sub->add_option("-t,--thread-count", o.thread_count, "Threads, one connection each")->capture_default_str();
  sub->add_option("-i,--iteration-count", o.iteration_count, "Requests per thread")->capture_default_str();
  sub->add_option("-m,--message-string", o.message, "Request payload")->capture_default_str();
  auto* e = sub->add_option("-e,--expected-response", o.expected_response,
                            "Expected response payload (default: the message reversed)");
  sub->add_option("--max-concurrent-messages", o.max_concurrent_messages,
                  "Requests in flight per connection (the closed-loop window)")
      ->capture_default_str();
  sub->add_option("--json-out", o.json_out,
                  "Also write the statistics as JSON to this file (-j/--json reads flags, as in DOCA)");
  sub->add_option("--progress-interval", o.progress_interval_s,
                  "Seconds between progress lines on stderr for long runs; 0 turns them off")
      ->capture_default_str();
  sub->add_option("--connect-timeout", o.connect_timeout_s,
                  "Seconds to keep retrying a refused connection (every 500 ms)")
      ->capture_default_str();
  sub->callback([&command, e] {
    command.role = "client";
    o.expected_given = e->count() > 0;
    command.run = [] { return offload::run_client(o); };
  });
}

}  // namespace ferry::app
