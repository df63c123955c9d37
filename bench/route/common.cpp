#include "common.h"

#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "ferry/core/status.h"

namespace ferry::route::bench {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::uint64_t cpu_ns_self() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);  // every thread of the process: thread mode's progress thread included
  auto ns = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ull +
           static_cast<std::uint64_t>(t.tv_usec) * 1000ull;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// Stats as (name, value) pairs, one list for JSON keys and for MPI gathers.
// The transport's counters, shared by the rank and router tables.
template <class F>
void each_wire_stat(WireStats& w, F&& f) {
  f("wire_buffers_sent", w.buffers_sent);
  f("wire_bytes_sent", w.bytes_sent);
  f("wire_buffers_received", w.buffers_received);
  f("wire_bytes_received", w.bytes_received);
  f("wire_timed_flushes", w.timed_flushes);
  f("wire_forced_flushes", w.forced_flushes);
  f("wire_frames_forwarded", w.frames_forwarded);
  f("wire_frames_local", w.frames_local);
  f("wire_send_slot_waits", w.send_slot_waits);
  f("wire_max_in_flight", w.max_in_flight);
  f("wire_rounds", w.rounds);
  f("wire_pool_buffers", w.pool_buffers);
  f("wire_capacity_bytes", w.capacity_bytes);
}

template <class F>
void each_stat(Stats& s, F&& f) {
  f("msgs_sent", s.msgs_sent);
  f("bytes_sent", s.bytes_sent);
  f("msgs_received", s.msgs_received);
  f("bytes_received", s.bytes_received);
  f("flushes", s.flushes);
  f("flush_bytes", s.flush_bytes);
  f("chunk_bytes", s.chunk_bytes);
  f("full_waits", s.full_waits);
  f("barriers", s.barriers);
  f("handler_ns", s.handler_ns);
  f("comm_ns", s.comm_ns);
  f("barrier_ns", s.barrier_ns);
  each_wire_stat(s.wire, f);
}

template <class F>
void each_router_stat(RouterStats& s, F&& f) {
  f("world_rank", s.world_rank);
  f("clients", s.clients);
  f("chunks_in", s.chunks_in);
  f("chunks_out", s.chunks_out);
  f("frames_routed", s.frames_routed);
  f("pending_max", s.pending_max);
  f("busy_loops", s.busy_loops);
  f("idle_loops", s.idle_loops);
  f("cpu_ns", s.cpu_ns);
  each_wire_stat(s.wire, f);
}

// Phase deltas: counters subtract, maxima and capacities keep the end value.
bool is_level(const char* name) {
  const std::string n = name;
  return n.find("max") != std::string::npos || n.find("capacity") != std::string::npos ||
         n.find("pool_buffers") != std::string::npos || n == "chunk_bytes" || n == "clients" ||
         n == "world_rank";
}

template <class T, class Each>
std::vector<std::uint64_t> delta(T a, T b, Each each) {
  std::vector<std::uint64_t> va, vb;
  std::vector<bool> level;
  each(a, [&](const char*, std::uint64_t& v) { va.push_back(v); });
  each(b, [&](const char* n, std::uint64_t& v) {
    vb.push_back(v);
    level.push_back(is_level(n));
  });
  for (std::size_t i = 0; i < va.size(); ++i) vb[i] = level[i] ? vb[i] : vb[i] - va[i];
  return vb;
}

template <class T, class Each>
std::vector<std::string> names(Each each) {
  T t{};
  std::vector<std::string> out;
  each(t, [&](const char* n, std::uint64_t&) { out.emplace_back(n); });
  return out;
}

}  // namespace

void add_common_flags(CLI::App& cli, CommonOptions& o) {
  cli.add_option(
      "--work-per-message", o.work_per_message,
      "random 8-byte DRAM reads of the work table per message (sweeps the memory-to-communication ratio)");
  cli.add_option("--work-table-mib", o.work_table_mib, "size of the work table per rank");
  cli.add_option("--progress-every", o.progress_every, "sends between progress() calls")
      ->check(CLI::PositiveNumber);
  cli.add_option("--seed", o.seed, "seed of every random choice (results are reproducible)");
  cli.add_option("--json-out", o.json_out, "write the results as JSON here (rank 0)");
  cli.add_flag("--quiet", o.quiet, "only the summary line");
  cli.add_option("--test-die-rank", o.die_rank, "test hook: this rank exits abruptly ...");
  cli.add_option("--test-die-after", o.die_after, "... after this many sends");
}

int guarded_main(const char* name, int (*app_main)(int, char**), int argc, char** argv) {
  try {
    return app_main(argc, argv);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 2;
  }
}

int parse(CLI::App& cli, int argc, char** argv, int rank) {
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) return cli.exit(e);
    return e.get_exit_code();
  }
  return -1;
}

Bench::Bench(const char* app, Engine& engine, const CommonOptions& options, const Work& work)
    : app_(app), engine_(engine), work_(work), options_(options) {}

void Bench::die() {
  std::fprintf(stderr, "%s: rank %d exits abruptly after %llu sends (--test-die-rank)\n", app_.c_str(),
               engine_.rank(), static_cast<unsigned long long>(sends_));
  std::fflush(stderr);
  _exit(3);
}

void Bench::start() {
  engine_.barrier();
  MPI_Barrier(engine_.comm());
  stats0_ = engine_.stats();
  have_router_ = engine_.router_stats(&router0_);
  cpu0_ = cpu_ns_self();
  work_calls0_ = work_.calls();
  t0_ = now_s();
}

void Bench::stop() {
  engine_.barrier();
  seconds_ = now_s() - t0_;
  cpu_ = cpu_ns_self() - cpu0_;
  work_calls_ = work_.calls() - work_calls0_;
  stats1_ = engine_.stats();
  if (have_router_) engine_.router_stats(&router1_);
  MPI_Barrier(engine_.comm());
}

int Bench::report(bool verified, const std::string& detail, std::uint32_t msg_bytes,
                  const std::string& params_json) {
  MPI_Comm comm = engine_.comm();
  const int rank = engine_.rank(), size = engine_.size();
  // Gather every rank's phase statistics, its CPU time and its router's.
  std::vector<std::uint64_t> mine = delta(stats0_, stats1_, [](Stats& s, auto f) { each_stat(s, f); });
  mine.push_back(cpu_);
  mine.push_back(static_cast<std::uint64_t>(seconds_ * 1e9));
  std::vector<std::uint64_t> rmine =
      delta(router0_, router1_, [](RouterStats& s, auto f) { each_router_stat(s, f); });
  rmine.push_back(have_router_ ? 1 : 0);
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(size));
  std::vector<std::uint64_t> rall(rmine.size() * static_cast<std::size_t>(size));
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
             static_cast<int>(mine.size()), MPI_UINT64_T, 0, comm);
  MPI_Gather(rmine.data(), static_cast<int>(rmine.size()), MPI_UINT64_T, rall.data(),
             static_cast<int>(rmine.size()), MPI_UINT64_T, 0, comm);
  const bool all_verified = all_true(comm, verified);
  const std::uint64_t work_calls = sum_u64(comm, work_calls_);
  if (rank != 0) return all_verified ? 0 : 1;

  const auto snames = names<Stats>([](Stats& s, auto f) { each_stat(s, f); });
  const auto rnames = names<RouterStats>([](RouterStats& s, auto f) { each_router_stat(s, f); });
  const std::size_t ns = mine.size(), nr = rmine.size();
  auto stat = [&](int r, const std::string& n) {
    const auto i = static_cast<std::size_t>(std::find(snames.begin(), snames.end(), n) - snames.begin());
    return all[static_cast<std::size_t>(r) * ns + i];
  };
  nlohmann::json j;
  j["app"] = app_;
  j["mode"] = to_string(engine_.mode());
  j["ranks"] = size;
  j["options"] = engine_.options().describe();
  j["params"] = nlohmann::json::parse(params_json);
  j["work_per_message"] = options_.work_per_message;
  j["work_table_mib"] = options_.work_table_mib;
  j["msg_bytes"] = msg_bytes;
  j["work_calls"] = work_calls;
  j["verified"] = all_verified;
  j["detail"] = detail;

  double seconds = 0, app_cpu = 0, handler = 0, comm_s = 0, barrier_s = 0;
  std::uint64_t msgs = 0, bytes = 0, received = 0;
  nlohmann::json per_rank = nlohmann::json::array();
  if (!options_.quiet)
    std::printf("%-5s %12s %12s %14s %9s %6s %10s %10s %10s\n", "rank", "sent", "received", "bytes sent",
                "flushes", "occ%", "handler ms", "comm ms", "cpu ms");
  for (int r = 0; r < size; ++r) {
    nlohmann::json e;
    for (std::size_t i = 0; i < snames.size(); ++i) e[snames[i]] = all[static_cast<std::size_t>(r) * ns + i];
    const std::uint64_t cpu = all[static_cast<std::size_t>(r) * ns + snames.size()];
    const double secs = static_cast<double>(all[static_cast<std::size_t>(r) * ns + snames.size() + 1]) / 1e9;
    e["cpu_ns"] = cpu;
    e["seconds"] = secs;
    per_rank.push_back(e);
    seconds = std::max(seconds, secs);
    app_cpu += static_cast<double>(cpu) / 1e9;
    handler += static_cast<double>(stat(r, "handler_ns")) / 1e9;
    comm_s += static_cast<double>(stat(r, "comm_ns")) / 1e9;
    barrier_s += static_cast<double>(stat(r, "barrier_ns")) / 1e9;
    msgs += stat(r, "msgs_sent");
    bytes += stat(r, "bytes_sent");
    received += stat(r, "msgs_received");
    const double occ = stat(r, "flushes") == 0
                           ? 0.0
                           : 100.0 * static_cast<double>(stat(r, "flush_bytes")) /
                                 (static_cast<double>(stat(r, "flushes")) *
                                  static_cast<double>(std::max<std::uint64_t>(1, stat(r, "chunk_bytes"))));
    if (!options_.quiet)
      std::printf("%-5d %12llu %12llu %14llu %9llu %6.1f %10.2f %10.2f %10.2f\n", r,
                  static_cast<unsigned long long>(stat(r, "msgs_sent")),
                  static_cast<unsigned long long>(stat(r, "msgs_received")),
                  static_cast<unsigned long long>(stat(r, "bytes_sent")),
                  static_cast<unsigned long long>(stat(r, "flushes")), occ, stat(r, "handler_ns") / 1e6,
                  stat(r, "comm_ns") / 1e6, static_cast<double>(cpu) / 1e6);
  }
  // Routers: one per node; every app of a node reports the same one.
  nlohmann::json routers = nlohmann::json::array();
  std::vector<std::uint64_t> seen;
  double router_cpu = 0;
  for (int r = 0; r < size; ++r) {
    const std::uint64_t* v = &rall[static_cast<std::size_t>(r) * nr];
    if (v[nr - 1] == 0) continue;
    if (std::find(seen.begin(), seen.end(), v[0]) != seen.end()) continue;
    seen.push_back(v[0]);
    nlohmann::json e;
    for (std::size_t i = 0; i < rnames.size(); ++i) e[rnames[i]] = v[i];
    router_cpu += static_cast<double>(e["cpu_ns"].get<std::uint64_t>()) / 1e9;
    if (!options_.quiet)
      std::printf("router (world rank %llu): %llu messages routed, %llu MPI buffers sent, cpu %.2f ms\n",
                  static_cast<unsigned long long>(v[0]),
                  static_cast<unsigned long long>(e["frames_routed"].get<std::uint64_t>()),
                  static_cast<unsigned long long>(e["wire_buffers_sent"].get<std::uint64_t>()),
                  static_cast<double>(e["cpu_ns"].get<std::uint64_t>()) / 1e6);
    routers.push_back(e);
  }
  j["per_rank"] = per_rank;
  j["routers"] = routers;
  j["seconds"] = seconds;
  j["messages"] = msgs;
  j["messages_received"] = received;
  j["bytes"] = bytes;
  j["msgs_per_s"] = seconds > 0 ? static_cast<double>(msgs) / seconds : 0.0;
  j["bytes_per_s"] = seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
  // The memory-to-communication ratio: bytes of the application's own memory
  // traffic (one 64-byte line per random read) per byte of message payload,
  // both over the timed phase.
  j["mem_bytes"] = work_calls * options_.work_per_message * 64;
  j["mem_comm_ratio"] = bytes > 0 ? static_cast<double>(work_calls * options_.work_per_message * 64) /
                                        static_cast<double>(bytes)
                                  : 0.0;
  j["cpu_app_s"] = app_cpu;
  j["cpu_router_s"] = router_cpu;
  j["cpu_ns_per_msg"] = msgs > 0 ? (app_cpu + router_cpu) * 1e9 / static_cast<double>(msgs) : 0.0;
  j["handler_s"] = handler;
  j["comm_s"] = comm_s;
  j["barrier_s"] = barrier_s;
  std::printf(
      "%s mode=%s ranks=%d routers=%zu work=%llu (mem/comm %.1f): %s in %.3f s, %llu msgs (%.2f M msg/s, "
      "%.1f MB/s), cpu %.0f ns/msg, "
      "comm %.3f s, handlers %.3f s%s%s\n",
      app_.c_str(), to_string(engine_.mode()), size, routers.size(),
      static_cast<unsigned long long>(options_.work_per_message), j["mem_comm_ratio"].get<double>(),
      all_verified ? "VERIFIED" : "FAILED", seconds, static_cast<unsigned long long>(msgs),
      j["msgs_per_s"].get<double>() / 1e6, j["bytes_per_s"].get<double>() / 1e6,
      j["cpu_ns_per_msg"].get<double>(), comm_s, handler, detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stdout);
  if (!options_.json_out.empty()) {
    std::ofstream f(options_.json_out);
    f << j.dump(2) << "\n";
    if (!f) std::fprintf(stderr, "cannot write %s\n", options_.json_out.c_str());
  }
  return all_verified ? 0 : 1;
}

}  // namespace ferry::route::bench
