#include "xfer/store/checksum.h"

#include <xxhash.h>

#include <cstdio>
#include <new>

namespace ferry::xfer::store {

#if defined(__x86_64__)
// checksum_avx2.cpp
std::uint64_t checksum_avx2(const void* data, std::size_t size) noexcept;
void* checksum_stream_new_avx2() noexcept;
void checksum_stream_update_avx2(void* s, const void* data, std::size_t size) noexcept;
std::uint64_t checksum_stream_digest_avx2(const void* s) noexcept;
void checksum_stream_free_avx2(void* s) noexcept;
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
}  // namespace

std::uint64_t checksum(ByteView data) noexcept {
#if defined(__x86_64__)
  if (use_avx2()) return checksum_avx2(data.data, data.size);
#endif
  return XXH3_64bits(data.data, data.size);
}

ChecksumStream::ChecksumStream() {
#if defined(__x86_64__)
  if (use_avx2()) {
    state_ = checksum_stream_new_avx2();
    if (state_ == nullptr) throw std::bad_alloc();
    return;
  }
#endif
  state_ = XXH3_createState();
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

ChecksumStream::~ChecksumStream() {
#if defined(__x86_64__)
  if (use_avx2()) {
    checksum_stream_free_avx2(state_);
    return;
  }
#endif
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void ChecksumStream::update(ByteView data) noexcept {
#if defined(__x86_64__)
  if (use_avx2()) {
    checksum_stream_update_avx2(state_, data.data, data.size);
    return;
  }
#endif
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data.data, data.size);
}

std::uint64_t ChecksumStream::digest() const noexcept {
#if defined(__x86_64__)
  if (use_avx2()) return checksum_stream_digest_avx2(state_);
#endif
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

std::string checksum_hex(std::uint64_t sum) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

}  // namespace ferry::xfer::store
