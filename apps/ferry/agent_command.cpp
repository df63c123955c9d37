#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "ferry/core/status.h"
#include "ferry/xfer/agent_service.h"
#include "until_signal.h"
#include "xfer/gpu/gpu.h"
#include "xfer/store/sizes.h"

namespace ferry::app {

namespace {

// The flags that the library takes typed, as the command line gives them.
struct AgentTextFlags {
  std::string gpu = "auto";
  std::string copy = "auto";
  std::string kernel_below = "64MiB";
  std::string kernel_below_pull = "64MiB";
  std::string engines_from = "1MiB";
  std::string pci;                    // -p: the GPU by PCI address (or index)
  std::vector<std::string> backends;  // -b: the reference's backends, as tiers
  bool tcp = false;                   // -T
};

constexpr const char* kDefaultStoreDir = "/var/tmp/ferry-agent";
constexpr const char* kDefaultTcp = "127.0.0.1:7417";

// -b NAME[:ARG]: the reference agent's backend, as a Ferry tier spec.
std::string tier_from_backend(const std::string& backend) {
  const auto colon = backend.find(':');
  const std::string name = backend.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : backend.substr(colon + 1);
  if (name == "posix") return "file:" + (arg.empty() ? kDefaultStoreDir : arg);
  if (name == "direct") return "file:" + (arg.empty() ? kDefaultStoreDir : arg) + ",direct";
  if (name == "dram") return "dram:" + (arg.empty() ? "1GiB" : arg);
  if (name == "redis") return "redis://" + (arg.empty() ? "127.0.0.1:6379" : arg);
  throw Error("-b " + backend + ": the backends are posix[:DIR], direct[:DIR], dram[:SIZE] and redis[:HOST:PORT]");
}

int parse_gpu(const std::string& text) {
  if (text == "auto") return xfer::kGpuAuto;
  if (text == "none") return xfer::kGpuNone;
  try {
    std::size_t used = 0;
    const int device = std::stoi(text, &used);
    if (used == text.size() && device >= 0) return device;
  } catch (const std::logic_error&) {
  }
  throw Error("--gpu must be auto, none or a device index, not '" + text + "'");
}

xfer::CopyMode parse_copy(const std::string& text) {
  if (text == "batch") return xfer::CopyMode::Batch;
  if (text == "loop") return xfer::CopyMode::Loop;
  if (text == "kernel") return xfer::CopyMode::Kernel;
  return xfer::CopyMode::Auto;  // the flag's check admits only these four
}

}  // namespace

void register_agent(CLI::App& app, GeneralFlags& general, Command& command) {
  static xfer::AgentServiceOptions o;
  static AgentTextFlags text;
  CLI::App* sub = app.add_subcommand(
      "agent",
      "The KV-cache offload proxy: applications export their GPU (or shared host) memory to it; it moves the "
      "data through a pinned staging buffer into a chain of storage tiers (dram -> file -> redis). See docs/xfer.md.");
  add_general_flags(*sub, general);
  sub->add_option("--endpoint", o.endpoint,
                  "Where applications connect: unix:NAME (abstract socket @NAME) or tcp:HOST:PORT (the "
                  "reference's TCP mode; port 0 picks one)")
      ->capture_default_str();
  sub->add_option(
         "--tier", o.tiers,
         "A storage tier, top first; repeat for a chain: dram:SIZE, "
         "file:DIR[,direct][,fsync][,capacity=SIZE][,qd=N][,pack=SIZE][,threads=N][,cores=N] (objects up "
         "to pack=SIZE share pack files, default 1MiB; pack=0: a file each; without direct, a put or get "
         "call is split between threads=N threads, default 2; its calls and helpers keep at most cores=N "
         "cores busy, default the machine's), redis://HOST:PORT[?OPTIONS], "
         "redis-cluster://HOST:PORT[,HOST:PORT...][?OPTIONS] (auth, TLS and the other options: "
         "docs/xfer-tiers.md). A full tier moves its least "
         "recently used objects down the chain.")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("-b,--backend", text.backends,
                  "The reference agent's backend, as a tier after any --tier: posix[:DIR] (a file tier, buffered; "
                  "DIR defaults to " + std::string(kDefaultStoreDir) + "), direct[:DIR] (the same with O_DIRECT), "
                  "dram[:SIZE] (default 1GiB), redis[:HOST:PORT] (default 127.0.0.1:6379)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("-T,--tcp", text.tcp,
                "The reference agent's TCP mode: listen on tcp:" + std::string(kDefaultTcp) +
                    " unless --endpoint names a tcp: address");
  sub->add_option("-m,--staging-mib", o.staging_mib, "Staging buffer (pinned where there is a GPU), MiB")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--chunk-kib", o.chunk_kib,
                  "Bytes gathered into one copy batch, KiB (0: 16384, or a staging slot if that is smaller)")
      ->capture_default_str();
  sub->add_option(
         "--chunk-blocks", o.chunk_blocks,
         "Blocks in one copy batch at most: small blocks cost bookkeeping per block, so their batches stay "
         "short enough to pipeline, while large blocks fill --chunk-kib")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("-q,--queue-depth", o.queue_depth, "Batches in flight (copy threads and CUDA streams)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  sub->add_option("--gpu", text.gpu, "auto, none (memcpy threads only) or a CUDA device index")->capture_default_str();
  sub->add_option("-p,--pci", text.pci,
                  "The reference agent's device: here the GPU at this PCI address (0000:17:00.0), or a GPU index; "
                  "instead of --gpu")
      ->excludes("--gpu");
  sub->add_option("--copy", text.copy,
                  "Device copies: kernel (a gather/scatter kernel that also computes the checksums on the GPU), "
                  "batch (cudaMemcpyBatchAsync), loop (cudaMemcpyAsync per block), or auto: the kernel for blocks "
                  "below --kernel-below, batch for the rest")
      ->check(CLI::IsMember({"auto", "batch", "loop", "kernel"}))
      ->capture_default_str();
  sub->add_option("--kernel-below", text.kernel_below,
                  "--copy auto: blocks smaller than this go by the copy kernel, the rest by "
                  "cudaMemcpyBatchAsync (with the CPU hashing behind it); a size such as 1MiB")
      ->capture_default_str();
  sub->add_option("--kernel-below-pull", text.kernel_below_pull,
                  "--copy auto: the same threshold for pulls")
      ->capture_default_str();
  sub->add_option("--engines-from", text.engines_from,
                  "--copy auto: blocks of at least this size go by cudaMemcpyBatchAsync while the kernel computes "
                  "their checksums in device memory (0: the kernel copies every block below --kernel-below)")
      ->capture_default_str();
  sub->add_option("--cpus", o.cpus, "Pin the agent to these cores (the proxy's own cores)")->delimiter(',');
  sub->add_option("--lane-spin-us", o.lane_spin_us,
                  "How long an idle copy lane polls for the next batch before it sleeps, microseconds "
                  "(-1: 200 with --cpus, else 0; waking a sleeping lane costs tens of microseconds a request)")
      ->check(duration_check("microseconds", "-1"))
      ->check(CLI::Range(-1, 1000000))
      ->capture_default_str();
  sub->add_option("--ready-file", o.ready_file, "Write the endpoint here once applications can connect");
  add_peer_policy_flags(*sub, o.peers, "connect to the agent");
  add_metrics_flags(*sub, o.metrics_port, o.metrics_address);
  sub->add_flag("--shared-namespace", o.shared_namespace,
                "One key space for every admitted user; by default each uid has its own, and sees, reads, "
                "overwrites and removes only its own keys");
  sub->add_option("--max-sessions", o.max_sessions,
                  "Applications connected at once; more are refused with an error until one leaves")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option(
         "--max-session-mib", o.max_session_mib,
         "What one session may hold in the agent, MiB: its requests in flight plus replies it has not "
         "read. A request beyond it is refused (retry later); unread replies beyond it cut the session off")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--max-regions", o.max_regions, "Memory regions one session may have registered at once")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--stall-timeout", o.stall_timeout_s,
                  "Seconds a session may leave a frame half sent, or its replies unread, before it is cut off")
      ->check(duration_check("seconds"))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--memory-timeout", o.memory_timeout_s,
                  "Seconds an application's own memory (registered by address, or a shared file) may keep the "
                  "agent waiting, in a registration or a batch of copies, before that call fails and the memory "
                  "is dropped (a hung FUSE or NFS mapping); the agent serves everyone else meanwhile")
      ->check(duration_check("seconds"))
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->callback([&command] {
    command.role = "agent";
    command.run = [] {
      // -p takes a PCI address where the reference took its DMA device's; a GPU index works too.
      if (!text.pci.empty())
        o.gpu = text.pci.find(':') != std::string::npos ? xfer::gpu::device_at_pci(text.pci) : parse_gpu(text.pci);
      else
        o.gpu = parse_gpu(text.gpu);
      for (const auto& b : text.backends) o.tiers.push_back(tier_from_backend(b));
      if (o.tiers.empty())
        throw Error("name where objects go: --tier dram:8GiB --tier file:DIR, or the reference's -b posix");
      if (text.tcp && o.endpoint.rfind("tcp:", 0) != 0) o.endpoint = std::string("tcp:") + kDefaultTcp;
      o.copy = parse_copy(text.copy);
      o.kernel_below = xfer::store::parse_size(text.kernel_below, "--kernel-below");
      o.kernel_below_pull = xfer::store::parse_size(text.kernel_below_pull, "--kernel-below-pull");
      o.engines_from = xfer::store::parse_size(text.engines_from, "--engines-from");
      SignalFd signals;  // first: every thread made after it has the signals blocked
      xfer::AgentService agent(o);
      agent.start();
      return run_until_signal(agent, signals, "agent");
    };
  });
}

}  // namespace ferry::app
