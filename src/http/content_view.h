#pragma once
// The served paths as the workers see them, in a hash table the CPU and the GPU
// both read: a page -> (Content-Type, length, page number), or a route -> (its
// methods, route number). The bodies stay in the proxy's page store and the
// routes' handlers on the proxy (content.h): a worker only names them.

#include <cstddef>
#include <cstdint>

#include "ferry/core/host_device.h"

namespace ferry::http {

struct ContentEntry {
  std::uint32_t path_offset = 0, path_len = 0;  // in ContentView::strings
  std::uint32_t type_offset = 0, type_len = 0;
  std::uint64_t body_len = 0;
  std::uint32_t page = 0;          // a page's number in the page store, or a route's (Content::route)
  std::uint8_t route_methods = 0;  // 0: a page; else a route taking these (kMethod* bits)
  std::uint8_t open = 0;           // 1: served without --api-key's credentials
  std::uint16_t reserved = 0;
};
static_assert(sizeof(ContentEntry) == 32);

// The bits of ferry::http::Methods (route.h), which device code does not include.
inline constexpr std::uint8_t kMethodGet = 1;
inline constexpr std::uint8_t kMethodHead = 2;
inline constexpr std::uint8_t kMethodPost = 4;

// a == b, in a time that depends on their lengths only: every byte of the
// longer is read and the differences are ORed, with no early exit (as
// OpenSSL's CRYPTO_memcmp), so that a client timing the answer to a guessed
// API key learns nothing of how much of it was right.
FERRY_HOST_DEVICE inline bool equal_constant_time(const std::uint8_t* a, std::size_t a_len, const std::uint8_t* b,
                                                  std::size_t b_len) {
  const std::size_t n = a_len > b_len ? a_len : b_len;
  std::uint32_t diff = static_cast<std::uint32_t>(a_len ^ b_len) | static_cast<std::uint32_t>((a_len ^ b_len) >> 32);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t x = i < a_len ? a[i] : 0;
    const std::uint8_t y = i < b_len ? b[i] : 0;
    diff |= static_cast<std::uint32_t>(x ^ y);
  }
  return diff == 0;
}

FERRY_HOST_DEVICE inline std::uint32_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

// Trivially copyable: the GPU handler holds one by value, with device pointers.
struct ContentView {
  const ContentEntry* entries = nullptr;
  const std::uint32_t* buckets = nullptr;  // entry index + 1; 0 = empty
  const std::uint8_t* strings = nullptr;
  std::uint32_t bucket_mask = 0;            // buckets: a power of two, at most half full
  // --api-key: the credentials every path but the open routes (/health,
  // /metrics) needs, "Bearer KEY", in strings; length 0: none needed.
  std::uint32_t credentials_offset = 0, credentials_len = 0;

  FERRY_HOST_DEVICE const ContentEntry* find(const std::uint8_t* path, std::size_t n) const {
    if (buckets == nullptr) return nullptr;
    for (std::uint32_t b = fnv1a(path, n) & bucket_mask;; b = (b + 1) & bucket_mask) {
      const std::uint32_t slot = buckets[b];
      if (slot == 0) return nullptr;
      const ContentEntry& e = entries[slot - 1];
      if (e.path_len == n) {
        bool same = true;
        for (std::size_t i = 0; i < n && same; ++i) same = strings[e.path_offset + i] == path[i];
        if (same) return &e;
      }
    }
  }

  // Whether a request may pass: no key is set, or its Authorization value is
  // exactly "Bearer KEY" (value: null when the request has none).
  FERRY_HOST_DEVICE bool authorized(const std::uint8_t* value, std::size_t value_len) const {
    if (credentials_len == 0) return true;
    if (value == nullptr) return false;
    return equal_constant_time(value, value_len, strings + credentials_offset, credentials_len);
  }
};

}  // namespace ferry::http
