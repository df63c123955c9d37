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

}  // namespace ferry::xfer::store

#if defined(__GLIBCXX__)
// libstdc++ stores each node's hash code only for hashes it does not consider
// "fast", and it considers every user-defined hash fast. Without the stored
// code, a lookup rehashes every key in the bucket it walks to find where the
// bucket ends, and compares keys instead of codes: on the agent's put path
// the chain's and the dram tier's maps were a third of the time (perf). This is
// the library's documented customisation point for that choice; it changes the
// map's layout, which is safe because every user of KeyHash sees it here.
template <>
struct std::__is_fast_hash<ferry::xfer::store::KeyHash> : std::false_type {};
#endif

namespace ferry::xfer::store {

template <class V>
using KeyMap = std::unordered_map<std::string, V, KeyHash, std::equal_to<>>;

}  // namespace ferry::xfer::store
