#include "commands.h"
#include "ferry/offload/demo.h"

namespace ferry::app {

void register_demo(CLI::App& app, GeneralFlags& general, Command& command) {
  static offload::DemoOptions o;
  CLI::App* sub = app.add_subcommand(
      "demo",
      "Start a server, an orchestrator and a client on loopback, run a validated load, print the statistics "
      "and shut everything down cleanly.");
  add_general_flags(*sub, general);
  sub->add_option("--backend", o.backend, "Worker backend: auto (cuda where a GPU is present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--launch", o.launch, "cuda launch method: persistent, burst, graph or memops")
      ->capture_default_str();
  sub->add_option("--server-threads", o.server_threads, "Server data-path threads (cores 0..N-1)")
      ->capture_default_str();
  sub->add_option("--client-threads", o.client_threads, "Client connections")->capture_default_str();
  sub->add_option("-i,--iteration-count", o.iterations, "Requests per client connection")->capture_default_str();
  sub->add_option("-m,--message-string", o.message, "Request payload")->capture_default_str();
  sub->add_option("--max-message-length", o.max_message_length, "As for the server")->capture_default_str();
  sub->add_option("--max-concurrent-messages", o.max_concurrent_messages, "Window per connection")
      ->capture_default_str();
  sub->callback([&command, &general] {
    command.role = "demo";
    command.run = [&general] {
      o.log_level = general.log_level;
      return offload::run_demo(o);
    };
  });
}

}  // namespace ferry::app
