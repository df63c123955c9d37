#include "bench/launch/launch_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/launch/gpu_probes.h"
#include "ferry/core/arena.h"
#include "core/latency_histogram.h"
#include "ferry/core/status.h"
#include "ferry/worker/backend.h"
#include "ferry/worker/builtin_handlers.h"

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One running method: an arena and its workers.
struct Setup {
  std::unique_ptr<Arena> arena;  // the backend keeps its address: never moved
  std::unique_ptr<worker::Backend> backend;
  // The producer side of every channel; kept across measurements, since a ring
  // continues from where the last one left it.
  std::vector<RingProducer> requests;
  std::vector<RingConsumer> responses;
};

Setup start_method(const std::string& method, const LaunchBenchOptions& opts, std::uint32_t burst) {
  ArenaParams p;
  p.num_channels = opts.channels;
  p.max_concurrent_messages = 2 * *std::max_element(opts.bursts.begin(), opts.bursts.end());
  p.max_message_length = *std::max_element(opts.sizes.begin(), opts.sizes.end()) + 4;
  worker::WorkerOptions w;
  w.backend = method == "cpu" ? worker::BackendKind::Cpu : worker::BackendKind::Cuda;
  w.launch = worker::parse_launch(method);
  w.gpu = opts.gpu;
  w.burst = burst;
  w.burst_timeout_us = 20;
  w.idle_sleep_max_us = opts.idle_sleep_max_us;
  p.backend = method == "cpu" ? ArenaBackend::Cpu : ArenaBackend::Cuda;
  Setup s{std::make_unique<Arena>(Arena::create(p, "ferry-bench-launch")), nullptr, {}, {}};
  for (std::uint32_t c = 0; c < p.num_channels; ++c) {
    s.requests.emplace_back(s.arena->channel(c).requests);
    s.responses.emplace_back(s.arena->channel(c).responses);
  }
  s.backend = worker::make_builtin_backend("reverse", w);
  s.backend->prepare(*s.arena);
  s.backend->start();
  return s;
}

void check_health(const Setup& s) {
  const std::string f = s.backend->failure();
  if (!f.empty()) throw Error("worker failed: " + f);
}

// A request's bytes are a function of (channel, sequence), so a response can be checked.
void fill(std::uint8_t* p, std::uint32_t n, std::uint64_t seq) {
  for (std::uint32_t j = 0; j < n; ++j) p[j] = static_cast<std::uint8_t>(seq * 31 + j * 7);
}
bool reversed_ok(ByteView r, std::uint32_t n, std::uint64_t seq) {
  if (r.size != n) return false;
  for (std::uint32_t j = 0; j < n; ++j)
    if (r[n - 1 - j] != static_cast<std::uint8_t>(seq * 31 + j * 7)) return false;
  return true;
}

struct LatencyResult {
  double p50_us, p99_us;
};

LatencyResult measure_latency(Setup& s, std::uint64_t round_trips) {
  RingProducer& req = s.requests[0];
  RingConsumer& resp = s.responses[0];
  LatencyHistogram hist;
  const std::uint64_t warm = 1000;
  for (std::uint64_t i = 0; i < warm + round_trips; ++i) {
    const auto t0 = Clock::now();
    MutableByteView slot;
    while ((slot = req.try_claim()).data == nullptr) {
    }
    fill(slot.data, 64, i);
    req.publish(64, i);
    SlotMessage m;
    const auto deadline = t0 + std::chrono::seconds(5);
    while (!resp.try_peek(&m)) {
      if (Clock::now() > deadline) {
        check_health(s);
        throw Error("no response within 5 s (round trip " + std::to_string(i) + ")");
      }
    }
    const auto t1 = Clock::now();
    if (!reversed_ok(m.payload, 64, i) || m.cookie != i) throw Error("wrong response in the latency test");
    resp.advance();
    resp.release();
    req.observe_consumed(resp.next_index());  // as the server does: response k frees request slot k
    if (i >= warm) hist.record(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  }
  return {hist.percentile_ns(50) / 1e3, hist.percentile_ns(99) / 1e3};
}

// Every producer posts `burst` requests, then collects their responses, in a
// loop for `seconds`. Returns messages per second over all channels.
double measure_throughput(Setup& s, std::uint32_t size, std::uint32_t burst, double seconds) {
  const std::uint32_t n = s.arena->num_channels();
  std::atomic<bool> go{false};
  std::atomic<std::uint64_t> total{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> producers;
  Clock::time_point t_start, t_end;
  for (std::uint32_t c = 0; c < n; ++c) {
    producers.emplace_back([&, c] {
      RingProducer& req = s.requests[c];
      RingConsumer& resp = s.responses[c];
      while (!go.load(std::memory_order_acquire)) {
      }
      const auto end = Clock::now() + std::chrono::duration<double>(seconds);
      std::uint64_t done = 0;
      std::uint64_t seq = std::uint64_t(c) << 40;  // cookies differ across channels
      while (Clock::now() < end && !bad.load(std::memory_order_relaxed)) {
        const std::uint64_t first = seq;
        for (std::uint32_t b = 0; b < burst; ++b) {
          MutableByteView slot;
          while ((slot = req.try_claim()).data == nullptr) {
          }
          fill(slot.data, size, seq);
          req.publish(size, seq++);
        }
        const auto deadline = Clock::now() + std::chrono::seconds(5);
        for (std::uint32_t b = 0; b < burst; ++b) {
          SlotMessage m;
          while (!resp.try_peek(&m)) {
            if (Clock::now() > deadline) {
              bad.store(true);
              return;
            }
          }
          // Check the first and last response of every burst, byte for byte.
          if ((b == 0 || b == burst - 1) && (m.cookie != first + b || !reversed_ok(m.payload, size, first + b)))
            bad.store(true);
          resp.advance();
        }
        resp.release();
        req.observe_consumed(resp.next_index());
        done += burst;
      }
      total.fetch_add(done);
    });
  }
  t_start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  t_end = Clock::now();
  check_health(s);
  if (bad.load()) throw Error("a response was wrong or missing (size " + std::to_string(size) + ", burst " +
                              std::to_string(burst) + ")");
  return double(total.load()) / std::chrono::duration<double>(t_end - t_start).count();
}

// The persistent kernel's lone request step by step (gpu_probes.h): each
// step's cost in the round trip, and the GPU's own time between the steps.
// False when a checked answer was wrong.
bool print_serve_steps(const ServeSteps& s, nlohmann::json& out) {
  static constexpr const char* kNames[ServeSteps::kSteps] = {"relaxed poll, relaxed answer (the floor)",
                                                             "+ acquire poll",
                                                             "+ cookie and payload read",
                                                             "+ handler writes the response",
                                                             "+ descriptor, release fence, seq, tail",
                                                             "+ tail by a second release",
                                                             "payload read with the poll, checked"};
  static constexpr const char* kKeys[ServeSteps::kSteps] = {"relaxed", "acquire_poll", "payload", "handler",
                                                            "publish", "tail_release", "checked"};
  std::printf("\nthe persistent kernel's lone request, step by step (64 B; SM clock %.2f GHz):\n",
              s.sm_clock_ghz);
  std::printf("  %-42s %9s %9s   %s\n", "variant", "rtt p50", "step",
              "GPU ns: payload read, handler, fence, stores");
  for (int i = 0; i < ServeSteps::kSteps; ++i) {
    const double step = i == 0 ? s.round_trip_p50_us[0] : s.round_trip_p50_us[i] - s.round_trip_p50_us[i - 1];
    std::printf("  %-42s %7.2fus %+7.2fus", kNames[i], s.round_trip_p50_us[i], step);
    if (i >= 2)
      std::printf("   %.0f, %.0f, %.0f, %.0f", s.gpu_ns[i][0], s.gpu_ns[i][1], s.gpu_ns[i][2],
                  s.gpu_ns[i][3]);
    std::printf("\n");
    out["serve_steps"][kKeys[i]] = {
        {"rtt_p50_us", s.round_trip_p50_us[i]},   {"step_us", step},
        {"gpu_payload_read_ns", s.gpu_ns[i][0]},  {"gpu_handler_ns", s.gpu_ns[i][1]},
        {"gpu_publish_fence_ns", s.gpu_ns[i][2]}, {"gpu_stores_after_fence_ns", s.gpu_ns[i][3]}};
  }
  std::printf("  (the last: %.1f%% of requests answered from the poll's own read)\n", 100 * s.checked_taken);
  out["serve_steps"]["checked_taken"] = s.checked_taken;
  out["serve_steps"]["sm_clock_ghz"] = s.sm_clock_ghz;
  out["serve_steps"]["wrong_responses"] = s.wrong_responses;
  if (s.wrong_responses != 0)
    std::printf("  %llu WRONG RESPONSES\n", static_cast<unsigned long long>(s.wrong_responses));
  return s.wrong_responses == 0;
}

// The graph and memops methods' lone request step by step (gpu_probes.h).
// False when a published answer was wrong.
bool print_batched_steps(const BatchedSteps& s, nlohmann::json& out) {
  // Each variant's step is against the one it adds to (base).
  struct Variant {
    const char* name;
    const char* key;
    int base;
  };
  static constexpr Variant kGraph[BatchedSteps::kGraphSteps] = {
      {"one-node graph, empty kernel, synchronize", "minimal", -1},
      {"+ 128 threads read the posted batch", "read_batch", 0},
      {"+ a warp publishes, the host polls it", "publish", 1},
      {"batch in the node's parameters, not read", "node_params", 0},
      {"2 + a second thread polls the events", "event_poller", 2},
      {"2 + it polls a stream write instead", "stream_write_poller", 2}};
  static constexpr Variant kMemops[BatchedSteps::kMemopsSteps] = {
      {"wait, empty kernel, write; one posted", "minimal", -1},
      {"64 posted ahead, re-armed after", "posted_ahead", 0},
      {"+ the kernel reads the posted batch", "read_batch", 1},
      {"+ a warp publishes, the host polls it", "publish", 2},
      {"3, re-armed by a second thread", "second_thread_rearms", 3},
      {"4, next round after the done word", "next_after_done", 4}};
  std::printf("\nthe graph and memops methods' lone request, step by step (64 B):\n");
  std::printf("  %-46s %9s %9s\n", "variant", "rtt p50", "step");
  const auto rows = [&](const char* method, const double* us, const Variant* variants, int n) {
    for (int i = 0; i < n; ++i) {
      const Variant& v = variants[i];
      const double step = v.base < 0 ? us[i] : us[i] - us[v.base];
      std::printf("  %-6s %-39s %7.2fus %+7.2fus\n", method, v.name, us[i], step);
      out["batched_steps"][method][v.key] = {{"rtt_p50_us", us[i]}, {"step_us", step}};
    }
  };
  rows("graph", s.graph_us, kGraph, BatchedSteps::kGraphSteps);
  rows("memops", s.memops_us, kMemops, BatchedSteps::kMemopsSteps);
  out["batched_steps"]["wrong_responses"] = s.wrong_responses;
  if (s.wrong_responses != 0)
    std::printf("  %llu WRONG RESPONSES\n", static_cast<unsigned long long>(s.wrong_responses));
  return s.wrong_responses == 0;
}

}  // namespace

int run_launch_bench(const LaunchBenchOptions& opts) {
  nlohmann::json out;
  char host[256] = "";
  gethostname(host, sizeof(host));
  const std::string gpu = gpu_name(opts.gpu);
  out["host"] = host;
  out["cpus"] = std::thread::hardware_concurrency();
  out["gpu"] = gpu.empty() ? "none" : gpu;
  out["channels"] = opts.channels;
  out["seconds_per_point"] = opts.seconds_per_point;
  out["idle_sleep_max_us"] = opts.idle_sleep_max_us;
  std::printf("ferry bench launch: %s, %u CPU threads, %u channels (one producer thread each)\n",
              gpu.empty() ? "no GPU" : gpu.c_str(), std::thread::hardware_concurrency(), opts.channels);

  std::optional<FloorResult> floor;
  std::optional<MinimalMechanisms> minimal;
  if (!gpu.empty()) {
    floor = measure_floor(opts.gpu, opts.latency_round_trips, PingPongOrder::Relaxed);
    out["floor"] = {{"p50_us", floor->p50_us}, {"p99_us", floor->p99_us}, {"min_us", floor->min_us}};
    std::printf(
        "\nhardware floor (the minimal persistent-kernel ping-pong of one word via mapped host memory, "
        "relaxed): p50 %.2f us, p99 %.2f us, min %.2f us\n",
        floor->p50_us, floor->p99_us, floor->min_us);
    const auto ordered = measure_floor(opts.gpu, opts.latency_round_trips, PingPongOrder::AcquireRelease);
    out["floor_acquire_release"] = {{"p50_us", ordered->p50_us}, {"p99_us", ordered->p99_us}};
    std::printf(
        "the same ping-pong with acquire loads and release stores (a ring's ordering): p50 %.2f us, "
        "p99 %.2f us\n",
        ordered->p50_us, ordered->p99_us);
    const auto h = measure_handler_throughput(opts.gpu);
    out["handler_1k"] = {{"messages", h->messages},       {"device_copy_gbs", h->device_copy_gbs},
                         {"naive_gbs", h->naive_gbs},     {"warp_gbs", h->warp_gbs},
                         {"warp_fraction_of_copy", h->warp_gbs / h->device_copy_gbs},
                         {"naive_fraction_of_copy", h->naive_gbs / h->device_copy_gbs},
                         {"verified", h->verified}};
    std::printf("handler on %u x 1 KiB in device memory: device copy %.0f GB/s; naive thread-per-message %.0f GB/s (%.1f%%); "
                "warp-per-message %.0f GB/s (%.1f%%)%s\n",
                h->messages, h->device_copy_gbs, h->naive_gbs, 100 * h->naive_gbs / h->device_copy_gbs, h->warp_gbs,
                100 * h->warp_gbs / h->device_copy_gbs, h->verified ? "" : "  OUTPUT WRONG");
    if (!h->verified) return 1;
    minimal = measure_minimal_mechanisms(opts.gpu, opts.latency_round_trips);
    out["minimal"] = {{"launch_sync_p50_us", minimal->launch_sync_us},
                      {"graph_sync_p50_us", minimal->graph_sync_us},
                      {"memops_p50_us", minimal->memops_us}};
    std::printf(
        "minimal mechanisms, an empty kernel's round trip p50: launch + synchronize %.2f us; one-node graph "
        "launch + synchronize %.2f us; stream wait + kernel + stream write %.2f us\n",
        minimal->launch_sync_us, minimal->graph_sync_us, minimal->memops_us);
    if (!print_serve_steps(*measure_serve_steps(opts.gpu, opts.latency_round_trips), out)) return 1;
    if (!print_batched_steps(*measure_batched_steps(opts.gpu, opts.latency_round_trips), out)) return 1;
  }

  std::printf("\n%-11s %9s %9s %9s %7s", "method", "rtt p50", "rtt p99", "x floor", "x min");
  for (auto b : opts.bursts) std::printf(" %8s", ("b" + std::to_string(b)).c_str());
  std::printf("   (Mmsg/s at each burst; size in bytes)\n");
  for (const auto& method : opts.methods) {
    if (method != "cpu" && gpu.empty()) {
      std::printf("%-11s skipped: no GPU\n", method.c_str());
      continue;
    }
    nlohmann::json m;
    const bool batched = method == "burst" || method == "graph" || method == "memops";
    Setup latency_setup = start_method(method, opts, batched ? 1 : 32);
    const LatencyResult lat = measure_latency(latency_setup, opts.latency_round_trips);
    latency_setup.backend->stop();
    m["rtt_p50_us"] = lat.p50_us;
    m["rtt_p99_us"] = lat.p99_us;
    if (floor) m["rtt_p50_over_floor"] = lat.p50_us / floor->p50_us;
    // Each batched method against the minimal mechanism it is built on.
    double minimal_us = 0;
    if (minimal && method == "burst") minimal_us = minimal->launch_sync_us;
    if (minimal && method == "graph") minimal_us = minimal->graph_sync_us;
    if (minimal && method == "memops") minimal_us = minimal->memops_us;
    if (minimal_us > 0) m["rtt_p50_over_minimal"] = lat.p50_us / minimal_us;
    for (auto size : opts.sizes) {
      std::printf("%-11s %7.2fus %7.2fus %9s %7s", (method + "/" + std::to_string(size)).c_str(), lat.p50_us,
                  lat.p99_us, floor ? std::to_string(lat.p50_us / floor->p50_us).substr(0, 4).c_str() : "-",
                  minimal_us > 0 ? std::to_string(lat.p50_us / minimal_us).substr(0, 4).c_str() : "-");
      std::optional<Setup> shared;
      if (!batched) shared.emplace(start_method(method, opts, 32));
      for (auto burst : opts.bursts) {
        std::optional<Setup> own;
        // The batched methods launch one kernel per burst: their --burst follows the point.
        if (batched) own.emplace(start_method(method, opts, burst));
        Setup& s = batched ? *own : *shared;
        const double rate = measure_throughput(s, size, burst, opts.seconds_per_point);
        if (batched) own->backend->stop();
        m["throughput"][std::to_string(size)][std::to_string(burst)] = {{"msgs_per_s", rate},
                                                                         {"gb_per_s", rate * size / 1e9}};
        std::printf(" %8.2f", rate / 1e6);
        std::fflush(stdout);
      }
      if (shared) shared->backend->stop();
      std::printf("\n");
    }
    out["methods"][method] = m;
  }
  std::ofstream(opts.json_out) << out.dump(2) << "\n";
  std::printf("\nwrote %s\n", opts.json_out.c_str());
  return 0;
}

}  // namespace ferry::bench
