#include <cstdlib>

#include "commands.h"
#include "ferry/offload/orchestrator.h"
#include "ferry/worker/builtin_handlers.h"
#include "until_signal.h"

namespace ferry::app {

void register_orchestrator(CLI::App& app, GeneralFlags& general, Command& command) {
  static offload::OrchestratorOptions o;
  static std::string backend = "auto";
  static std::string launch = "persistent";
  static std::string handler = "reverse";
  CLI::App* sub = app.add_subcommand(
      "orchestrator",
      "Host role: create the channels, hand them to the server, run the workers (CPU threads or GPU kernels) "
      "and watch them. Start it after the server.");
  add_general_flags(*sub, general);
  sub->add_option("-d,--device-id", o.device_id, "DOCA comch device PCI address; accepted for compatibility, unused");
  sub->add_option("-g,--gpu-pci-addr", o.gpu_pci_addr,
                  "GPU for the cuda backend: PCI address (e.g. 0000:17:00.0) or device index; ignored by cpu");
  sub->add_option("-c,--comch-channel-name", o.channel_name, "Control channel name; must match the server's")
      ->capture_default_str();
  sub->add_option("-t,--num-gpu-threads", o.num_gpu_threads,
                  "Workers, one per channel; must equal the server's number of --cpu cores")
      ->check(at_least(1))
      ->required();
  sub->add_option("--max-concurrent-messages", o.max_concurrent_messages, "Must match the server's")
      ->capture_default_str();
  sub->add_option("--max-message-length", o.max_message_length, "Must match the server's")->capture_default_str();
  sub->add_option("--backend", backend, "Worker backend: cpu, cuda, or auto (cuda where a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--launch", launch, "cuda launch method: persistent, burst, graph or memops")
      ->check(CLI::IsMember({"cpu", "persistent", "burst", "graph", "memops"}))
      ->capture_default_str();
  sub->add_option("--handler", handler,
                  "Work per message: reverse (the reference), echo, macswap (swap an Ethernet frame's MACs), or stall (fault injection: never returns on a request starting with FERRY-STALL)")
      ->check(CLI::IsMember({"reverse", "echo", "macswap", "stall"}))
      ->capture_default_str();
  sub->add_option("--ring-slots", o.ring_slots,
                  "Slots per channel ring (power of two); default 8 x --max-concurrent-messages, so several "
                  "clients can share a server thread");
  sub->add_option("--burst", o.worker.burst, "burst/graph/memops: most requests per launch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--burst-timeout-us", o.worker.burst_timeout_us,
                  "burst/graph/memops: longest wait to fill a burst")
      ->check(duration_check("microseconds"))
      ->capture_default_str();
  sub->add_option("--idle-sleep-max-us", o.worker.idle_sleep_max_us,
                  "persistent: longest sleep between polls of a channel idle for 5 ms (its next request may wait "
                  "this long; busy channels gain the idle ones' PCIe reads)")
      ->check(duration_check("microseconds"))
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  sub->add_option("--worker-threads", o.worker.threads,
                  "cpu backend: worker threads, each serving channels in turn; 0 = one per channel")
      ->capture_default_str();
  sub->add_option("--worker-cpu", o.worker.cpus, "cpu backend: cores to pin worker threads to (comma-separated)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--connect-timeout", o.connect_timeout_s,
                  "Seconds to wait for the server to appear; 0 waits forever")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub->add_option("--ready-file", o.ready_file, "Write this file once attached to the server and serving");
  sub->add_option("--hang-timeout", o.hang_timeout_s,
                  "Seconds without progress while requests wait before the workers count as hung")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  add_peer_policy_flags(*sub, o.server_peers,
                        "run the server that this orchestrator hands its arena (and so every request) to");
  add_metrics_flags(*sub, o.metrics_port, o.metrics_address);
  sub->callback([&command] {
    command.role = "orchestrator";
    command.run = [] {
      const std::string chosen = backend == "auto" ? (worker::cuda_available() ? "cuda" : "cpu") : backend;
      o.worker.backend = worker::parse_backend(chosen);
      o.worker.launch = o.worker.backend == worker::BackendKind::Cpu ? worker::LaunchMethod::Cpu
                                                                      : worker::parse_launch(launch);
      o.worker.gpu = o.gpu_pci_addr;
      // First: every thread made after it has the signals blocked, the CUDA
      // driver's too (made with the backend), so that they reach the signalfd.
      SignalFd signals;
      offload::Orchestrator orchestrator(o, worker::make_builtin_backend(handler, o.worker));
      orchestrator.start();
      const int code = run_until_signal(orchestrator, signals, "orchestrator");
      if (orchestrator.stuck()) {
        // Destroying the backend would free GPU memory under a kernel that never
        // ends, and cudaFree waits for it: leave now and let the driver reclaim
        // the context (closing the link on exit tells the server, as usual).
        log::app().error("exiting without GPU teardown");
        log::app().flush();
        std::_Exit(code != 0 ? code : 1);
      }
      return code;
    };
  });
}

}  // namespace ferry::app
