#pragma once
// The persistent kernel: block b serves channel b until the stop flag is set.
//
// Each round, warp 0 polls the next 32 request slots in one coalesced read of
// their {seq, len} words (only the next one while idle) and takes the run of
// published ones as a batch; warp w
// handles message w of the batch (its payload reads overlap with the other
// warps'); then warp 0 publishes the batch, lane i writing response i's
// descriptor, a system-scope release fence, and its seq, and lane 0 the request
// tail. Every PCIe read on the path is one
// round trip (poll, then payload): len comes with the poll, not after it.

#include "worker/cuda/device_ring.cuh"

namespace ferry::worker::cuda {

inline constexpr unsigned kPersistentThreads = 1024;  // 32 warps: one per message of a full batch
inline constexpr unsigned kPersistentBatch = 32;      // slots warp 0 polls at once

// Idle polls between two reads of the stop flag: the flag is in host memory, so
// each read is a PCIe round trip; requests are checked on every poll.
constexpr unsigned kStopCheckEvery = 64;
constexpr unsigned kIdlePollsBeforeSleep = 4096;  // about 5 ms of back-to-back polls
constexpr unsigned kIdleSleepNs = 500;

// {seq, len} of a slot in one 8-byte acquire load. seq is the low word (both
// sides are little-endian); the producer writes len before its release of seq
// (R1), so a load that sees the new seq sees the new len too.
__device__ inline void load_seq_len(SlotDesc& d, std::uint32_t* seq, std::uint32_t* len) {
  static_assert(offsetof(SlotDesc, seq) == 0 && offsetof(SlotDesc, len) == 4);
  const std::uint64_t v = ::cuda::atomic_ref<std::uint64_t, ::cuda::thread_scope_system>(
                              *reinterpret_cast<std::uint64_t*>(&d))
                              .load(::cuda::memory_order_acquire);
  *seq = static_cast<std::uint32_t>(v);
  *len = static_cast<std::uint32_t>(v >> 32);
}

template <typename Handler>
__global__ void __launch_bounds__(kPersistentThreads)
    persistent_kernel(const DeviceChannel* channels, std::uint32_t* stop, std::uint32_t* error, Handler handler) {
  const DeviceChannel ch = channels[blockIdx.x];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  const unsigned warps = blockDim.x / 32;
  __shared__ std::uint32_t batch;
  __shared__ std::uint32_t halt;   // written by warp 0 before the first barrier of a round
  __shared__ std::uint32_t fault;  // sticky: the round that sets it is the last
  __shared__ std::uint32_t stopping;  // stop seen under load; written between barriers, like fault
  __shared__ std::uint32_t lens[kPersistentBatch];
  __shared__ std::uint32_t out_lens[kPersistentBatch];      // staged here, written to host memory by warp 0
  __shared__ std::uint64_t out_cookies[kPersistentBatch];
  if (threadIdx.x == 0) {
    fault = kNoError;
    stopping = 0;
  }
  std::uint32_t next = ch.requests.start_index;
  std::uint64_t handled = 0;
  unsigned busy_rounds = 0;

  for (;;) {
    if (warp == 0) {
      std::uint32_t m = 0;
      std::uint32_t stop_seen = 0;
      // While busy, all 32 lanes poll (one read finds a whole batch); once a poll
      // finds nothing, only lane 0 polls, so an idle channel costs one small PCIe
      // read per poll and a lone request is seen sooner.
      bool wide = true;
      for (unsigned polls = 1;; ++polls) {
        const std::uint32_t k = next + lane;
        std::uint32_t seq = 0, len = 0;
        // A1 (device side): acquire pairs with the server's release of seq (R1):
        // the payload and cookie of slot k are visible to this lane, and to the
        // block's other warps after the barrier below.
        const bool polled = wide || lane == 0;
        if (polled) load_seq_len(ch.requests.desc(k), &seq, &len);
        // `polled` matters: an unread seq of 0 would match k + 1 when k wraps.
        const unsigned published = __ballot_sync(0xffffffffu, polled && seq == k + 1);
        m = (published == 0xffffffffu) ? 32u : static_cast<std::uint32_t>(__ffs(~published) - 1);
        if (m > 0) {
          lens[lane] = len;
          break;
        }
        wide = false;
        // A channel idle this long stops hammering PCIe: its polls would slow the
        // busy channels' reads (measured: p50 rises from 1.4x to 1.8x the floor
        // when three idle blocks poll beside a busy one).
        if (polls > kIdlePollsBeforeSleep) __nanosleep(kIdleSleepNs);
        if (polls % kStopCheckEvery == 0) {
          stop_seen = lane == 0 ? load_relaxed_sys(stop) : 0;
          stop_seen = __shfl_sync(0xffffffffu, stop_seen, 0);
          if (stop_seen != 0) break;
        }
      }
      if (lane == 0) {
        batch = m;
        halt = stop_seen;
      }
    }
    __syncthreads();
    if (halt != 0) break;
    const std::uint32_t m = batch;

    for (std::uint32_t i = warp; i < m; i += warps) {
      const std::uint32_t k = next + i;
      const std::uint32_t len = lens[i];
      if (len > ch.requests.slot_size) {
        if (lane == 0) fault = kRequestLongerThanSlot;
        continue;
      }
      const std::uint64_t cookie = ch.requests.desc(k).cookie;  // overlaps with the payload reads
      const std::uint32_t n = apply_warp(handler, ByteView{ch.requests.slot(k), len},
                                         MutableByteView{ch.responses.slot(k), ch.responses.slot_size}, lane);
      if (lane == 0) {
        if (n > ch.responses.slot_size) fault = kResponseLongerThanSlot;
        out_lens[i] = n;
        out_cookies[i] = cookie;
      }
    }
    __syncthreads();
    if (warp == 0) {
      if (fault != kNoError) {
        if (lane == 0) store_relaxed_sys(error, fault);
      } else {
        // Lane i publishes response i: its len and cookie, then a fence, then its
        // seq. The warp's descriptor writes coalesce into a few PCIe writes per
        // batch instead of three small ones per message.
        if (lane < m) {
          SlotDesc& resp = ch.responses.desc(next + lane);
          resp.len = out_lens[lane];
          resp.cookie = out_cookies[lane];
        }
        // R1 (device side): the fence orders this lane's len and cookie, and every
        // response byte the block wrote (visible to it through the barrier; fences
        // are cumulative), before its seq store; pairs with the server's acquire
        // of seq (A1).
        ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_system);
        if (lane < m) store_relaxed_sys(&ch.responses.desc(next + lane).seq, next + lane + 1);
        __syncwarp();
        if (lane == 0) {
          // R2 (device side): the requests below next + m have been read; pairs with
          // the producer's acquire of tail (A2) before it reuses their slots.
          store_release_sys(ch.requests.tail, next + m);
          handled += m;
          store_relaxed_sys(ch.handled, handled);
          // Under steady load the idle poll never runs: check stop here too, or a
          // busy kernel would ignore it.
          if (++busy_rounds % kStopCheckEvery == 0 && load_relaxed_sys(stop) != 0) stopping = 1;
        }
      }
    }
    __syncthreads();
    // fault is written only between the two barriers of a round, so reading it
    // here cannot race with the next round (halt and batch could: warp 0
    // rewrites them as soon as it passes this barrier).
    if (fault != kNoError || stopping != 0) break;
    next += m;
  }
}

}  // namespace ferry::worker::cuda
