// The default secret of XXH3, taken from the xxhash header that libxxhash-dev
// installs (the table is static there, so only an inline build exposes it): the
// GPU hashes with the same 192 bytes the library does, without a copy of them.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "xfer/checksum/xxh3_parts.h"

namespace ferry::xfer {

static_assert(sizeof(XXH3_kSecret) == xxh3::kSecretBytes);

const std::uint8_t* xxh3_default_secret() noexcept { return XXH3_kSecret; }

}  // namespace ferry::xfer
