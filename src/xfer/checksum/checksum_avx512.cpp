// XXH3-64 compiled for AVX-512 (this file only: CMake gives it -mavx512f), for
// the one-shot hash of a leaf, which is what the agent's data path spends its
// CPU on beside its copies: on a core with AVX-512 a leaf in L2 hashes faster
// than with AVX2.
// checksum.cpp calls this only where the CPU has AVX-512F; the value is the
// same XXH3 whatever the vector width.
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX512
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace ferry::xfer {

std::uint64_t checksum_avx512(const void* data, std::size_t size) noexcept { return XXH3_64bits(data, size); }

}  // namespace ferry::xfer
