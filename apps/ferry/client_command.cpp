#include "client_stats.h"
#include "commands.h"
#include "core/log.h"
#include "ferry/offload/client.h"

namespace ferry::app {

void register_client(CLI::App& app, GeneralFlags& general, Command& command) {
  static offload::ClientOptions o;
  static std::string json_out;
  static std::string format = "ferry";
  CLI::App* sub = app.add_subcommand(
      "client",
      "Closed-loop client and load generator: each thread keeps a window of requests in flight, validates "
      "every response and reports throughput and latency.");
  add_general_flags(*sub, general);
  sub->add_option("-s,--server-ip-address", o.server_ip, "Server IPv4 address")->capture_default_str();
  sub->add_option("-p,--server-ip-port", o.server_port, "Server TCP port")->check(at_least(1))->required();
  sub->add_option("-t,--thread-count", o.thread_count, "Threads, one connection each")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("-i,--iteration-count", o.iteration_count, "Requests per thread")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("-m,--message-string", o.message, "Request payload")->capture_default_str();
  auto* e = sub->add_option("-e,--expected-response", o.expected_response,
                            "Expected response payload (default: the message reversed)");
  sub->add_option("--max-concurrent-messages", o.max_concurrent_messages,
                  "Requests in flight per connection (the closed-loop window)")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--json-out", json_out,
                  "Also write the statistics as JSON to this file (-j/--json reads flags, as in DOCA)");
  sub->add_option("--stats-format", format,
                  "How to print the statistics: 'ferry' (the reference's lines plus latency percentiles) or "
                  "'doca' (the reference's '+===+' block with '| ' prefixes, for parsers of its output; the "
                  "default when called as doca_dpu_gpu_remote_offload_client)")
      ->check(CLI::IsMember({"ferry", "doca"}))
      ->capture_default_str();
  sub->add_option("--progress-interval", o.progress_interval_s,
                  "Seconds between progress lines on stderr for long runs; 0 turns them off")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub->add_option("--connect-timeout", o.connect_timeout_s,
                  "Seconds to keep retrying a refused connection (every 500 ms)")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub->callback([&command, e] {
    command.role = "client";
    o.expected_given = e->count() > 0;
    command.run = [] {
      const offload::ClientReport report = offload::run_client(o);
      if (!report.ok()) {
        for (const auto& f : report.failures) log::app().error("{}", f);
        // The reference's words, for its parsers; Ferry's own lines say the same by their absence.
        if (format == "doca") log::app().error("Execution encountered one or more errors, will not display stats");
        return 1;
      }
      if (format == "doca")
        print_doca_stats(stdout, report);
      else
        print_ferry_stats(stdout, report);
      if (!json_out.empty()) write_client_json(json_out, report);
      return 0;
    };
  });
}

}  // namespace ferry::app
