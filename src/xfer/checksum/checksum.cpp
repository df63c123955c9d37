#include "ferry/xfer/checksum.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack (LeafSumHasher)
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <new>
#include <span>

namespace ferry::xfer {

#if defined(__x86_64__)
// checksum_avx2.cpp
std::uint64_t checksum_avx2(const void* data, std::size_t size) noexcept;
void* checksum_stream_new_avx2() noexcept;
void checksum_stream_reset_avx2(void* s) noexcept;
void checksum_stream_update_avx2(void* s, const void* data, std::size_t size) noexcept;
std::uint64_t checksum_stream_digest_avx2(const void* s) noexcept;
void checksum_stream_free_avx2(void* s) noexcept;
// checksum_avx512.cpp: the one-shot hash only (leaves); partial leaves stream with AVX2.
std::uint64_t checksum_avx512(const void* data, std::size_t size) noexcept;
#endif

namespace {

bool use_avx2() noexcept {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

bool use_avx512() noexcept {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return false;
#endif
}

// One-shot XXH3-64, the widest build the CPU runs.
std::uint64_t xxh3(const void* data, std::size_t size) noexcept {
#if defined(__x86_64__)
  if (use_avx512()) return checksum_avx512(data, size);
  if (use_avx2()) return checksum_avx2(data, size);
#endif
  return XXH3_64bits(data, size);
}

void* new_state() {
#if defined(__x86_64__)
  if (use_avx2()) {
    void* s = checksum_stream_new_avx2();
    if (s == nullptr) throw std::bad_alloc();
    return s;
  }
#endif
  XXH3_state_t* s = XXH3_createState();
  if (s == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(s);
  return s;
}

void reset_state(void* s) noexcept {
#if defined(__x86_64__)
  if (use_avx2()) {
    checksum_stream_reset_avx2(s);
    return;
  }
#endif
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(s));
}

void update_state(void* s, const void* data, std::size_t size) noexcept {
#if defined(__x86_64__)
  if (use_avx2()) {
    checksum_stream_update_avx2(s, data, size);
    return;
  }
#endif
  XXH3_64bits_update(static_cast<XXH3_state_t*>(s), data, size);
}

std::uint64_t digest_state(const void* s) noexcept {
#if defined(__x86_64__)
  if (use_avx2()) return checksum_stream_digest_avx2(s);
#endif
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(s));
}

// XXH3-64 of leaf sums that arrive in parts, in a state on the stack (the
// library's build: the parts are small).
class LeafSumHasher {
 public:
  LeafSumHasher() noexcept { XXH3_64bits_reset(&state_); }
  void add(std::span<const std::uint64_t> sums) noexcept { XXH3_64bits_update(&state_, sums.data(), sums.size_bytes()); }
  std::uint64_t digest() const noexcept { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

}  // namespace

std::uint64_t combine_leaf_sums(std::span<const std::uint64_t> leaf_sums) noexcept {
  // The leaves' sums hashed as the bytes of little-endian u64s.
  static_assert(std::endian::native == std::endian::little);
  return xxh3(leaf_sums.data(), leaf_sums.size_bytes());
}

void leaf_checksums(ByteView piece, std::uint64_t* out) noexcept {
  for (std::size_t at = 0; at < piece.size; at += kChecksumLeafBytes)
    *out++ = xxh3(piece.data + at, std::min(kChecksumLeafBytes, piece.size - at));
}

std::uint64_t whole_checksum(ByteView data) noexcept { return xxh3(data.data, data.size); }

std::uint64_t checksum(ByteView data) noexcept {
  if (data.size <= kChecksumLeafBytes) return xxh3(data.data, data.size);
  // The leaves' sums go through XXH3's streaming state a stack buffer at a time
  // (it equals the one-shot hash of them all): no allocation at any size.
  constexpr std::size_t kStackLeaves = 1024;
  std::array<std::uint64_t, kStackLeaves> sums;
  LeafSumHasher combined;
  std::size_t n = 0;
  for (std::size_t at = 0; at < data.size; at += kChecksumLeafBytes) {
    sums[n++] = xxh3(data.data + at, std::min(kChecksumLeafBytes, data.size - at));
    if (n == kStackLeaves) {
      combined.add({sums.data(), n});
      n = 0;
    }
  }
  combined.add({sums.data(), n});
  return combined.digest();
}

std::uint64_t checksum_of_kind(ByteView data, bool whole_sum) noexcept {
  return whole_sum ? whole_checksum(data) : checksum(data);
}

ChecksumStream::ChecksumStream() : state_(new_state()) {}

ChecksumStream::~ChecksumStream() {
#if defined(__x86_64__)
  if (use_avx2()) {
    checksum_stream_free_avx2(state_);
    return;
  }
#endif
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void ChecksumStream::update(ByteView data) {
  const std::uint8_t* p = data.data;
  std::size_t left = data.size;
  while (left > 0) {
    if (in_leaf_ == 0 && left >= kChecksumLeafBytes) {  // a whole leaf: one shot
      leaves_.push_back(xxh3(p, kChecksumLeafBytes));
      p += kChecksumLeafBytes;
      left -= kChecksumLeafBytes;
      continue;
    }
    if (in_leaf_ == 0) reset_state(state_);
    const std::size_t take = std::min(left, kChecksumLeafBytes - in_leaf_);
    update_state(state_, p, take);
    p += take;
    left -= take;
    if ((in_leaf_ += take) == kChecksumLeafBytes) {
      leaves_.push_back(digest_state(state_));
      in_leaf_ = 0;
    }
  }
}

std::uint64_t ChecksumStream::digest() const noexcept {
  if (leaves_.empty()) {  // at most one leaf: plain XXH3-64 of it
    if (in_leaf_ == 0) return xxh3(nullptr, 0);
    return digest_state(state_);
  }
  if (in_leaf_ == 0 && leaves_.size() == 1) return leaves_[0];
  if (in_leaf_ == 0) return combine_leaf_sums(leaves_);
  // The open leaf is the last one; its sum goes after the others without
  // changing leaves_ (digest is const and may be called again).
  const std::uint64_t open = digest_state(state_);
  LeafSumHasher combined;
  combined.add(leaves_);
  combined.add({&open, 1});
  return combined.digest();
}

std::string checksum_hex(std::uint64_t sum) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

}  // namespace ferry::xfer
