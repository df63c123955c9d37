// An application that embeds Ferry: a DOCA-wire TCP server whose requests are
// answered by its own handler (upper.h), on CPU threads or on the GPU.
//
//   upper_server --port 5000 [--backend cpu|cuda] [--launch persistent|burst|graph|memops]
//   ferry client -p 5000 -m "hello" -e "HELLO"
//
// It hosts both halves of the remote-offload pipeline in one process: the
// proxy (ferry::offload::Server) and the workers (ferry::offload::Orchestrator).

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "ferry/core/status.h"
#include "ferry/offload/orchestrator.h"
#include "ferry/offload/server.h"
#include "ferry/worker/cpu_backend.h"
#include "ferry/worker/cuda_backend.h"
#include "upper.h"

namespace {

struct Args {
  unsigned port = 0;
  std::string port_file;
  std::string backend = "cpu";
  std::string launch = "persistent";
  unsigned threads = 2;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "upper_server: %s\n"
               "usage: upper_server [--port N] [--port-file FILE] [--threads N] [--backend cpu|cuda]\n"
               "                    [--launch persistent|burst|graph|memops]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("an upper-casing server built on Ferry");
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--port") a.port = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--port-file") a.port_file = value;
    else if (flag == "--threads") a.threads = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--backend") a.backend = value;
    else if (flag == "--launch") a.launch = value;
    else usage(("unknown flag " + flag).c_str());
  }
  if (a.backend != "cpu" && a.backend != "cuda") usage("--backend is cpu or cuda");
  if (a.threads == 0) usage("--threads must be at least 1");
  return a;
}

std::unique_ptr<ferry::worker::Backend> make_backend(const Args& a, ferry::worker::WorkerOptions& w) {
  if (a.backend == "cpu") return ferry::worker::make_cpu_backend(w, Upper{});
#if defined(UPPER_HAVE_CUDA)
  w.backend = ferry::worker::BackendKind::Cuda;
  w.launch = ferry::worker::parse_launch(a.launch);
  return ferry::worker::make_cuda_backend(w, Upper{});  // built by upper_cuda.cu
#else
  throw ferry::Error("this build of upper_server has no CUDA (nvcc was not found)");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  // Signals are the application's business: block them in every thread the
  // services will start, and wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  try {
    const std::string channel = "upper-server-" + std::to_string(getpid());
    ferry::offload::ServerOptions so;
    so.channel_name = channel;
    so.listen_address = "127.0.0.1";
    so.port = static_cast<std::uint16_t>(args.port);
    so.port_file = args.port_file;
    for (unsigned i = 0; i < args.threads; ++i) so.cpus.push_back(0);
    so.pin_threads = false;
    ferry::offload::Server server(so);
    server.start();

    ferry::offload::OrchestratorOptions oo;
    oo.channel_name = channel;
    oo.num_gpu_threads = args.threads;
    oo.connect_timeout_s = 10;
    auto backend = make_backend(args, oo.worker);
    ferry::offload::Orchestrator workers(oo, std::move(backend));
    workers.start();
    std::printf("upper_server: serving on 127.0.0.1:%u with %s workers\n", server.port(), args.backend.c_str());
    std::fflush(stdout);

    const timespec tick{0, 100'000'000};
    for (;;) {
      const int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig > 0) {
        std::printf("upper_server: %s, stopping\n", strsignal(sig));
        server.stop();
        break;
      }
      if (server.wait_for(std::chrono::milliseconds(0)) || workers.wait_for(std::chrono::milliseconds(0))) break;
    }
    const int server_code = server.wait();
    const int workers_code = workers.wait();
    if (!server.first_error().empty()) std::fprintf(stderr, "upper_server: %s\n", server.first_error().c_str());
    if (!workers.first_error().empty()) std::fprintf(stderr, "upper_server: %s\n", workers.first_error().c_str());
    std::printf("upper_server: answered %llu requests\n", static_cast<unsigned long long>(server.stats().responses));
    return server_code != 0 ? server_code : workers_code;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "upper_server: %s\n", e.what());
    return 1;
  }
}
