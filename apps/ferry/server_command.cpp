#include "commands.h"
#include "core/net.h"
#include "ferry/offload/server.h"
#include "until_signal.h"

namespace ferry::app {

void register_server(CLI::App& app, GeneralFlags& general, Command& command) {
  static offload::ServerOptions o;
  static bool no_pin = false;
  CLI::App* sub = app.add_subcommand(
      "server",
      "Proxy role (the DPU's part): accept TCP clients and forward their requests to the orchestrator's "
      "workers through shared-memory channels. Start it before the orchestrator.");
  add_general_flags(*sub, general);
  sub->add_option("-d,--device-id", o.device_id, "DOCA comch device PCI address; accepted for compatibility, unused");
  sub->add_option("-r,--representor-id", o.representor_id,
                  "DOCA host representor PCI address; accepted for compatibility, unused");
  sub->add_option("-c,--comch-channel-name", o.channel_name,
                  "Control channel name (a Unix socket @ferry.NAME); must match the orchestrator's")
      ->capture_default_str();
  sub->add_option("-p,--server-listen-port", o.port, "TCP port to listen on (0 picks a free one)")->required();
  sub->add_option("--cpu", o.cpus, "Core of a data-path thread; repeat (or comma-separate) for more threads")
      ->required()
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--max-concurrent-messages", o.max_concurrent_messages,
                  "Requests one connection may have in flight; reading stops at the limit (back-pressure)")
      ->capture_default_str();
  sub->add_option("--max-message-length", o.max_message_length,
                  "Largest message in bytes, excluding the 8-byte header (the 4-byte length prefix counts)")
      ->capture_default_str();
  sub->add_option("--listen-address", o.listen_address, "IPv4 address to listen on")->capture_default_str();
  sub->add_option("--port-file", o.port_file, "Write the bound port to this file once listening");
  sub->add_option("--max-clients-per-thread", o.max_clients_per_thread,
                  "Clients one data-path thread serves; more are refused with a server_full error")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--shutdown-timeout", o.shutdown_timeout_s,
                  "Seconds to let in-flight requests finish, and to wait for the orchestrator, at shutdown")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub->add_option("--request-timeout", o.request_timeout_s,
                  "Seconds requests may wait with no response before the orchestrator counts as hung: it is "
                  "detached and its clients get no_workers errors; 0 waits forever")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  add_peer_policy_flags(*sub, o.control_peers, "attach as the orchestrator (on the control socket)");
  add_metrics_flags(*sub, o.metrics_port, o.metrics_address);
  sub->add_flag("--no-pin", no_pin, "Do not pin data-path threads to their --cpu cores");
  sub->callback([&command] {
    command.role = "server";
    command.run = [] {
      o.pin_threads = !no_pin;
      SignalFd signals;  // first: every thread made after it has the signals blocked
      offload::Server server(o);
      net::raise_fd_limit();  // a client per descriptor
      server.start();
      return run_until_signal(server, signals, "server");
    };
  });
}

}  // namespace ferry::app
