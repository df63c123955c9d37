// ferry-process-memory-probe: the agent's ways into an application's plain
// memory (src/xfer/agent/process_memory.h) against process_vm_readv/writev as
// they are, the minimal cross-memory mechanism:
//   as_owner   the same calls, each made by a thread that takes the memory
//              owner's uid and gid for it: an alternative for a root agent,
//              measured and not taken (docs/bench/xfer.md says why);
//   proc_mem   pread/pwrite on /proc/<pid>/mem (the Bound reach, what a root
//              agent does for other users).
// A child process holds the memory, running as --owner-uid; T threads copy it
// in blocks of B bytes, each way. The mechanisms run interleaved round by
// round, and each round's ratio to process_vm is the result: this machine
// drifts within a run by more than the differences sought.
#include <fcntl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/syscall.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>


namespace {

enum class Way { ProcessVm, AsOwner, ProcMem };
const char* name(Way w) { return w == Way::ProcessVm ? "process_vm" : w == Way::AsOwner ? "as_owner" : "proc_mem"; }

struct Setup {
  pid_t child;
  int mem_fd;
  std::uint8_t* remote;  // the child's copy of the buffer (same address after fork)
  std::size_t bytes;
  uid_t owner;
};

// Copies the whole buffer once each way with `threads` threads in `block`
// pieces; returns {read GB/s, write GB/s}.
std::pair<double, double> run(const Setup& s, Way way, std::size_t block, int threads,
                              std::vector<std::vector<std::uint8_t>>& locals) {
  double gbps[2];
  for (int dir = 0; dir < 2; ++dir) {
    const bool to_remote = dir == 1;
    std::atomic<bool> failed{false};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const std::size_t share = s.bytes / static_cast<std::size_t>(threads);
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::uint8_t* local = locals[static_cast<std::size_t>(t)].data();
        for (std::size_t off = 0; off < share; off += block) {
          const std::size_t len = std::min(block, share - off);
          std::uint8_t* there = s.remote + static_cast<std::size_t>(t) * share + off;
          ssize_t n;
          if (way != Way::ProcMem) {
            iovec l{local + off, len}, r{there, len};
            // As the owner: the thread takes the owner's uid and gid for the
            // call (raw system calls: this thread only), as a root agent
            // could, and gives them back.
            if (way == Way::AsOwner && (syscall(SYS_setresgid, s.owner, s.owner, -1) != 0 ||
                                        syscall(SYS_setresuid, s.owner, s.owner, -1) != 0))
              failed = true;
            struct Restore {
              bool on;
              ~Restore() {
                if (on && (syscall(SYS_setresuid, 0, 0, -1) != 0 || syscall(SYS_setresgid, 0, 0, -1) != 0)) std::abort();
              }
            } restore{way == Way::AsOwner};
            n = to_remote ? process_vm_writev(s.child, &l, 1, &r, 1, 0) : process_vm_readv(s.child, &l, 1, &r, 1, 0);
          } else {
            const auto at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(there));
            n = to_remote ? pwrite(s.mem_fd, local + off, len, at) : pread(s.mem_fd, local + off, len, at);
          }
          if (n != static_cast<ssize_t>(len)) failed = true;
        }
      });
    for (auto& th : pool) th.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (failed) throw std::runtime_error(std::string(name(way)) + ": a copy came up short");
    gbps[dir] = static_cast<double>(share * static_cast<std::size_t>(threads)) / secs / 1e9;
  }
  return {gbps[0], gbps[1]};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"/proc/<pid>/mem against process_vm_readv/writev, interleaved, to and from a child's memory"};
  std::size_t mib = 256;
  std::vector<std::size_t> blocks_kib{64, 1024, 32768};
  std::vector<int> thread_counts{1, 4, 8};
  int rounds = 5;
  uid_t owner = 65534;
  std::string json_out;
  app.add_option("--mib", mib, "The child's buffer, MiB")->capture_default_str();
  app.add_option("--block-kib", blocks_kib, "Block sizes, KiB")->capture_default_str();
  app.add_option("--threads", thread_counts, "Thread counts")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds per point; each round runs both ways once")->capture_default_str();
  app.add_option("--owner-uid", owner, "The uid (and gid) the child runs as")->capture_default_str();
  app.add_option("--json-out", json_out, "Also write the results here");
  CLI11_PARSE(app, argc, argv);
  if (mib == 0 || rounds < 1) {
    std::fprintf(stderr, "--mib and --rounds must be positive\n");
    return 2;
  }

  Setup s{};
  s.bytes = mib << 20;
  s.remote = static_cast<std::uint8_t*>(std::aligned_alloc(4096, s.bytes));
  std::memset(s.remote, 1, s.bytes);  // faulted in before the fork: the child's pages exist
  s.owner = owner;
  s.child = fork();
  if (s.child == 0) {
    // As an application of another user: dumpable again after the change, as
    // one started by that user is.
    if (setresgid(owner, owner, owner) != 0 || setresuid(owner, owner, owner) != 0) _exit(1);
    prctl(PR_SET_DUMPABLE, 1);
    pause();
    _exit(0);
  }
  usleep(100000);
  s.mem_fd = open(("/proc/" + std::to_string(s.child) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  if (s.mem_fd < 0) {
    std::perror("open /proc/<child>/mem");
    return 1;
  }
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-8s %8s %10s %10s %10s %10s %10s %10s %8s %8s %8s %8s\n", "threads", "block", "pvm rd", "owner rd",
              "mem rd", "pvm wr", "owner wr", "mem wr", "owner r", "owner w", "mem r", "mem w");
  for (const int threads : thread_counts) {
    std::vector<std::vector<std::uint8_t>> locals(static_cast<std::size_t>(threads),
                                                  std::vector<std::uint8_t>(s.bytes / static_cast<std::size_t>(threads), 2));
    for (const std::size_t kib : blocks_kib) {
      // [way][read, write] GB/s and [way][read, write] ratios to process_vm, per round.
      std::vector<double> gb[3][2], ratio[3][2];
      for (int r = 0; r < rounds; ++r) {
        std::pair<double, double> got[3];
        for (const Way w : {Way::ProcessVm, Way::AsOwner, Way::ProcMem}) got[static_cast<int>(w)] = run(s, w, kib << 10, threads, locals);
        for (int w = 0; w < 3; ++w) {
          gb[w][0].push_back(got[w].first), gb[w][1].push_back(got[w].second);
          ratio[w][0].push_back(got[w].first / got[0].first), ratio[w][1].push_back(got[w].second / got[0].second);
        }
      }
      std::printf("%-8d %6zuKi %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %7.2fx %7.2fx %7.2fx %7.2fx\n", threads, kib,
                  median(gb[0][0]), median(gb[1][0]), median(gb[2][0]), median(gb[0][1]), median(gb[1][1]),
                  median(gb[2][1]), median(ratio[1][0]), median(ratio[1][1]), median(ratio[2][0]), median(ratio[2][1]));
      std::fflush(stdout);
      nlohmann::json row{{"threads", threads}, {"block_bytes", kib << 10}, {"rounds", rounds}};
      for (const Way w : {Way::ProcessVm, Way::AsOwner, Way::ProcMem}) {
        const int i = static_cast<int>(w);
        row[std::string(name(w)) + "_read_gbps"] = median(gb[i][0]);
        row[std::string(name(w)) + "_write_gbps"] = median(gb[i][1]);
        row[std::string(name(w)) + "_read_ratio"] = median(ratio[i][0]);
        row[std::string(name(w)) + "_write_ratio"] = median(ratio[i][1]);
      }
      rows.push_back(row);
    }
  }
  kill(s.child, SIGKILL);
  waitpid(s.child, nullptr, 0);
  if (!json_out.empty())
    std::ofstream(json_out) << nlohmann::json{{"buffer_bytes", s.bytes}, {"rows", rows}}.dump(2) << "\n";
  return 0;
}
