#pragma once
// The rings of ferry/core/slot_ring.h as a GPU kernel sees them: the same
// layout, reached through the device address of the registered arena. Only
// loads and stores cross PCIe (the H100/H200 have no native host atomics), each
// at system scope, and each acquire/release names its partner on the host.

#include <cuda/atomic>

#include <cstdint>
#include <string>

#include "ferry/core/arena.h"
#include "ferry/core/slot_ring.h"

namespace ferry::worker::cuda {

struct DeviceRing {
  SlotDesc* descs;      // device address
  std::uint8_t* data;   // device address
  std::uint32_t* tail;  // consumer index (device address)
  std::uint32_t mask;
  std::uint32_t slot_size;
  std::uint32_t start_index;
  std::uint32_t reserved;

  __device__ SlotDesc& desc(std::uint32_t k) const { return descs[k & mask]; }
  __device__ std::uint8_t* slot(std::uint32_t k) const { return data + std::size_t(k & mask) * slot_size; }
};

struct DeviceChannel {
  DeviceRing requests;   // the GPU consumes
  DeviceRing responses;  // the GPU produces
  std::uint64_t* handled;
};

__device__ inline std::uint32_t load_acquire_sys(std::uint32_t* p) {
  return ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_system>(*p).load(::cuda::memory_order_acquire);
}
__device__ inline std::uint32_t load_relaxed_sys(std::uint32_t* p) {
  return ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_system>(*p).load(::cuda::memory_order_relaxed);
}
__device__ inline std::uint64_t load_acquire_sys(const std::uint64_t* p) {
  return ::cuda::atomic_ref<std::uint64_t, ::cuda::thread_scope_system>(*const_cast<std::uint64_t*>(p))
      .load(::cuda::memory_order_acquire);
}
__device__ inline void store_relaxed_sys(std::uint32_t* p, std::uint32_t v) {
  ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_system>(*p).store(v, ::cuda::memory_order_relaxed);
}
__device__ inline void store_release_sys(std::uint32_t* p, std::uint32_t v) {
  ::cuda::atomic_ref<std::uint32_t, ::cuda::thread_scope_system>(*p).store(v, ::cuda::memory_order_release);
}
__device__ inline void store_relaxed_sys(std::uint64_t* p, std::uint64_t v) {
  ::cuda::atomic_ref<std::uint64_t, ::cuda::thread_scope_system>(*p).store(v, ::cuda::memory_order_relaxed);
}

// The device mirrors of ferry/core/arena_control.h's edges.
//
// S2: the stop flag, polled relaxed. Nothing is published through it (the host's
// S1 release orders nothing that a kernel reads after seeing it), so a relaxed
// load saves a system-scope fence on every poll.
__device__ inline bool stop_requested_sys(std::uint32_t* stop) { return load_relaxed_sys(stop) != 0; }
// E1: the GPU cannot compare-and-swap host memory (HostNativeAtomicSupported is 0
// on H100/H200), so "first error wins" is a load, then a store: two faults at the
// same instant may both write, and the host reads whichever landed last. Any
// nonzero code is an error either way; the host's report_error() is exact.
__device__ inline void report_error_sys(std::uint32_t* error, std::uint32_t code) {
  if (load_relaxed_sys(error) == 0) store_relaxed_sys(error, code);
}
// P1: a channel's progress count, relaxed (the watchdog only asks whether it moved).
__device__ inline void publish_handled_sys(std::uint64_t* handled, std::uint64_t n) { store_relaxed_sys(handled, n); }

// The GPU's global timer in nanoseconds: one clock for every SM, unlike clock64().
__device__ inline std::uint64_t globaltimer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Applies a handler to one message with a warp: the cooperative form when the
// handler has one, else the serial form on lane 0. Returns the response length
// on every lane.
template <typename Handler>
__device__ std::uint32_t apply_warp(const Handler& h, ByteView in, MutableByteView out, unsigned lane) {
  std::size_t n;
  if constexpr (requires { h(in, out, 0u, 32u); }) {
    n = h(in, out, lane, 32u);
  } else {
    n = 0;
    if (lane == 0) n = h(in, out);
    n = __shfl_sync(0xffffffffu, n, 0);
  }
  return static_cast<std::uint32_t>(n);
}

// Worker error codes written to ArenaHeader::worker_error (report_error_sys).
enum WorkerError : std::uint32_t {
  kNoError = 0,
  kRequestLongerThanSlot = 1,
  kResponseLongerThanSlot = 2,
};

// What a worker error code means, for the backends' failure(); empty for kNoError.
inline std::string worker_error_text(std::uint32_t code) {
  if (code == kRequestLongerThanSlot) return "the GPU found a request longer than its slot (corrupt channel)";
  if (code == kResponseLongerThanSlot) return "the handler returned a response longer than the slot";
  if (code != kNoError) return "GPU worker error " + std::to_string(code);
  return {};
}

}  // namespace ferry::worker::cuda
