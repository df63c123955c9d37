#pragma once
// A read-only map from token text to id, looked up once or more per word on
// every request: open addressing with linear probing over a power-of-two slot
// array, keys back to back in one string, no allocation on lookup.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::infer::text {

class TokenTable {
 public:
  // Sizes the table for up to expected tokens (load factor <= 1/2).
  explicit TokenTable(std::size_t expected = 0);

  // Maps token to id; a token inserted again takes the later id, as the
  // reference's vocabulary map does with a repeated line.
  void insert(std::string_view token, std::int32_t id);

  // The token's id, or -1 if absent.
  std::int32_t find(std::string_view token) const noexcept;

  std::size_t size() const noexcept { return count_; }

 private:
  struct Slot {
    std::uint32_t offset = 0;  // the key's place in keys_
    std::uint32_t length = 0;
    std::uint32_t hash = 0;  // the hash's low bits, to skip most key compares
    std::int32_t id = -1;    // -1: empty slot
  };

  void grow();
  std::string_view key(const Slot& s) const noexcept {
    return std::string_view(keys_).substr(s.offset, s.length);
  }

  std::string keys_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
};

// FNV-1a, 64 bits: tokens are a few bytes long, where it is as fast as any.
inline std::uint64_t token_hash(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace ferry::infer::text
