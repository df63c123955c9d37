// ferry l2fwd [EAL args] -- [flags]: the packet path (docs/packet.md). DPDK's
// EAL takes everything before "--"; the flags after it are Ferry's, and
// l2fwd-nv's (-b -d -g -m -p -t -v -w -z) with their meaning.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "commands.h"
#include "core/log.h"
#include "core/signal_fd.h"
#include "ferry/core/status.h"
#include "until_signal.h"

#if defined(FERRY_HAVE_DPDK)
#include "ferry/packet/l2fwd.h"
#endif

namespace ferry::app {
namespace {

#if defined(FERRY_HAVE_DPDK)

constexpr const char* kUsage =
    "ferry l2fwd [EAL args] -- [flags]\n"
    "Forwards every packet of a DPDK port back out with its MAC addresses swapped: RX core, worker\n"
    "(CPU, or a GPU by any launch method), TX core, per pipeline, joined by a communication list.\n"
    "EAL args are DPDK's usual ones, e.g. -l 0-2 --vdev net_null0 --no-huge -m 512 --no-pci,\n"
    "or -a 0000:3b:00.0 for a NIC; -- --list-ports shows what each port can do.\n"
    "A pipeline needs two EAL worker lcores, so P pipelines need 2P+1 cores.\n"
    "l2fwd-nv's command lines work unchanged (-w 0..4 picks none, cpu, burst, persistent, graph).";

struct L2fwdFlags {
  packet::L2fwdOptions options;
  std::string mode = "cpu";
  int workload = -1;  // l2fwd-nv's -w; -1: not given
  std::string mem = "host-pinned";
  int mem_mode = -1;  // l2fwd-nv's -m; -1: not given
  std::string when_full = "drop";
  double stats_interval_s = 1.0;
  std::string json_out;
  int nvtx = 0;
  int split = 0;
  bool list_ports = false;
};

void add_flags(CLI::App& app, L2fwdFlags& f) {
  auto& o = f.options;
  app.add_option("--mode", f.mode, "none, cpu, burst, persistent, graph or memops")
      ->check(CLI::IsMember({"none", "cpu", "burst", "persistent", "graph", "memops"}))
      ->capture_default_str();
  app.add_option("-w,--workload", f.workload, "l2fwd-nv's workload: 0 none, 1 cpu, 2 burst, 3 persistent, 4 graph")
      ->check(CLI::Range(0, 4));
  app.add_option("-b,--burst", o.worker.max_packets, "Packets per burst (a list item) at most")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("-p,--pipelines", o.pipelines, "Pipelines: RX queue, RX core, TX core and list each")
      ->capture_default_str();
  app.add_option("--mem", f.mem, "Packet memory: host-pinned (the GPU maps it) or device (GPU memory, GPUDirect NICs)")
      ->check(CLI::IsMember({"host-pinned", "device"}))
      ->capture_default_str();
  app.add_option("-m,--mem-mode", f.mem_mode, "l2fwd-nv's memory: 0 host-pinned, 1 device")->check(CLI::Range(0, 1));
  app.add_option("-g,--gpu", o.worker.gpu, "GPU modes: the GPU, by index or PCI address (default: device 0)");
  app.add_option("-d,--data-room", o.data_room, "Bytes per packet buffer, after DPDK's headroom")
      ->check(at_least(64))
      ->capture_default_str();
  app.add_option("-t,--time-per-packet", o.worker.ns_per_packet,
                 "A synthetic workload: the worker spends this many ns on each packet (a warp per packet on a GPU)")
      ->check(duration_check("nanoseconds"))
      ->capture_default_str();
  app.add_option("-v,--packets", o.packets, "Stop after this many packets after the warm-up; 0 runs until Ctrl-C")
      ->capture_default_str();
  app.add_option("-z,--warmup", o.warmup_packets, "Packets forwarded before measuring starts")->capture_default_str();
  app.add_option("--port", o.port, "The DPDK port")->capture_default_str();
  app.add_option("--items", o.items, "Items in each pipeline's communication list (a power of two)")
      ->capture_default_str();
  app.add_option("--mbufs", o.mbufs, "mbufs per pipeline; 0: the list's and the queues' worth")->capture_default_str();
  app.add_option("--graph-items", o.worker.graph_items,
                 "graph and memops: list items each graph launch pre-posts")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option(
         "--gpu-lanes", o.worker.gpu_lanes,
         "GPU modes: items of a pipeline the GPU works on at once (blocks, streams or graph branches)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--burst-timeout-us", o.burst_timeout_us, "A partial burst goes to the worker after this long")
      ->check(duration_check("microseconds"))
      ->capture_default_str();
  app.add_option("--when-full", f.when_full,
                 "The list is full: drop (receive and count as dropped) or wait (stop polling; the port drops)")
      ->check(CLI::IsMember({"drop", "wait"}))
      ->capture_default_str();
  app.add_option("--stats-interval", f.stats_interval_s, "Seconds between statistics lines; 0: only at the end")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  app.add_option("--json-out", f.json_out, "Write the final statistics here as JSON");
  app.add_flag("--list-ports", f.list_ports,
               "Print each port the EAL probed (driver, queue limits, RSS hashes, offloads) and exit");
  app.add_option("-n,--nvtx", f.nvtx, "l2fwd-nv's NVTX markers: accepted; Ferry emits none")->check(CLI::Range(0, 1));
  app.add_option("-s,--split", f.split, "l2fwd-nv's header/data split: only 0 (off) is supported")
      ->check(CLI::Range(0, 0));
  app.set_version_flag("--version", FERRY_VERSION);
}

void resolve(L2fwdFlags& f) {
  static constexpr const char* kWorkloads[] = {"none", "cpu", "burst", "persistent", "graph"};
  auto& o = f.options;
  o.worker.launch = packet::parse_packet_launch(f.workload >= 0 ? kWorkloads[f.workload] : f.mode);
  o.memory = (f.mem_mode >= 0 ? f.mem_mode == 1 : f.mem == "device") ? packet::MemoryKind::Device
                                                                      : packet::MemoryKind::Host;
  o.when_full = f.when_full == "wait" ? packet::FullPolicy::Wait : packet::FullPolicy::Drop;
}

int run_l2fwd(std::vector<std::string> args) {
  const auto sep = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> eal{"ferry-l2fwd"};
  eal.insert(eal.end(), args.begin(), sep);
  std::vector<std::string> own{"ferry l2fwd --"};
  if (sep != args.end()) own.insert(own.end(), sep + 1, args.end());

  CLI::App app{kUsage, "ferry l2fwd"};
  L2fwdFlags flags;
  add_flags(app, flags);
  const bool help = std::find(args.begin(), args.end(), "--help") != args.end() ||
                    std::find(args.begin(), sep, "-h") != sep ||
                    std::find(sep, args.end(), "-h") != args.end();
  if (help) {
    std::printf("%s", app.help().c_str());
    return 0;
  }
  try {
    std::vector<char*> argv;
    for (auto& a : own) argv.push_back(a.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  resolve(flags);

  SignalFd signals;  // first: EAL's lcores and the GPU driver's threads inherit the blocked signals
  packet::Eal eal_up(eal);
  const std::vector<packet::PortInfo> ports = packet::list_ports();
  if (flags.list_ports) {
    std::printf("%zu port(s). %s.\n", ports.size(), packet::dpdk_drivers_note().c_str());
    for (const auto& p : ports) std::printf("%s\n", packet::describe(p).c_str());
    return 0;
  }
  for (const auto& p : ports) log::app().info("l2fwd: {}", packet::describe(p));
  packet::L2fwd l2fwd(flags.options, packet::make_macswap_worker(flags.options.worker));
  l2fwd.start();
  log::app().info("l2fwd: {}", l2fwd.describe());

  using clock = std::chrono::steady_clock;
  const auto interval = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(flags.stats_interval_s));
  auto next_stats = clock::now() + interval;
  const int code = run_until_signal(l2fwd, signals, "l2fwd", [&] {
    if (flags.stats_interval_s > 0 && clock::now() >= next_stats && l2fwd.measuring()) {
      std::printf("%s", packet::format_report(l2fwd.interval_report(), "statistics").c_str());
      std::fflush(stdout);
      next_stats += interval;
    }
  });
  const packet::L2fwdReport report = l2fwd.report();
  if (!report.pipelines.empty()) {  // empty: it never got going (the error says why)
    std::printf("%s", packet::format_report(report, "total, measured after the warm-up").c_str());
    std::fflush(stdout);
  }
  if (!flags.json_out.empty() && !report.pipelines.empty()) {
    std::ofstream out(flags.json_out);
    out << packet::report_json(report) << "\n";
    if (!out) throw Error("cannot write " + flags.json_out);
  }
  if (l2fwd.stuck()) {
    log::app().error("exiting without GPU teardown: a kernel did not end");
    log::app().flush();
    std::_Exit(code != 0 ? code : 1);
  }
  return code;
}

#endif  // FERRY_HAVE_DPDK

}  // namespace

void register_l2fwd(CLI::App& app, GeneralFlags& /*general*/, Command& command) {
  auto* sub = app.add_subcommand("l2fwd", "Forward packets of a DPDK port through CPU or GPU workers (l2fwd-nv's design): ferry l2fwd [EAL args] -- [flags]; --help for the flags");
  // Everything after "l2fwd" is DPDK's or l2fwd's own: neither CLI11's help nor
  // the general flags (-l is the EAL's core list here) may take any of it.
  sub->prefix_command();
  sub->set_help_flag();
  sub->callback([sub, &command] {
    command.role = "l2fwd";
    command.run = [args = sub->remaining()]() -> int {
#if defined(FERRY_HAVE_DPDK)
      return run_l2fwd(args);
#else
      (void)args;
      throw Error("this build of ferry has no packet path: DPDK (libdpdk-dev) was not found when it was built");
#endif
    };
  });
}

}  // namespace ferry::app
