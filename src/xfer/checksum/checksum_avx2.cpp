// XXH3-64 compiled for AVX2 (this file only: CMake gives it -mavx2), from the
// header that libxxhash-dev installs. Debian's library is built for the x86-64
// baseline (SSE2); on the agent's data path the checksum of every block is the
// CPU's main work, and AVX2 hashes faster than SSE2. checksum.cpp calls this
// only where the CPU has AVX2; the result is the same XXH3 value either way.
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace ferry::xfer {

std::uint64_t checksum_avx2(const void* data, std::size_t size) noexcept { return XXH3_64bits(data, size); }

void* checksum_stream_new_avx2() noexcept {
  XXH3_state_t* s = XXH3_createState();
  if (s != nullptr) XXH3_64bits_reset(s);
  return s;
}
void checksum_stream_reset_avx2(void* s) noexcept { XXH3_64bits_reset(static_cast<XXH3_state_t*>(s)); }
void checksum_stream_update_avx2(void* s, const void* data, std::size_t size) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(s), data, size);
}
std::uint64_t checksum_stream_digest_avx2(const void* s) noexcept {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(s));
}
void checksum_stream_free_avx2(void* s) noexcept { XXH3_freeState(static_cast<XXH3_state_t*>(s)); }

}  // namespace ferry::xfer
