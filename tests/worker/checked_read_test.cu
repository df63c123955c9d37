// The persistent kernel's read of a lone request ahead of its poll
// (persistent.cuh: idle_poll, take_checked) on the GPU, over a real ring in
// mapped host memory written by the real producer: what it must take (short
// requests with their check word) and what it must leave to the usual read
// (a stale message of the slot, a byte changed after publishing, a producer
// that writes no words, a request too long or a slot too small). Exits 77
// without a GPU.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "ferry/core/slot_ring.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/persistent.cuh"

namespace ferry::worker::cuda {
namespace {

struct Taken {
  std::uint32_t accepted;
  std::uint32_t len;
  std::uint64_t cookie;
  std::uint8_t payload[kCheckedPayloadMax];
};

__global__ void take_kernel(DeviceRing ring, std::uint32_t k, std::uint32_t len, Taken* out) {
  __shared__ std::uint64_t copy[kCheckedPayloadMax / 8];
  const unsigned lane = threadIdx.x;
  const std::uint64_t polled = idle_poll(ring, k, lane);
  std::uint64_t cookie = 0;
  const bool ok = take_checked(ring, k, len, polled, copy, &cookie, lane);
  const std::uint64_t seq_len = __shfl_sync(0xffffffffu, polled, 0);
  if (lane == 0) {
    out->accepted = ok && static_cast<std::uint32_t>(seq_len) == k + 1 && (seq_len >> 32) == len ? 1 : 0;
    out->len = len;
    out->cookie = cookie;
    if (ok) std::memcpy(out->payload, copy, len);
  }
}

// A ring of 4 slots in mapped host memory, its producer, and the kernel's view.
class MappedRing {
 public:
  MappedRing(std::uint32_t slot_size, bool ask) {
    bytes_ = SlotRing::memsize(4, slot_size);
    FERRY_CUDA_CHECK(cudaHostAlloc(&mem_, bytes_, cudaHostAllocMapped));
    ring_ = SlotRing::init(mem_, 4, slot_size);
    if (ask) ring_.ask_for_check_words();
    producer_ = RingProducer(ring_);
    consumer_ = RingConsumer(ring_);
    FERRY_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&taken_), sizeof(Taken), cudaHostAllocMapped));
  }
  ~MappedRing() {
    cudaFreeHost(taken_);
    cudaFreeHost(mem_);
  }

  // Publishes payload with cookie into a ring emptied first (as a lone
  // request, which is what gets a check word); returns its index.
  std::uint32_t push(const std::string& payload, std::uint64_t cookie) {
    SlotMessage m;
    while (consumer_.try_peek(&m)) consumer_.advance();
    consumer_.release();
    producer_.observe_consumed(consumer_.next_index());
    const std::uint32_t k = producer_.head();
    EXPECT_EQ(producer_.try_push({reinterpret_cast<const std::uint8_t*>(payload.data()), payload.size()}, cookie),
              Status::Ok);
    return k;
  }

  // What the kernel takes of slot k, published with len bytes.
  Taken take(std::uint32_t k, std::uint32_t len) {
    std::memset(taken_, 0xEE, sizeof(Taken));
    take_kernel<<<1, 32>>>(device_ring(), k, len, device(taken_));
    FERRY_CUDA_CHECK(cudaGetLastError());
    FERRY_CUDA_CHECK(cudaDeviceSynchronize());
    return *taken_;
  }

  SlotRing& ring() { return ring_; }

 private:
  template <typename T>
  static T* device(T* host) {
    T* d = nullptr;
    FERRY_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), host, 0));
    return d;
  }
  DeviceRing device_ring() {
    return DeviceRing{device(ring_.desc(0)), device(ring_.data(0)), device(&ring_.layout()->consumer.tail),
                      ring_.mask(),          ring_.slot_size(),    ring_.start_index(), 0};
  }

  void* mem_ = nullptr;
  std::size_t bytes_ = 0;
  SlotRing ring_;
  RingProducer producer_;
  RingConsumer consumer_;
  Taken* taken_ = nullptr;
};

std::string pattern(std::size_t n, int salt) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 29 + salt);
  return s;
}

TEST(CheckedRead, TakesShortRequestsWithTheirCookieWhole) {
  MappedRing m(128, true);
  for (std::uint32_t len : {0u, 1u, 8u, 13u, 64u, kCheckedPayloadMax}) {
    const std::string p = pattern(len, static_cast<int>(len));
    const std::uint32_t k = m.push(p, 5000 + len);
    const Taken t = m.take(k, len);
    ASSERT_EQ(t.accepted, 1u) << len;
    EXPECT_EQ(t.cookie, 5000 + len);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.payload), len), p) << len;
  }
}

TEST(CheckedRead, LeavesAStaleOrChangedOrUncheckedSlotToTheUsualRead) {
  MappedRing m(128, true);
  const std::uint32_t k = m.push(pattern(64, 1), 7);
  ASSERT_EQ(m.take(k, 64).accepted, 1u);
  EXPECT_EQ(m.take(k + 4, 64).accepted, 0u) << "the slot's message is a lap older than index k + 4";
  EXPECT_EQ(m.take(k, 63).accepted, 0u) << "another length";
  m.ring().data(k)[17] ^= 1;  // a byte the read saw from another message
  EXPECT_EQ(m.take(k, 64).accepted, 0u);
  m.ring().data(k)[17] ^= 1;
  m.ring().desc(k)->cookie = 8;
  EXPECT_EQ(m.take(k, 64).accepted, 0u) << "another cookie";

  MappedRing unasked(128, false);
  const std::uint32_t u = unasked.push(pattern(64, 2), 9);
  EXPECT_EQ(unasked.take(u, 64).accepted, 0u) << "the producer wrote no word";
}

TEST(CheckedRead, NeverForRequestsTooLongOrSlotsTooSmall) {
  MappedRing wide(256, true);
  const std::uint32_t k = wide.push(pattern(kCheckedPayloadMax + 8, 3), 1);
  EXPECT_EQ(wide.take(k, kCheckedPayloadMax + 8).accepted, 0u);
  MappedRing narrow(64, true);
  const std::uint32_t j = narrow.push(pattern(60, 4), 2);
  EXPECT_EQ(narrow.take(j, 60).accepted, 0u) << "no room for the word after 60 bytes in 64";
  const std::uint32_t i = narrow.push(pattern(56, 5), 3);
  EXPECT_EQ(narrow.take(i, 56).accepted, 1u) << "56 bytes and the word fill the slot";
}

}  // namespace
}  // namespace ferry::worker::cuda

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("checked_read_test: no CUDA device, skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
