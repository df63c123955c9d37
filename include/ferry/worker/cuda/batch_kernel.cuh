#pragma once
// The kernel of the batched launch methods (burst, graph, memops): handles
// `count` requests of one channel from index `first`, one warp per message,
// writes the responses' bytes, len and cookie, and publishes each response
// itself (its seq, after a system-scope fence), so that the server sees it the
// moment the GPU is done, with no host thread in between. The host's completion
// thread publishes only the request tail and the progress count.

#include <cstring>

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

// A message sent with its batch: its length, cookie and, for a request of up
// to kInlinePayload bytes, its bytes. Longer requests are read from the ring.
constexpr std::uint32_t kInlinePayload = 64;
struct InlineMessage {
  std::uint32_t len;
  std::uint32_t reserved;
  std::uint64_t cookie;
  alignas(16) std::uint8_t payload[kInlinePayload];
};
static_assert(sizeof(InlineMessage) == 80 && sizeof(InlineMessage) % sizeof(uint4) == 0);

// Copies a message of a batch as the kernels take it: len and cookie from the
// published descriptor, and the bytes of a short request.
inline void copy_inline_message(InlineMessage& out, const SlotDesc& desc, const std::uint8_t* bytes) {
  out.len = desc.len;
  out.cookie = desc.cookie;
  if (desc.len <= kInlinePayload) std::memcpy(out.payload, bytes, desc.len);
}

// in: this warp's message as it came with the batch, or null to read it from the ring.
template <typename Handler>
__device__ void handle_batch(const DeviceChannel* channels, const BatchDesc& d, std::uint32_t* error,
                             const Handler& handler, const InlineMessage* in) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::uint32_t i = blockIdx.x * kMessagesPerBlock + warp;
  if (i >= d.count) return;
  const DeviceChannel& ch = channels[d.channel];
  const std::uint32_t k = d.first + i;
  const SlotDesc& req = ch.requests.desc(k);
  const std::uint32_t len = in != nullptr ? in->len : req.len;
  if (len > ch.requests.slot_size) {
    if (lane == 0) report_error_sys(error, kRequestLongerThanSlot);
    return;
  }
  const std::uint8_t* bytes = in != nullptr && len <= kInlinePayload ? in->payload : ch.requests.slot(k);
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
    resp.cookie = in != nullptr ? in->cookie : req.cookie;
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
  handle_batch(channels, d, error, handler, nullptr);
}

// burst, a batch that one block handles: its messages travel in the kernel's
// parameters with the descriptor, so that the kernel reads nothing of the
// request over PCIe (from the ring it would read each length and cookie, then
// the bytes: two round trips before the handler starts). 336 bytes of
// parameters, where a launch carries 4 KiB.
struct LaunchedBatch {
  BatchDesc d;
  InlineMessage messages[kMessagesPerBlock];
};
static_assert(sizeof(LaunchedBatch) == 336);

// __grid_constant__: the handler reads the parameters where they are, without
// a copy into local memory.
template <typename Handler>
__global__ void batch_kernel_launched(const DeviceChannel* channels, const __grid_constant__ LaunchedBatch b,
                                      std::uint32_t* error, Handler handler) {
  handle_batch(channels, b.d, error, handler, &b.messages[threadIdx.x / 32]);
}

// graph and memops are captured or pre-posted once, so they read their batch
// from mapped host memory, which the dispatcher fills before it releases the
// launch: the descriptor and the first kInlineRequests messages, so that a
// short request's answer waits on one PCIe read, not on the descriptor, then
// the length, then the bytes.
constexpr std::uint32_t kInlineRequests = 32;
struct PostedBatch {
  InlineMessage messages[kInlineRequests];
  BatchDesc d;
};

// What one warp reads of a posted batch: its message and the descriptor.
struct PostedView {
  InlineMessage message;  // valid when the warp's message is one of the first kInlineRequests
  BatchDesc d;
};
static_assert(sizeof(PostedView) == sizeof(InlineMessage) + sizeof(BatchDesc));

// Loads message i (< kInlineRequests) of *p and the descriptor into *out with
// one load instruction of the warp: lanes 0-4 the message, lane 5 the
// descriptor. A warp's loads of host memory in separate instructions cost a
// PCIe round trip each (measured: docs/bench/launch.md), where the lanes of
// one travel together. Entries past the batch's count are read and never used.
__device__ inline void load_posted(const PostedBatch* p, std::uint32_t i, PostedView* out) {
  constexpr unsigned kMessageLanes = sizeof(InlineMessage) / sizeof(uint4);
  const unsigned lane = threadIdx.x % 32;
  const auto* message = reinterpret_cast<const uint4*>(&p->messages[i]);
  const uint4* from = lane < kMessageLanes ? message + lane : reinterpret_cast<const uint4*>(&p->d);
  if (lane <= kMessageLanes) reinterpret_cast<uint4*>(out)[lane] = *from;
  __syncwarp();
}

static_assert(kInlineRequests % kMessagesPerBlock == 0, "a block's messages are all inline or none");

template <typename Handler>
__global__ void batch_kernel_by_ref(const DeviceChannel* channels, const PostedBatch* p, std::uint32_t* error,
                                    Handler handler) {
  __shared__ PostedView views[kMessagesPerBlock];
  const unsigned warp = threadIdx.x / 32;
  if (blockIdx.x * kMessagesPerBlock < kInlineRequests) {
    PostedView& v = views[warp];
    load_posted(p, blockIdx.x * kMessagesPerBlock + warp, &v);
    handle_batch(channels, v.d, error, handler, &v.message);
    return;
  }
  // The blocks past the inline messages read only the descriptor, one thread
  // a block: a batch of 1024 is 256 blocks, and a read by each of their warps
  // cost bursts of 1024 20-30% of their rate (docs/bench/launch.md).
  if (threadIdx.x == 0) views[0].d = p->d;
  __syncthreads();
  handle_batch(channels, views[0].d, error, handler, nullptr);
}

}  // namespace ferry::worker::cuda
