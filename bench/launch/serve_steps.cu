// The persistent kernel's lone request, step by step (gpu_probes.h,
// ServeSteps): one warp answers one request at a time through mapped host
// memory, as the poller's fast path does (serve_alone in persistent.cuh), with
// each variant adding one step to the one before. The host times each round
// trip; the full variants also stamp the SM clock between their steps.

#include <cuda/atomic>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "bench/launch/gpu_probes.h"
#include "core/latency_histogram.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/cuda_handles.h"
#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/cuda/persistent.cuh"

namespace ferry::bench {
namespace {

using worker::cuda::load_relaxed_sys;
using worker::cuda::store_relaxed_sys;
using worker::cuda::store_release_sys;

constexpr std::uint32_t kPayloadBytes = 64;
constexpr std::uint32_t kPayloadWords = kPayloadBytes / 4;
constexpr unsigned kStampGaps = 4;  // payload read, handler, publish fence, tail

// What the variants add, in order; each variant does every step up to its own.
enum Step : int {
  kRelaxedPoll = 0,  // the floor: poll the word relaxed, answer it relaxed
  kAcquirePoll,      // the poll acquires {seq, len}, as the ring's consumer must (A1)
  kPayload,          // the cookie and the 64-byte payload read after it
  kHandler,          // Reverse into the response slot
  kPublish,          // the response's len and cookie, a release fence, its seq; then the tail, relaxed
  kTailRelease,      // as kPublish, with the tail stored by a release of its own (a second fence)
  kChecked,  // as kTailRelease, the payload and cookie read with a relaxed poll, kept if their check word
             // matches
  kSteps
};

// One line each, in mapped host memory.
struct alignas(128) Line {
  std::uint8_t bytes[128];
};
struct Words {
  Line request_desc, request_payload, response_desc, response_payload, tail, handled;
};

template <int kStep>
__global__ void serve_steps_kernel(Words* w, std::uint32_t rounds, std::uint32_t* stamps,
                                   std::uint64_t* clock_ref) {
  __shared__ std::uint64_t copy[kCheckedPayloadMax / 8];
  const unsigned lane = threadIdx.x;
  // The request as the persistent kernel's idle poll sees a ring of one slot.
  const worker::cuda::DeviceRing ring{reinterpret_cast<SlotDesc*>(w->request_desc.bytes),
                                      w->request_payload.bytes,
                                      nullptr,
                                      0,
                                      sizeof(Line),
                                      0,
                                      0};
  std::uint64_t taken = 0;
  auto& req = *reinterpret_cast<SlotDesc*>(w->request_desc.bytes);
  auto& resp = *reinterpret_cast<SlotDesc*>(w->response_desc.bytes);
  const auto* in = reinterpret_cast<const std::uint32_t*>(w->request_payload.bytes);
  auto* out = reinterpret_cast<std::uint32_t*>(w->response_payload.bytes);
  auto* tail = reinterpret_cast<std::uint32_t*>(w->tail.bytes);
  auto* handled = reinterpret_cast<std::uint64_t*>(w->handled.bytes);
  if (lane == 0) {
    clock_ref[0] = clock64();
    clock_ref[1] = worker::cuda::globaltimer_ns();
  }
  for (std::uint32_t i = 1; i <= rounds; ++i) {
    std::uint32_t len = 0;
    std::uint64_t polled = 0;
    if constexpr (kStep == kChecked) {
      do {
        polled = worker::cuda::idle_poll(ring, i - 1, lane);
      } while (__shfl_sync(0xffffffffu, static_cast<std::uint32_t>(polled), 0) != i);
      len = static_cast<std::uint32_t>(__shfl_sync(0xffffffffu, polled, 0) >> 32);
    } else if (lane == 0) {
      if constexpr (kStep == kRelaxedPoll) {
        while (load_relaxed_sys(&req.seq) != i) {
        }
      } else {
        std::uint32_t seq = 0;
        do {
          worker::cuda::load_seq_len(req, &seq, &len);
        } while (seq != i);
      }
    }
    if constexpr (kStep <= kAcquirePoll) {
      if (lane == 0) store_relaxed_sys(&resp.seq, i);
      continue;
    }
    const long long t0 = clock64();
    __syncwarp();  // lane 0's acquire orders the other lanes' reads (as in serve_alone)
    std::uint64_t cookie = 0;
    std::uint32_t word = 0;
    if (kStep == kChecked && worker::cuda::take_checked(ring, i - 1, len, polled, copy, &cookie, lane)) {
      word = lane < kPayloadWords ? reinterpret_cast<const std::uint32_t*>(copy)[lane] : 0;
      ++taken;
    } else {
      cookie = req.cookie;
      word = lane < kPayloadWords ? in[lane] : 0;
    }
    // The sum waits for every lane's load, so t1 follows the payload's arrival.
    const std::uint32_t sum = __reduce_add_sync(0xffffffffu, word);
    asm volatile("" ::"r"(sum));  // computed here in every variant, even where unused
    const long long t1 = clock64();
    if constexpr (kStep >= kHandler) {
      if (lane < kPayloadWords) out[kPayloadWords - 1 - lane] = __byte_perm(word, 0, 0x0123);
    }
    const long long t2 = clock64();
    long long t3 = t2, t4 = t2;
    __syncwarp();
    if (lane == 0) {
      if constexpr (kStep >= kPublish) {
        resp.len = len;
        resp.cookie = cookie;
        ::cuda::atomic_thread_fence(::cuda::memory_order_release, ::cuda::thread_scope_system);
        t3 = clock64();
        store_relaxed_sys(&resp.seq, i);
        if constexpr (kStep >= kTailRelease)
          store_release_sys(tail, i);
        else
          store_relaxed_sys(tail, i);
        store_relaxed_sys(handled, std::uint64_t{i});
        t4 = clock64();
      } else {
        resp.cookie = cookie + sum;  // keeps the payload's loads
        store_relaxed_sys(&resp.seq, i);
      }
      std::uint32_t* s = stamps + std::size_t(i - 1) * kStampGaps;
      s[0] = static_cast<std::uint32_t>(t1 - t0);
      s[1] = static_cast<std::uint32_t>(t2 - t1);
      s[2] = static_cast<std::uint32_t>(t3 - t2);
      s[3] = static_cast<std::uint32_t>(t4 - t3);
    }
  }
  if (lane == 0) {
    clock_ref[2] = clock64();
    clock_ref[3] = worker::cuda::globaltimer_ns();
    clock_ref[4] = taken;
  }
}

template <int kStep>
void launch_step(cudaStream_t stream, Words* w, std::uint32_t rounds, std::uint32_t* stamps,
                 std::uint64_t* ref) {
  serve_steps_kernel<kStep><<<1, 32, 0, stream>>>(w, rounds, stamps, ref);
}

using Launcher = void (*)(cudaStream_t, Words*, std::uint32_t, std::uint32_t*, std::uint64_t*);
constexpr Launcher kLaunchers[kSteps] = {
    launch_step<kRelaxedPoll>, launch_step<kAcquirePoll>, launch_step<kPayload>, launch_step<kHandler>,
    launch_step<kPublish>,     launch_step<kTailRelease>, launch_step<kChecked>};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::optional<ServeSteps> measure_serve_steps(const std::string& gpu, std::uint64_t round_trips) {
  worker::cuda::GpuContext ctx(gpu);
  Words* w_h = nullptr;
  FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&w_h), sizeof(Words), cudaHostAllocMapped));
  Words* w_d = nullptr;
  FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&w_d), w_h, 0));
  const auto rounds = static_cast<std::uint32_t>(std::min<std::uint64_t>(round_trips, 20000) + 1000);
  std::uint32_t* stamps_d = nullptr;
  std::uint64_t* ref_d = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&stamps_d, sizeof(std::uint32_t) * kStampGaps * rounds));
  FERRY_CUDA_CHECK(cudaMalloc(&ref_d, sizeof(std::uint64_t) * 5));
  const worker::cuda::Stream owned_stream = worker::cuda::Stream::non_blocking();
  const cudaStream_t stream = owned_stream.get();
  auto& req = *reinterpret_cast<SlotDesc*>(w_h->request_desc.bytes);
  auto& resp = *reinterpret_cast<SlotDesc*>(w_h->response_desc.bytes);
  auto* payload = reinterpret_cast<std::uint32_t*>(w_h->request_payload.bytes);
  const auto* answer = reinterpret_cast<const std::uint8_t*>(w_h->response_payload.bytes);

  ServeSteps r;
  std::uint64_t wrong = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::memset(w_h, 0, sizeof(Words));
    kLaunchers[step](stream, w_d, rounds, stamps_d, ref_d);
    FERRY_CUDA_CHECK(cudaGetLastError());
    LatencyHistogram hist;
    for (std::uint32_t i = 1; i <= rounds; ++i) {
      for (std::uint32_t k = 0; k < kPayloadWords; ++k) payload[k] = i * 2654435761u + k;
      req.cookie = i;
      // The check word after the payload, as a producer asked for them writes it (slot_check.h).
      const std::uint64_t check =
          compute_check_word(reinterpret_cast<const std::uint8_t*>(payload), kPayloadBytes, i, i);
      std::memcpy(w_h->request_payload.bytes + check_word_offset(kPayloadBytes), &check, sizeof check);
      const auto t0 = std::chrono::steady_clock::now();
      // seq and len in one release store, as the ring's producer publishes (R1).
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(&req))
          .store(std::uint64_t{kPayloadBytes} << 32 | i, std::memory_order_release);
      while (std::atomic_ref<std::uint32_t>(resp.seq).load(std::memory_order_acquire) != i) {
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (i > 1000)
        hist.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
      // Published responses are checked: the fence made them whole before seq.
      if (step >= kPublish) {
        const auto* sent = reinterpret_cast<const std::uint8_t*>(payload);
        bool ok = resp.len == kPayloadBytes && resp.cookie == i;
        for (std::uint32_t b = 0; ok && b < kPayloadBytes; ++b) ok = answer[b] == sent[kPayloadBytes - 1 - b];
        if (!ok) ++wrong;
      }
    }
    FERRY_CUDA_CHECK(cudaStreamSynchronize(stream));
    r.round_trip_p50_us[step] = hist.percentile_ns(50) / 1e3;
    if (step >= kPayload) {
      std::vector<std::uint32_t> stamps(std::size_t(kStampGaps) * rounds);
      std::uint64_t ref[5];
      FERRY_CUDA_CHECK(cudaMemcpy(stamps.data(), stamps_d, stamps.size() * 4, cudaMemcpyDeviceToHost));
      FERRY_CUDA_CHECK(cudaMemcpy(ref, ref_d, sizeof(ref), cudaMemcpyDeviceToHost));
      const double cycles_per_ns = double(ref[2] - ref[0]) / double(ref[3] - ref[1]);
      r.sm_clock_ghz = cycles_per_ns;
      if (step == kChecked) r.checked_taken = static_cast<double>(ref[4]) / rounds;
      for (unsigned g = 0; g < kStampGaps; ++g) {
        std::vector<double> ns;
        for (std::uint32_t i = 1000; i < rounds; ++i)
          ns.push_back(stamps[std::size_t(i) * kStampGaps + g] / cycles_per_ns);
        r.gpu_ns[step][g] = median(std::move(ns));
      }
    }
  }
  r.wrong_responses = wrong;
  cudaFree(stamps_d);
  cudaFree(ref_d);
  cudaFreeHost(w_h);
  return r;
}

}  // namespace ferry::bench
