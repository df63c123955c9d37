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
// copies the first requests' lengths and cookies in beside the descriptor, so
// that one round trip over PCIe brings both, instead of the descriptor and then
// each request's own.
constexpr std::uint32_t kInlineRequests = 32;
struct PostedBatch {
  BatchDesc d;
  std::uint32_t lens[kInlineRequests];
  std::uint64_t cookies[kInlineRequests];
};

// lens/cookies: this block's messages' lengths and cookies (one per warp) where
// they came inline, or null to read them from the ring.
template <typename Handler>
__device__ void handle_batch(const DeviceChannel* channels, const BatchDesc& d, std::uint32_t* error,
                             const Handler& handler, const std::uint32_t* lens = nullptr,
                             const std::uint64_t* cookies = nullptr) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::uint32_t i = blockIdx.x * kMessagesPerBlock + warp;
  if (i >= d.count) return;
  const DeviceChannel& ch = channels[d.channel];
  const std::uint32_t k = d.first + i;
  const bool inline_request = lens != nullptr && i < kInlineRequests;
  const SlotDesc& req = ch.requests.desc(k);
  const std::uint32_t len = inline_request ? lens[warp] : req.len;
  if (len > ch.requests.slot_size) {
    if (lane == 0) report_error_sys(error, kRequestLongerThanSlot);
    return;
  }
  const std::uint32_t n = apply_warp(handler, ByteView{ch.requests.slot(k), len},
                                     MutableByteView{ch.responses.slot(k), ch.responses.slot_size}, lane);
  __syncwarp();  // every lane's response bytes, before lane 0's fence
  if (lane == 0) {
    if (n > ch.responses.slot_size) {
      report_error_sys(error, kResponseLongerThanSlot);
      return;  // never published: the orchestrator reads the error and shuts down
    }
    SlotDesc& resp = ch.responses.desc(k);
    resp.len = n;
    resp.cookie = inline_request ? cookies[warp] : req.cookie;
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

// graph and memops: captured or pre-posted once, so the batch is read from
// mapped host memory that the dispatcher fills before releasing the launch:
// the descriptor and this block's inline lengths and cookies at once, one
// thread each (entries past the batch's count are read and never used).
template <typename Handler>
__global__ void batch_kernel_by_ref(const DeviceChannel* channels, const PostedBatch* p, std::uint32_t* error,
                                    Handler handler) {
  __shared__ BatchDesc desc;
  __shared__ std::uint32_t lens[kMessagesPerBlock];
  __shared__ std::uint64_t cookies[kMessagesPerBlock];
  if (threadIdx.x == 0) desc = p->d;
  const std::uint32_t mine = blockIdx.x * kMessagesPerBlock + threadIdx.x;
  if (threadIdx.x < kMessagesPerBlock && mine < kInlineRequests) {
    lens[threadIdx.x] = p->lens[mine];
    cookies[threadIdx.x] = p->cookies[mine];
  }
  __syncthreads();
  handle_batch(channels, desc, error, handler, lens, cookies);
}

}  // namespace ferry::worker::cuda
