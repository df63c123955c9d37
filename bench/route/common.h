#pragma once
// What every route benchmark application shares: its flags, the artificial
// memory work that sets the memory-to-communication ratio, the timed phase,
// the test hook that kills a rank, and the report (a table per rank, a summary,
// and JSON for route_bench.py).

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/route/engine.h"
#include "ferry/route/runtime.h"
#include "reduce.h"
#include "rng.h"
#include "work.h"

namespace ferry::route::bench {

struct CommonOptions {
  std::uint64_t work_per_message = 0;  // random 8-byte reads of the work table per message
  std::uint64_t work_table_mib = 64;   // larger than the caches, so each read is a DRAM access
  std::uint64_t progress_every = 64;   // sends between progress() calls
  std::uint64_t seed = 1;
  std::string json_out;
  bool quiet = false;
  int die_rank = -1;            // test hook: this rank _exit()s ...
  std::uint64_t die_after = 0;  // ... after this many sends
};

void add_common_flags(CLI::App& cli, CommonOptions& o);

// Runs an application's main and turns a ferry::Error (bad --route-* option,
// misuse of the engine) into "name: message" and exit status 2, instead of
// std::terminate. An Engine unwound by the exception aborts the MPI job with
// its own message, so the other ranks do not wait.
int guarded_main(const char* name, int (*app_main)(int, char**), int argc, char** argv);

// Parses argv (after the Runtime stripped --route-*). Returns -1 to go on, or
// the exit status (help, or a bad flag: every rank fails alike).
int parse(CLI::App& cli, int argc, char** argv, int rank);

// One application run: times the phase between start() and stop() (both
// collective, barrier-fenced), samples CPU time, and reports.
class Bench {
 public:
  // `work` gives the memory side of the memory-to-communication ratio.
  Bench(const char* app, Engine& engine, const CommonOptions& options, const Work& work);

  // Counts one send; progresses every progress_every, and fires the die hook.
  void sent_one() {
    if (++sends_ % options_.progress_every == 0) engine_.progress();
    if (sends_ == options_.die_after && engine_.rank() == options_.die_rank) die();
  }
  // Counts one send made by a handler, which must not call progress().
  void sent_in_handler() noexcept { ++sends_; }
  std::uint64_t sends() const noexcept { return sends_; }

  void start();  // barrier, then the clock starts
  void stop();   // barrier, then the clock stops

  // msg_bytes: payload of the app's main message type (for the ratio). params:
  // app parameters for the JSON. Prints, writes JSON on rank 0; returns the exit status.
  int report(bool verified, const std::string& detail, std::uint32_t msg_bytes,
             const std::string& params_json);

 private:
  [[noreturn]] void die();

  std::string app_;
  Engine& engine_;
  const Work& work_;
  std::uint64_t work_calls0_ = 0, work_calls_ = 0;
  CommonOptions options_;
  std::uint64_t sends_ = 0;
  double t0_ = 0, seconds_ = 0;
  std::uint64_t cpu0_ = 0, cpu_ = 0;
  RouterStats router0_{}, router1_{};
  Stats stats0_{}, stats1_{};
  bool have_router_ = false;
};

}  // namespace ferry::route::bench
