#pragma once
// The persistent kernel: block b serves channel b until the stop flag is set.
//
// Each round, warp 0 polls the next 32 request slots in one coalesced read and
// takes the run of published ones as a batch; the block's warps each handle a
// message of it; then thread 0 issues one system-scope release fence and
// publishes all the batch's responses and the request tail. One fence per
// batch rather than per message: across PCIe a fence costs about a microsecond.

#include "worker/cuda/device_ring.cuh"

namespace ferry::worker::cuda {

// Idle polls between two reads of the stop flag: the flag is in host memory, so
// each read is a PCIe round trip; requests are checked on every poll.
constexpr unsigned kStopCheckEvery = 64;

template <typename Handler>
__global__ void persistent_kernel(const DeviceChannel* channels, std::uint32_t* stop, std::uint32_t* error,
                                  Handler handler) {
  const DeviceChannel ch = channels[blockIdx.x];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  const unsigned warps = blockDim.x / 32;
  __shared__ std::uint32_t batch;
  __shared__ std::uint32_t halt;  // 0 run, 1 stop requested, 2 error
  __shared__ std::uint32_t fault;
  if (threadIdx.x == 0) fault = kNoError;
  std::uint32_t next = ch.requests.start_index;
  std::uint64_t handled = 0;

  for (;;) {
    if (warp == 0) {
      std::uint32_t m = 0;
      std::uint32_t stop_seen = 0;
      for (unsigned polls = 1;; ++polls) {
        const std::uint32_t k = next + lane;
        // A1 (device side): acquire pairs with the server's release of seq (R1);
        // the payload, len and cookie of slot k are visible to this lane, and to
        // the block's other warps after the barrier below.
        const bool ready = load_acquire_sys(&ch.requests.desc(k).seq) == k + 1;
        const unsigned published = __ballot_sync(0xffffffffu, ready);
        m = (published == 0xffffffffu) ? 32u : static_cast<std::uint32_t>(__ffs(~published) - 1);
        if (m > 0) break;
        if (polls % kStopCheckEvery == 0) {
          stop_seen = lane == 0 ? load_relaxed_sys(stop) : 0;
          stop_seen = __shfl_sync(0xffffffffu, stop_seen, 0);
          if (stop_seen != 0) break;
        }
      }
      if (lane == 0) {
        batch = m;
        halt = stop_seen != 0 ? 1u : 0u;
      }
    }
    __syncthreads();
    if (halt != 0) break;
    const std::uint32_t m = batch;

    for (std::uint32_t i = warp; i < m; i += warps) {
      const std::uint32_t k = next + i;
      const SlotDesc& req = ch.requests.desc(k);
      const std::uint32_t len = req.len;
      if (len > ch.requests.slot_size) {
        if (lane == 0) fault = kRequestLongerThanSlot;
        continue;
      }
      const std::uint32_t n = apply_warp(handler, ByteView{ch.requests.slot(k), len},
                                         MutableByteView{ch.responses.slot(k), ch.responses.slot_size}, lane);
      if (lane == 0) {
        if (n > ch.responses.slot_size) fault = kResponseLongerThanSlot;
        SlotDesc& resp = ch.responses.desc(k);
        resp.len = n;
        resp.cookie = req.cookie;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (fault != kNoError) {
        store_relaxed_sys(error, fault);
        halt = 2;
      } else {
        // R1 (device side): the fence orders every response byte the block wrote
        // (made visible to this thread by the barrier; fences are cumulative)
        // before the seq stores; pairs with the server's acquire of seq (A1).
        ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_system);
        for (std::uint32_t i = 0; i < m; ++i) store_relaxed_sys(&ch.responses.desc(next + i).seq, next + i + 1);
        // R2 (device side): the requests below next + m have been read; pairs with
        // the server's acquire of tail (A2) before it reuses their slots.
        store_release_sys(ch.requests.tail, next + m);
        handled += m;
        store_relaxed_sys(ch.handled, handled);
      }
    }
    __syncthreads();
    if (halt != 0) break;
    next += m;
  }
}

}  // namespace ferry::worker::cuda
