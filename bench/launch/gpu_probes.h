#pragma once
// GPU measurements of the launch benchmark that need kernels of their own: the
// hardware floor (the minimal persistent-kernel ping-pong through mapped host
// memory), the minimal mechanisms under the batched methods, and the handler's
// throughput on messages in device memory against the device's memory
// bandwidth. Empty results where the build has no CUDA.

#include <cstdint>
#include <optional>
#include <string>

namespace ferry::bench {

struct FloorResult {
  double p50_us = 0, p99_us = 0, min_us = 0;
  std::uint64_t round_trips = 0;
};

struct HandlerThroughput {
  std::uint32_t messages = 0;
  std::uint32_t message_bytes = 0;
  double device_copy_gbs = 0;    // cudaMemcpy device-to-device, bytes read + written per second
  double naive_gbs = 0;          // one thread per message, serial reverse
  double warp_gbs = 0;           // one warp per message, Ferry's cooperative Reverse
  bool verified = false;         // both kernels' output checked against the CPU
};

// The minimal mechanisms under the batched launch methods: each the least a
// round trip through it can cost, with an empty kernel that reads and writes
// nothing, so that a method's ratio to it is all the method's own work. p50 in
// microseconds.
struct MinimalMechanisms {
  double launch_sync_us = 0;  // burst's: an empty kernel's launch, then cudaStreamSynchronize
  double graph_sync_us = 0;   // graph's: a one-node graph (that kernel) launched, then synchronised
  double memops_us = 0;       // memops': a pre-posted cuStreamWaitValue32, the empty kernel and
                         // cuStreamWriteValue32; the host flips the waited word and polls the written one
};

// How the ping-pong's kernel polls and answers: Relaxed is the minimal
// mechanism (the word is the whole message, so nothing needs ordering);
// AcquireRelease is what a ring publishing messages needs, as Ferry's does.
enum class PingPongOrder { Relaxed, AcquireRelease };

// The persistent kernel's lone request, step by step (serve_steps.cu): one
// warp answers one 64-byte request at a time through mapped host memory, each
// variant adding one step of the poller's fast path to the one before:
//   0 the floor: a relaxed poll of the word, a relaxed answer;
//   1 the poll acquires {seq, len}, as the ring's consumer must;
//   2 the cookie and the payload read after it;
//   3 the handler (Reverse) writes the response into host memory;
//   4 the response's len and cookie, a release fence, then its seq, the request
//     tail and the progress count, relaxed (persistent.cuh publishes so);
//   5 as 4, with the tail stored by a release of its own: a second fence;
//   6 as 5, with the cookie and payload read in the poll's own load instruction
//     and kept when their check word matches (slot_check.h), as the persistent
//     kernel's idle poll does; else read after it as in 2.
// A variant's round trip less the one before is what its step costs. The
// variants from 2 on also stamp the SM clock: payload read, handler, publish
// fence, and the stores after it (the seq, the tail, the count).
struct ServeSteps {
  static constexpr int kSteps = 7;
  static constexpr int kGaps = 4;
  double round_trip_p50_us[kSteps] = {};
  double gpu_ns[kSteps][kGaps] = {};  // medians, per variant
  double sm_clock_ghz = 0;            // measured against the global timer over the run
  std::uint64_t wrong_responses = 0;  // variants 4 to 6 check every answer
  double checked_taken = 0;           // variant 6: the share of requests answered from the poll's own read
};

std::optional<FloorResult> measure_floor(const std::string& gpu, std::uint64_t round_trips,
                                         PingPongOrder order = PingPongOrder::Relaxed);
std::optional<MinimalMechanisms> measure_minimal_mechanisms(const std::string& gpu,
                                                            std::uint64_t round_trips);
std::optional<HandlerThroughput> measure_handler_throughput(const std::string& gpu);
std::optional<ServeSteps> measure_serve_steps(const std::string& gpu, std::uint64_t round_trips);
std::string gpu_name(const std::string& gpu);

}  // namespace ferry::bench
