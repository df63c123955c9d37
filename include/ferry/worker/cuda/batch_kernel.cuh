#pragma once
// The kernel of the batched launch methods (burst, graph, memops): handles
// `count` requests of one channel from index `first`, one warp per message,
// writes the responses' bytes, len and cookie, and publishes each response
// itself (its seq, after a system-scope fence), so that the server sees it the
// moment the GPU is done, with no host thread in between. The host's completion
// thread publishes only the request tail and the progress count.

#include "ferry/worker/cuda/device_ring.cuh"

namespace ferry::worker::cuda {

struct BatchDesc {
  std::uint32_t channel;
  std::uint32_t first;
  std::uint32_t count;
  std::uint32_t reserved;
};

constexpr int kBatchThreads = 128;  // 4 warps: 4 messages per block
constexpr int kMessagesPerBlock = kBatchThreads / 32;

// graph and memops read their batch from mapped host memory. The dispatcher
// copies the first requests' lengths, cookies and (up to kInlinePayload bytes)
// payloads in beside the descriptor, so that one round trip over PCIe brings
// them all, instead of the descriptor, then each request's length and then its
// bytes: a short request's answer waits on one PCIe read, not two.
constexpr std::uint32_t kInlineRequests = 32;
constexpr std::uint32_t kInlinePayload = 64;
struct PostedBatch {
  BatchDesc d;
  std::uint32_t lens[kInlineRequests];
  std::uint64_t cookies[kInlineRequests];
  alignas(16) std::uint8_t payload[kInlineRequests][kInlinePayload];  // requests of at most kInlinePayload bytes
};

// What batch_kernel_by_ref brought of this block's messages (one per warp).
struct InlineMessages {
  const std::uint32_t* lens;
  const std::uint64_t* cookies;
  const std::uint8_t (*payload)[kInlinePayload];
};

// in: this block's messages as they came inline, or null to read them from the ring.
template <typename Handler>
__device__ void handle_batch(const DeviceChannel* channels, const BatchDesc& d, std::uint32_t* error,
                             const Handler& handler, const InlineMessages* in = nullptr) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::uint32_t i = blockIdx.x * kMessagesPerBlock + warp;
  if (i >= d.count) return;
  const DeviceChannel& ch = channels[d.channel];
  const std::uint32_t k = d.first + i;
  const bool inline_request = in != nullptr && i < kInlineRequests;
  const SlotDesc& req = ch.requests.desc(k);
  const std::uint32_t len = inline_request ? in->lens[warp] : req.len;
  if (len > ch.requests.slot_size) {
    if (lane == 0) report_error_sys(error, kRequestLongerThanSlot);
    return;
  }
  const std::uint8_t* bytes = inline_request && len <= kInlinePayload ? in->payload[warp] : ch.requests.slot(k);
  const std::uint32_t n = apply_warp(handler, ByteView{bytes, len},
                                     MutableByteView{ch.responses.slot(k), ch.responses.slot_size}, lane);
  __syncwarp();  // every lane's response bytes, before lane 0's fence
  if (lane == 0) {
    if (n > ch.responses.slot_size) {
      report_error_sys(error, kResponseLongerThanSlot);
      return;  // never published: the orchestrator reads the error and shuts down
    }
    SlotDesc& resp = ch.responses.desc(k);
    resp.len = n;
    resp.cookie = inline_request ? in->cookies[warp] : req.cookie;
    // R1 on the GPU: bytes, len and cookie, then seq; pairs with the server's
    // acquire (A1). The release is cumulative: it covers the other lanes' bytes,
    // which the warp barrier above ordered before it, so one fence does (a
    // fence after the seq, which speeds the persistent kernel's publishing, adds
    // nothing here: the kernel's end pushes its stores out).
    store_release_sys(&resp.seq, k + 1);
  }
}

// burst: the descriptor travels as a kernel parameter.
template <typename Handler>
__global__ void batch_kernel_by_value(const DeviceChannel* channels, BatchDesc d, std::uint32_t* error,
                                      Handler handler) {
  handle_batch(channels, d, error, handler);
}

// burst, a batch that one block handles: its messages' lengths, cookies and
// short payloads travel in the kernel's parameters with the descriptor, so
// that the kernel reads nothing of the request over PCIe (from the ring it
// would read each length and cookie, then the bytes: two round trips before
// the handler starts). 320 bytes of parameters, where a launch carries 4 KiB.
struct LaunchedBatch {
  BatchDesc d;
  std::uint32_t lens[kMessagesPerBlock];
  std::uint64_t cookies[kMessagesPerBlock];
  // Requests of at most kInlinePayload bytes; longer ones are read from the ring.
  alignas(16) std::uint8_t payload[kMessagesPerBlock][kInlinePayload];
};
static_assert(sizeof(LaunchedBatch) == 320);

// __grid_constant__: the handler reads the parameters where they are, without
// a copy into local memory.
template <typename Handler>
__global__ void batch_kernel_launched(const DeviceChannel* channels, const __grid_constant__ LaunchedBatch b,
                                      std::uint32_t* error, Handler handler) {
  const InlineMessages in{b.lens, b.cookies, b.payload};
  handle_batch(channels, b.d, error, handler, &in);
}

// graph and memops: captured or pre-posted once, so the batch is read from
// mapped host memory that the dispatcher fills before releasing the launch:
// the descriptor, and each of this block's messages' length, cookie and inline
// bytes, all loads issued at once (entries past the batch's count, or bytes
// past a message's length, are read and never used).
template <typename Handler>
__global__ void batch_kernel_by_ref(const DeviceChannel* channels, const PostedBatch* p, std::uint32_t* error,
                                    Handler handler) {
  constexpr unsigned kChunks = kInlinePayload / sizeof(uint4);  // lanes that load one message's bytes
  __shared__ BatchDesc desc;
  __shared__ std::uint32_t lens[kMessagesPerBlock];
  __shared__ std::uint64_t cookies[kMessagesPerBlock];
  __shared__ alignas(16) std::uint8_t payload[kMessagesPerBlock][kInlinePayload];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::uint32_t mine = blockIdx.x * kMessagesPerBlock + warp;
  if (threadIdx.x == 0) desc = p->d;
  if (mine < kInlineRequests) {
    if (lane == 0) lens[warp] = p->lens[mine];
    if (lane == 1) cookies[warp] = p->cookies[mine];
    if (lane < kChunks)
      reinterpret_cast<uint4*>(payload[warp])[lane] = reinterpret_cast<const uint4*>(p->payload[mine])[lane];
  }
  __syncthreads();
  const InlineMessages in{lens, cookies, payload};
  handle_batch(channels, desc, error, handler, &in);
}

}  // namespace ferry::worker::cuda
