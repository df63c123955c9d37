#pragma once
// SHA-256 of a byte range (OpenSSL's libcrypto), to check a model file against
// the digest its publisher gives before any of it is parsed.

#include <cstddef>
#include <span>
#include <string>

namespace ferry::infer {

// The digest as 64 lowercase hex digits. Throws ferry::Error if libcrypto fails.
std::string sha256_hex(std::span<const std::byte> bytes);

}  // namespace ferry::infer
