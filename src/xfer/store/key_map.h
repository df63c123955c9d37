#pragma once
// A map from object keys that can be searched with a std::string_view, so that
// lookups on the data path do not build a std::string for every call.

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ferry::xfer::store {

struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
};

template <class V>
using KeyMap = std::unordered_map<std::string, V, KeyHash, std::equal_to<>>;

}  // namespace ferry::xfer::store
