#pragma once
// The persistent kernel: block b serves channel b until the stop flag is set.
//
// Under load a block is a three-stage pipeline over batches of up to 30
// messages, with one barrier per step. In step s:
//   - the poller warp (1) finds batch s+1: the run of published request slots
//     after the last batch, in coalesced reads of their {seq, len} words;
//   - the handler warps (2..31) handle batch s, one message each (their payload
//     reads overlap);
//   - the publisher warp (0) publishes batch s-1: lane i writes response i's
//     descriptor, then a system-scope release fence, then its seq, and lane 0
//     the request tail.
// Each stage costs about one PCIe round trip (a poll, a payload read, a fence),
// so a step takes one instead of three. While the handlers work, the poller
// keeps polling until they finish, so busy batches fill up.
//
// A lone request costs the pipeline three steps and two hand-offs between warps,
// more than one warp doing all three (docs/bench/launch.md, the one-warp fast path).
// So when the pipeline is empty and a poll finds exactly one request, the poller
// handles and publishes it itself, with no barrier. The idle poller reads the
// next slot's first 128 bytes and its cookie with each poll (idle_poll), and
// when the request it then finds is short and its check word (slot_check.h;
// the backend asks the server's producer for them) matches, it answers from
// that copy: one PCIe round trip instead of a poll and then a payload read.
//
// Flags that end the loop are written in one step and read after its barrier;
// each lives in a slot of its own per step (mod 3), so a warp that runs ahead
// into the next step never writes what a slower one is still reading.

#include "ferry/core/slot_check.h"
#include "ferry/worker/cuda/device_ring.cuh"

namespace ferry::worker::cuda {

inline constexpr unsigned kPersistentThreads = 1024;
inline constexpr unsigned kPublisherWarp = 0;
inline constexpr unsigned kPollerWarp = 1;
inline constexpr unsigned kFirstHandlerWarp = 2;
inline constexpr unsigned kHandlerWarps = kPersistentThreads / 32 - kFirstHandlerWarp;
inline constexpr unsigned kPersistentBatch = kHandlerWarps;  // one message per handler warp
inline constexpr unsigned kStages = 3;                       // polled, handled, published

// Polls between two reads of the stop flag: the flag is in host memory, so each
// read is a PCIe round trip; requests are checked on every poll.
constexpr unsigned kStopCheckEvery = 64;
constexpr unsigned kIdlePollsBeforeSleep = 4096;  // about 5 ms of back-to-back polls
constexpr unsigned kIdleSleepNs = 500;            // the first sleep; each next one doubles, up to the limit

// One batch as it moves through the stages.
struct PersistentBatch {
  std::uint32_t start;  // ring index of its first message
  std::uint32_t count;
  std::uint32_t halt;   // the poller saw the stop flag while idle: end after this step
  std::uint32_t done;   // messages handled so far: the poller's cue to stop collecting
  std::uint32_t lens[kPersistentBatch];
  std::uint32_t out_lens[kPersistentBatch];
  std::uint64_t out_cookies[kPersistentBatch];
};

// A block's shared memory.
struct PersistentShared {
  PersistentBatch batches[kStages];
  std::uint32_t fault_in[kStages];  // a fault in the step (first wins); ends the loop
  std::uint32_t stop_in[kStages];   // the publisher saw the stop flag under load; ends the loop
  std::uint32_t published_step;     // step + 1 once the publisher is done with it
  std::uint64_t handled;            // answered so far; one warp at a time publishes
  std::uint64_t lone_request[kCheckedPayloadMax / 8];  // the poller's checked copy of a lone request
};

// An idle poll, in one load instruction: lanes below kIdleDescs read the
// {seq, len} words of slots next.., lane kCookieLane slot next's cookie, and
// the lanes from kFirstWordLane its first 128 bytes (as far as the slot goes).
// - One instruction, because a second one, even relaxed, was measured to cost
//   a round trip of its own: the payload travels with the poll only inside it.
// - Every lane's load is an acquire (A1, as the busy poll's), so that a request
//   the bytes read with it will not do for (take_checked) is read after it the
//   usual way, with no fence.
// - Four slots: with 15 a lone request was answered 0.1 us later (more lines
//   to read); with 1 a stream of requests was served one at a time, at a
//   thirtieth of the rate.
// The measurements are in docs/bench/launch.md.
inline constexpr unsigned kIdleDescs = 4;
inline constexpr unsigned kCookieLane = 15;
inline constexpr unsigned kFirstWordLane = 16;
inline constexpr unsigned kSlotWords = 16;
static_assert(kIdleDescs <= kCookieLane && kCheckedPayloadMax + 8 <= 8 * kSlotWords &&
              kFirstWordLane + kSlotWords == 32);

__device__ inline std::uint64_t idle_poll(const DeviceRing& r, std::uint32_t next, unsigned lane) {
  const std::uint64_t* p = nullptr;
  const unsigned word = lane - kFirstWordLane;  // wraps below kFirstWordLane
  if (lane < kIdleDescs)
    p = reinterpret_cast<const std::uint64_t*>(&r.desc(next + lane));
  else if (lane == kCookieLane)
    p = &r.desc(next).cookie;
  else if (word < kSlotWords && 8 * (word + 1) <= r.slot_size)
    p = reinterpret_cast<const std::uint64_t*>(r.slot(next)) + word;
  return p != nullptr ? load_acquire_sys(p) : 0;
}

// Whether an idle poll's words (idle_poll) hold request k, published with len
// bytes: its check word, made by the producer from seq k + 1, len, the cookie
// and the payload, matches what the warp read. If so, the payload is copied to
// `out` and *cookie set. Whatever the reads saw (a slot half written, an older
// message of the slot, a producer that writes no check words), a mismatch only
// sends the request the usual way. Uniform across the warp.
__device__ inline bool take_checked(const DeviceRing& r, std::uint32_t k, std::uint32_t len,
                                    std::uint64_t polled, std::uint64_t* out, std::uint64_t* cookie,
                                    unsigned lane) {
  if (!has_check_word(len, r.slot_size)) return false;
  const unsigned at = check_word_offset(len) / 8;  // the check word's place among the slot's words
  const unsigned word = lane - kFirstWordLane;     // wraps below kFirstWordLane
  std::uint64_t sum = word < at ? check_term(polled, word, len) : 0;
  for (unsigned o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const std::uint64_t stored = __shfl_sync(0xffffffffu, polled, kFirstWordLane + at);
  *cookie = __shfl_sync(0xffffffffu, polled, kCookieLane);
  if (check_word(sum, k + 1, len, *cookie) != stored) return false;
  if (word < at) out[word] = polled;
  __syncwarp();
  return true;
}

// {seq, len} of a slot in one 8-byte acquire load. seq is the low word (both
// sides are little-endian); the producer writes len before its release of seq
// (R1), so a load that sees the new seq sees the new len too.
__device__ inline void load_seq_len(SlotDesc& d, std::uint32_t* seq, std::uint32_t* len) {
  static_assert(offsetof(SlotDesc, seq) == 0 && offsetof(SlotDesc, len) == 4);
  const std::uint64_t v =
      ::cuda::atomic_ref<std::uint64_t, ::cuda::thread_scope_system>(*reinterpret_cast<std::uint64_t*>(&d))
          .load(::cuda::memory_order_acquire);
  *seq = static_cast<std::uint32_t>(v);
  *len = static_cast<std::uint32_t>(v >> 32);
}

__device__ inline ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_block> in_block(std::uint32_t& x) {
  return ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_block>(x);
}

// The tail of publishing: the request tail and the progress counter (lane 0),
// right after the responses' seqs.
__device__ inline void finish_publish(const DeviceChannel& ch, std::uint32_t end, std::uint32_t count,
                                      std::uint64_t& handled) {
  // R2 (device side): the requests below end have been read; pairs with the
  // producer's acquire of tail (A2) before it reuses their slots. The fence
  // before the seqs already ordered those reads, so a relaxed store would do
  // for ordering; the release's own fence is kept because it also pushes the
  // seq stores out to host memory at once, where otherwise they may wait in
  // the GPU's write path. ferry-launch-bench's step-by-step probe measures a
  // lone request both ways, and docs/bench/launch.md batches of 32 and 1024.
  store_release_sys(ch.requests.tail, end);
  handled += count;
  publish_handled_sys(ch.handled, handled);
}

// The publisher's stage: answers every message of `b` (handled in an earlier
// step, so the barrier between makes its response bytes visible to this warp).
__device__ inline void publish_batch(const DeviceChannel& ch, const PersistentBatch& b, std::uint64_t& handled,
                                     unsigned lane) {
  if (b.count == 0) return;
  if (lane < b.count) {
    SlotDesc& resp = ch.responses.desc(b.start + lane);
    resp.len = b.out_lens[lane];
    resp.cookie = b.out_cookies[lane];
  }
  // R1 (device side): the fence orders this lane's len and cookie, and every
  // response byte the block wrote (visible to it through the barrier; fences are
  // cumulative), before its seq store; pairs with the server's acquire of seq (A1).
  ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_system);
  if (lane < b.count) store_relaxed_sys(&ch.responses.desc(b.start + lane).seq, b.start + lane + 1);
  __syncwarp();
  if (lane == 0) finish_publish(ch, b.start + b.count, b.count, handled);
}

// The poller's fast path: handles and publishes request k in this warp alone,
// from `checked` (its payload, checked by take_checked, and `checked_cookie`)
// or else from its slot. Returns false on a fault (recorded in `fault`).
template <typename Handler>
__device__ inline bool serve_alone(const DeviceChannel& ch, const Handler& handler, std::uint32_t k,
                                   std::uint32_t len, const std::uint64_t* checked,
                                   std::uint64_t checked_cookie, std::uint32_t& fault, std::uint64_t& handled,
                                   unsigned lane) {
  if (len > ch.requests.slot_size) {
    if (lane == 0) atomicCAS(&fault, kNoError, kRequestLongerThanSlot);
    return false;
  }
  // Only lane 0's poll acquired slot k (A1); the warp barrier orders the other
  // lanes' reads of its payload after that acquire, as the block barrier does
  // for the handler warps.
  __syncwarp();
  const std::uint64_t cookie =
      checked != nullptr ? checked_cookie : ch.requests.desc(k).cookie;  // overlaps with the payload reads
  const auto* in = checked != nullptr ? reinterpret_cast<const std::uint8_t*>(checked) : ch.requests.slot(k);
  const std::uint32_t n = apply_warp(handler, ByteView{in, len},
                                     MutableByteView{ch.responses.slot(k), ch.responses.slot_size}, lane);
  if (n > ch.responses.slot_size) {
    if (lane == 0) atomicCAS(&fault, kNoError, kResponseLongerThanSlot);
    return false;
  }
  SlotDesc& resp = ch.responses.desc(k);
  __syncwarp();
  if (lane == 0) {
    resp.len = n;
    resp.cookie = cookie;
    // R1 (device side), as in publish_batch: the lanes' response bytes (seen by
    // lane 0 through the warp barrier) and the descriptor come before seq.
    ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_system);
    store_relaxed_sys(&resp.seq, k + 1);
    finish_publish(ch, k + 1, 1, handled);
  }
  __syncwarp();
  return true;
}

// The poller's stage: fills the next batch with the published slots from
// `next` on. While this step's batch is being handled, it collects until the
// handlers finish (or the batch is full) and may pass on an empty batch.
// Otherwise the pipeline is empty: it waits for requests (or the stop flag,
// then halt is set), and answers lone ones itself.
template <typename Handler>
__device__ inline void poll_batch(const DeviceChannel& ch, const Handler& handler, std::uint32_t* stop,
                                  std::uint32_t idle_sleep_max_ns, PersistentShared& sh, unsigned step,
                                  std::uint32_t& next, unsigned lane) {
  PersistentBatch& handling = sh.batches[step % kStages];
  PersistentBatch& out = sh.batches[(step + 1) % kStages];
  const std::uint32_t busy = handling.count;
  // Idle: let the publisher finish first, so the fast path may publish, and the
  // idle polls never overlap its fence.
  // (A relaxed atomic and a fence, the same pairing as acquire; compute-sanitizer's
  // racecheck takes a ld.acquire of shared memory for a plain read.)
  if (busy == 0) {
    while (in_block(sh.published_step).load(::cuda::memory_order_relaxed) != step + 1) {
    }
    __threadfence_block();
  }
  std::uint32_t m = 0;
  std::uint32_t len = 0;
  std::uint32_t stop_seen = 0;
  // Wide polls (32 slots' {seq, len} in one coalesced read) while busy, and
  // the first time the pipeline runs empty, to gather a batch; then idle polls
  // (idle_poll: 4 slots, and the next one's cookie and bytes), also after a
  // lone request, which makes the next request likely lone too.
  bool wide = true;
  unsigned idle_polls = 0;   // since the last answer: when to start sleeping
  unsigned empty_polls = 0;  // never reset: when to read the stop flag, even between lone requests
  std::uint32_t sleep_ns = kIdleSleepNs;
  for (;;) {
    const std::uint32_t k = next + lane;
    std::uint32_t seq = 0;
    const bool idle = busy == 0 && !wide;
    const bool polled = !idle || lane < kIdleDescs;
    std::uint64_t idle_words = 0;
    // A1 (device side): acquire pairs with the server's release of seq (R1):
    // the payload and cookie of slot k are visible to this lane, and to the
    // block's other warps after the step's barrier.
    if (idle) {
      idle_words = idle_poll(ch.requests, next, lane);
      if (polled) {
        seq = static_cast<std::uint32_t>(idle_words);
        len = static_cast<std::uint32_t>(idle_words >> 32);
      }
    } else {
      load_seq_len(ch.requests.desc(k), &seq, &len);
    }
    // `polled` matters: an unread seq of 0 would match k + 1 when k wraps.
    const unsigned published = __ballot_sync(0xffffffffu, polled && seq == k + 1);
    m = published == 0xffffffffu ? 32u : static_cast<std::uint32_t>(__ffs(~published) - 1);
    if (m >= kPersistentBatch) {
      m = kPersistentBatch;
      break;
    }
    if (busy != 0) {
      // One lane's view decides for the warp: lanes that left the loop apart
      // would meet the next __ballot_sync short of the full mask.
      const std::uint32_t done = __shfl_sync(0xffffffffu, in_block(handling.done).load(::cuda::memory_order_relaxed), 0);
      if (done >= busy) break;
      continue;
    }
    if (m == 1) {
      const std::uint32_t len0 = __shfl_sync(0xffffffffu, len, 0);
      std::uint64_t cookie = 0;
      const bool checked =
          idle && take_checked(ch.requests, next, len0, idle_words, sh.lone_request, &cookie, lane);
      if (!serve_alone(ch, handler, next, len0, checked ? sh.lone_request : nullptr, cookie,
                       sh.fault_in[step % kStages], sh.handled, lane)) {
        m = 0;
        break;
      }
      ++next;
      m = 0;
      wide = false;
      idle_polls = 0;
      sleep_ns = kIdleSleepNs;
      continue;
    }
    if (m > 0) break;
    wide = false;
    // A channel idle this long stops hammering PCIe: its polls would slow the
    // busy channels' reads (docs/bench/launch.md measures idle blocks polling
    // beside a busy one).
    if (++idle_polls > kIdlePollsBeforeSleep && idle_sleep_max_ns != 0) {
      __nanosleep(sleep_ns);
      sleep_ns = min(2 * sleep_ns, idle_sleep_max_ns);
    }
    if (++empty_polls % kStopCheckEvery == 0) {
      stop_seen = lane == 0 && stop_requested_sys(stop) ? 1u : 0u;
      stop_seen = __shfl_sync(0xffffffffu, stop_seen, 0);
      if (stop_seen != 0) break;
    }
  }
  if (lane < m) out.lens[lane] = len;
  if (lane == 0) {
    out.start = next;
    out.count = m;
    out.halt = stop_seen;
    out.done = 0;
  }
  next += m;
}

// The handlers' stage: warp w handles message w - kFirstHandlerWarp of `b`.
template <typename Handler>
__device__ inline void handle_batch(const DeviceChannel& ch, const Handler& handler, PersistentBatch& b,
                                    std::uint32_t& fault, unsigned warp, unsigned lane) {
  for (std::uint32_t i = warp - kFirstHandlerWarp; i < b.count; i += kHandlerWarps) {
    const std::uint32_t k = b.start + i;
    const std::uint32_t len = b.lens[i];
    std::uint32_t n = 0;
    std::uint64_t cookie = 0;
    if (len > ch.requests.slot_size) {
      if (lane == 0) atomicCAS(&fault, kNoError, kRequestLongerThanSlot);
    } else {
      cookie = ch.requests.desc(k).cookie;  // overlaps with the payload reads
      n = apply_warp(handler, ByteView{ch.requests.slot(k), len},
                     MutableByteView{ch.responses.slot(k), ch.responses.slot_size}, lane);
      if (lane == 0 && n > ch.responses.slot_size) atomicCAS(&fault, kNoError, kResponseLongerThanSlot);
    }
    if (lane == 0) {
      b.out_lens[i] = n;
      b.out_cookies[i] = cookie;
      in_block(b.done).fetch_add(1, ::cuda::memory_order_relaxed);
    }
  }
}

template <typename Handler>
__global__ void __launch_bounds__(kPersistentThreads)
    persistent_kernel(const DeviceChannel* channels, std::uint32_t* stop, std::uint32_t* error,
                      std::uint32_t idle_sleep_max_ns, Handler handler) {
  const DeviceChannel ch = channels[blockIdx.x];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  __shared__ PersistentShared sh;
  if (threadIdx.x < kStages) {
    sh.batches[threadIdx.x].count = 0;
    sh.batches[threadIdx.x].halt = 0;
    sh.fault_in[threadIdx.x] = kNoError;
    sh.stop_in[threadIdx.x] = 0;
  }
  if (threadIdx.x == 0) {
    sh.published_step = 0;
    sh.handled = 0;
  }
  __syncthreads();
  std::uint32_t next = ch.requests.start_index;  // the poller's: first slot not yet taken
  unsigned published_steps = 0;                  // the publisher's

  unsigned step = 0;
  for (;; ++step) {
    PersistentBatch& handling = sh.batches[step % kStages];
    PersistentBatch& polling = sh.batches[(step + 1) % kStages];
    PersistentBatch& publishing = sh.batches[(step + 2) % kStages];  // handled in the step before
    if (warp == kPollerWarp) {
      poll_batch(ch, handler, stop, idle_sleep_max_ns, sh, step, next, lane);
    } else if (warp == kPublisherWarp) {
      publish_batch(ch, publishing, sh.handled, lane);
      __syncwarp();
      if (lane == 0) {
        __threadfence_block();  // with the exchange: a release the poller's load and fence pair with
        in_block(sh.published_step).exchange(step + 1, ::cuda::memory_order_relaxed);
        // Under steady load the poller never idles, so the stop flag is checked
        // here too, or a busy kernel would ignore it.
        if (publishing.count != 0 && ++published_steps % kStopCheckEvery == 0 && stop_requested_sys(stop))
          sh.stop_in[step % kStages] = 1;
      }
    } else {
      handle_batch(ch, handler, handling, sh.fault_in[step % kStages], warp, lane);
    }
    __syncthreads();
    if (sh.fault_in[step % kStages] != kNoError || sh.stop_in[step % kStages] != 0 || polling.halt != 0) break;
  }
  if (warp != kPublisherWarp) return;
  const std::uint32_t fault = sh.fault_in[step % kStages];
  if (fault != kNoError) {
    // The faulty batch is never published; the orchestrator reports the error.
    if (lane == 0) report_error_sys(error, fault);
  } else if (sh.stop_in[step % kStages] != 0) {
    // Stopped under load: answer what was handled. The batch polled in the last
    // step stays in the ring, unconsumed, like every request after it.
    publish_batch(ch, sh.batches[step % kStages], sh.handled, lane);
  }
}

}  // namespace ferry::worker::cuda
