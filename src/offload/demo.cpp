#include "ferry/offload/demo.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/log.h"
#include "ferry/core/status.h"
#include "core/subprocess.h"
#include "ferry/worker/backend.h"

namespace ferry::offload {
namespace {

// Waits for a child to write a number into `path` (its port, or its pid once
// ready); throws if the child exits first or the time runs out.
unsigned wait_for_file(const std::string& path, Subprocess& child, const char* who, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    unsigned value = 0;
    if (in >> value && value != 0) return value;
    if (child.wait(0.0)) throw Error(std::string("the ") + who + " exited during start-up (see its log above)");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw Error(std::string("the ") + who + " was not ready within " + std::to_string(timeout_s) + " s");
}

}  // namespace

int run_demo(const DemoOptions& opts) {
  const std::string exe = Subprocess::self_exe();
  std::string backend = opts.backend;
  if (backend == "auto") backend = worker::cuda_available() ? "cuda" : "cpu";
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  if (opts.server_threads == 0 || opts.server_threads > ncpu)
    throw Error("DemoOptions::server_threads must be in 1.." + std::to_string(ncpu));

  const auto dir = std::filesystem::temp_directory_path() / ("ferry-demo-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string port_file = (dir / "port").string();
  const std::string ready_file = (dir / "orchestrator-ready").string();
  const std::string channel = "ferry-demo-" + std::to_string(getpid());
  const std::string level = std::to_string(opts.log_level);
  const std::string mml = std::to_string(opts.max_message_length);
  const std::string mcm = std::to_string(opts.max_concurrent_messages);

  std::printf("ferry demo: %u server thread(s), %s workers%s, %u client thread(s) x %llu requests of %zu bytes\n",
              opts.server_threads, backend.c_str(), backend == "cuda" ? (" (" + opts.launch + ")").c_str() : "",
              opts.client_threads, static_cast<unsigned long long>(opts.iterations), opts.message.size());
  std::fflush(stdout);

  std::vector<std::string> server_argv = {exe, "server", "-p", "0", "--listen-address", "127.0.0.1",
                                          "--port-file", port_file, "-c", channel, "-l", level,
                                          "--max-message-length", mml, "--max-concurrent-messages", mcm};
  for (std::uint32_t i = 0; i < opts.server_threads; ++i) {
    server_argv.push_back("--cpu");
    server_argv.push_back(std::to_string(i % ncpu));
  }
  Subprocess server = Subprocess::spawn(server_argv);
  const auto port = static_cast<std::uint16_t>(wait_for_file(port_file, server, "server", 15.0));

  Subprocess orchestrator = Subprocess::spawn(
      {exe, "orchestrator", "-c", channel, "-t", std::to_string(opts.server_threads), "--backend", backend,
       "--launch", backend == "cuda" ? opts.launch : "cpu", "-l", level, "--max-message-length", mml,
       "--max-concurrent-messages", mcm, "--connect-timeout", "15", "--ready-file", ready_file});
  // Start the load once the workers serve, so that start-up (a CUDA context takes
  // a few hundred ms) does not count as request latency.
  wait_for_file(ready_file, orchestrator, "orchestrator", 60.0);

  Subprocess client = Subprocess::spawn(
      {exe, "client", "-s", "127.0.0.1", "-p", std::to_string(port), "-t", std::to_string(opts.client_threads),
       "-i", std::to_string(opts.iterations), "-m", opts.message, "--max-concurrent-messages", mcm, "-l", level});
  // A demo run is bounded: the client has 5 minutes before it is stopped.
  auto client_status = client.wait(300.0);
  if (!client_status) {
    log::app().error("the client did not finish within 300 s; stopping it");
    client.kill();
  }

  server.signal(SIGINT);  // the server sends start_shutdown; the orchestrator answers and exits
  auto server_status = server.wait(15.0);
  auto orchestrator_status = orchestrator.wait(15.0);
  std::filesystem::remove_all(dir);

  const bool ok = client_status == 0 && server_status == 0 && orchestrator_status == 0;
  std::printf("ferry demo: client %s, server %s, orchestrator %s: %s\n",
              client_status ? std::to_string(*client_status).c_str() : "timeout",
              server_status ? std::to_string(*server_status).c_str() : "timeout",
              orchestrator_status ? std::to_string(*orchestrator_status).c_str() : "timeout",
              ok ? "clean shutdown, every response validated" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace ferry::offload
