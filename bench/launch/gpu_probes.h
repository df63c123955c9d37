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

// The graph and memops methods' lone request, step by step (batched_steps.cu):
// 64-byte requests, each variant adding one step to the one before.
//   graph 0 the minimal mechanism: a one-node graph of an empty kernel, then
//           cudaStreamSynchronize;
//         1 the method's kernel (128 threads) reading its posted batch (the
//           descriptor, length, cookie and inline payload) from mapped host
//           memory in one load instruction a warp, as batch_kernel.cuh does,
//           one graph per slot, then cudaStreamSynchronize;
//         2 + one warp answers and publishes the response (a release of its
//           seq), which the host polls instead of synchronising; an event is
//           recorded after each launch, as the dispatcher does;
//         3 instead of 1-2's read: the batch in the kernel node's parameters,
//           set with cudaGraphExecKernelNodeSetParams before each launch;
//         4 as 2, with a second thread waiting for each launch's event by
//           polling cudaEventQuery;
//         5 as 4, with a stream write after each launch instead of the event,
//           which the second thread polls in mapped memory, as the backend's
//           completer does.
//   memops 0 the minimal mechanism: wait, empty kernel, write, one round posted
//            at a time once the one before is answered;
//          1 64 rounds posted ahead (as the backend's slots), each re-armed
//            after its round trip by the timing thread;
//          2 + the kernel reads its posted batch;
//          3 + publishes the response, which the host polls (the round trip
//            ends there, before the done word);
//          4 as 3, re-armed by a second thread as each done word comes, as the
//            backend's completer does;
//          5 as 4, the timing thread starting its next round only once the
//            done word has come, as in 3: whether 4's cost is the re-arming
//            thread or the next go coming while the stream finishes a batch.
struct BatchedSteps {
  static constexpr int kGraphSteps = 6;
  static constexpr int kMemopsSteps = 6;
  double graph_us[kGraphSteps] = {};
  double memops_us[kMemopsSteps] = {};
  std::uint64_t wrong_responses = 0;  // every published answer is checked
};

std::optional<FloorResult> measure_floor(const std::string& gpu, std::uint64_t round_trips,
                                         PingPongOrder order = PingPongOrder::Relaxed);
std::optional<MinimalMechanisms> measure_minimal_mechanisms(const std::string& gpu,
                                                            std::uint64_t round_trips);
std::optional<HandlerThroughput> measure_handler_throughput(const std::string& gpu);
std::optional<ServeSteps> measure_serve_steps(const std::string& gpu, std::uint64_t round_trips);
std::optional<BatchedSteps> measure_batched_steps(const std::string& gpu, std::uint64_t round_trips);
std::string gpu_name(const std::string& gpu);

}  // namespace ferry::bench
