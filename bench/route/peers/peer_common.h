#pragma once
// What the peer-library versions of the route applications share (YGM's and
// bale's conveyors'): the same flags as Ferry's apps (common.h), the same
// artificial memory work, the timed phase and the report (summary line and
// JSON). Ferry's own Bench (common.cpp) needs an Engine; this one needs only
// MPI, which both peer libraries run on. The random streams are rng.h's, shared
// with Ferry's apps, so the same flags give the same messages.
//
// Timed phase, as Ferry's Bench: barrier, clock, the send loop and the
// library's completion (a YGM barrier, a conveyor loop that reached DONE),
// barrier, clock; the run's seconds are the maximum over the ranks.

#include <mpi.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../reduce.h"
#include "../rng.h"
#include "../work.h"

namespace ferry::route::bench::peers {

// Ferry's CommonOptions less its --route-* options and test hooks.
struct PeerOptions {
  std::uint64_t work_per_message = 0;  // random 8-byte reads of the work table per message
  std::uint64_t work_table_mib = 64;   // larger than the caches, so each read is a DRAM access
  std::uint64_t progress_every =
      64;  // accepted for the same command lines; the libraries progress on their own
  std::uint64_t seed = 1;
  std::string json_out;
  bool quiet = false;
};

inline void add_common_flags(CLI::App& cli, PeerOptions& o) {
  cli.add_option(
      "--work-per-message", o.work_per_message,
      "random 8-byte DRAM reads of the work table per message (sweeps the memory-to-communication ratio)");
  cli.add_option("--work-table-mib", o.work_table_mib, "size of the work table per rank");
  cli.add_option("--progress-every", o.progress_every,
                 "accepted for Ferry's command lines and ignored: the library makes progress on its own")
      ->check(CLI::PositiveNumber);
  cli.add_option("--seed", o.seed, "seed of every random choice (results are reproducible)");
  cli.add_option("--json-out", o.json_out, "write the results as JSON here (rank 0)");
  cli.add_flag("--quiet", o.quiet, "only the summary line");
}

// Returns -1 to go on, or the exit status (help, or a bad flag: every rank fails alike).
inline int parse(CLI::App& cli, int argc, char** argv, int rank) {
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) return cli.exit(e);
    return e.get_exit_code();
  }
  return -1;
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::uint64_t cpu_ns_self() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);  // every thread of the process
  auto ns = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ull +
           static_cast<std::uint64_t>(t.tv_usec) * 1000ull;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// What a rank did in the timed phase, counted by the application itself (the
// libraries do not count alike): messages it sent and received, and their
// payload bytes (the message structs, as Ferry's msg_bytes).
struct Traffic {
  std::uint64_t sent = 0, received = 0, bytes_sent = 0;
};

// One application run: the timed phase and the report.
class Bench {
 public:
  // library: "ygm" or "convey"; config: the library's settings in words (JSON "options").
  Bench(const char* app, const char* library, const PeerOptions& options, const Work& work,
        MPI_Comm comm = MPI_COMM_WORLD)
      : app_(app), library_(library), options_(options), work_(work), comm_(comm) {}

  void start() {  // barrier, then the clock starts
    MPI_Barrier(comm_);
    cpu0_ = cpu_ns_self();
    work_calls0_ = work_.calls();
    t0_ = now_s();
  }
  // Call after the library's own completion (YGM barrier, conveyor DONE):
  // barrier, then the clock stops.
  void stop() {
    MPI_Barrier(comm_);
    seconds_ = now_s() - t0_;
    cpu_ = cpu_ns_self() - cpu0_;
    work_calls_ = work_.calls() - work_calls0_;
  }
  double seconds() const noexcept { return seconds_; }

  // main_per_rank: the app's main messages per rank (updates, requests, items),
  // the unit of peers_bench.py's rate. Prints, writes JSON on rank 0; returns
  // the exit status (1 when any rank's verification failed).
  int report(bool verified, const std::string& detail, std::uint32_t msg_bytes,
             const std::string& params_json, std::uint64_t main_per_rank, const Traffic& traffic,
             const std::string& config, const nlohmann::json& library_stats = nlohmann::json::object()) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm_, &rank);
    MPI_Comm_size(comm_, &size);
    const std::uint64_t mine[] = {traffic.sent, traffic.received, traffic.bytes_sent, cpu_,
                                  static_cast<std::uint64_t>(seconds_ * 1e9)};
    constexpr std::size_t n = sizeof mine / sizeof mine[0];
    std::vector<std::uint64_t> all(n * static_cast<std::size_t>(size));
    MPI_Gather(mine, static_cast<int>(n), MPI_UINT64_T, all.data(), static_cast<int>(n), MPI_UINT64_T, 0,
               comm_);
    const bool all_verified = all_true(comm_, verified);
    const std::uint64_t work_calls = sum_u64(comm_, work_calls_);
    if (rank != 0) return all_verified ? 0 : 1;

    nlohmann::json j;
    j["app"] = app_;
    j["library"] = library_;
    j["ranks"] = size;
    j["options"] = config;
    j["params"] = nlohmann::json::parse(params_json);
    j["work_per_message"] = options_.work_per_message;
    j["work_table_mib"] = options_.work_table_mib;
    j["msg_bytes"] = msg_bytes;
    j["work_calls"] = work_calls;
    j["verified"] = all_verified;
    j["detail"] = detail;
    double seconds = 0, app_cpu = 0;
    std::uint64_t msgs = 0, received = 0, bytes = 0;
    nlohmann::json per_rank = nlohmann::json::array();
    if (!options_.quiet)
      std::printf("%-5s %12s %12s %14s %10s %10s\n", "rank", "sent", "received", "bytes sent", "cpu ms", "s");
    for (int r = 0; r < size; ++r) {
      const std::uint64_t* v = &all[static_cast<std::size_t>(r) * n];
      const double secs = static_cast<double>(v[4]) / 1e9;
      per_rank.push_back({{"msgs_sent", v[0]},
                          {"msgs_received", v[1]},
                          {"bytes_sent", v[2]},
                          {"cpu_ns", v[3]},
                          {"seconds", secs}});
      seconds = std::max(seconds, secs);
      app_cpu += static_cast<double>(v[3]) / 1e9;
      msgs += v[0];
      received += v[1];
      bytes += v[2];
      if (!options_.quiet)
        std::printf("%-5d %12llu %12llu %14llu %10.2f %10.4f\n", r, static_cast<unsigned long long>(v[0]),
                    static_cast<unsigned long long>(v[1]), static_cast<unsigned long long>(v[2]),
                    static_cast<double>(v[3]) / 1e6, secs);
    }
    j["per_rank"] = per_rank;
    j["library_stats"] = library_stats;
    j["seconds"] = seconds;
    j["messages"] = msgs;
    j["messages_received"] = received;
    j["bytes"] = bytes;
    j["msgs_per_s"] = seconds > 0 ? static_cast<double>(msgs) / seconds : 0.0;
    j["bytes_per_s"] = seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
    j["main_per_rank"] = main_per_rank;
    j["main_per_rank_per_s"] = seconds > 0 ? static_cast<double>(main_per_rank) / seconds : 0.0;
    j["mem_bytes"] = work_calls * options_.work_per_message * 64;
    j["mem_comm_ratio"] = bytes > 0 ? static_cast<double>(work_calls * options_.work_per_message * 64) /
                                          static_cast<double>(bytes)
                                    : 0.0;
    j["cpu_app_s"] = app_cpu;
    j["cpu_ns_per_msg"] = msgs > 0 ? app_cpu * 1e9 / static_cast<double>(msgs) : 0.0;
    std::printf(
        "%s library=%s ranks=%d work=%llu (mem/comm %.1f): %s in %.3f s, %llu msgs (%.2f M msg/s, %.1f MB/s, "
        "%.2f M/s per rank), cpu %.0f ns/msg%s%s\n",
        app_.c_str(), library_.c_str(), size, static_cast<unsigned long long>(options_.work_per_message),
        j["mem_comm_ratio"].get<double>(), all_verified ? "VERIFIED" : "FAILED", seconds,
        static_cast<unsigned long long>(msgs), j["msgs_per_s"].get<double>() / 1e6,
        j["bytes_per_s"].get<double>() / 1e6, j["main_per_rank_per_s"].get<double>() / 1e6,
        j["cpu_ns_per_msg"].get<double>(), detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stdout);
    if (!options_.json_out.empty()) {
      std::ofstream f(options_.json_out);
      f << j.dump(2) << "\n";
      if (!f) std::fprintf(stderr, "cannot write %s\n", options_.json_out.c_str());
    }
    return all_verified ? 0 : 1;
  }

 private:
  std::string app_, library_;
  PeerOptions options_;
  const Work& work_;
  MPI_Comm comm_;
  double t0_ = 0, seconds_ = 0;
  std::uint64_t cpu0_ = 0, cpu_ = 0, work_calls0_ = 0, work_calls_ = 0;
};

}  // namespace ferry::route::bench::peers
