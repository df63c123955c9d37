#pragma once
// File names in the file tier's directory. Any byte may appear in a key, so a key
// is encoded before it becomes a name:
//   - bytes in [A-Za-z0-9_-.@=+,] stay as they are, except a leading '.';
//   - every other byte (and a leading '.') becomes %XX (two upper-case hex digits);
//   - an encoding longer than kMaxEncodedName becomes "~" + 32 hex digits of the
//     key's XXH3-128 ('~' never survives encoding, so the two forms never meet);
//   - the name ends in ".kv".
// So "../x" is stored as "%2E.%2Fx.kv", inside the directory. The header holds the
// full key (file_format.h), so the name never has to be decoded, and a get checks
// that the header's key is the one asked for.
//
// Writers use "<name>.tmp.<pid>.<counter>" and rename it over "<name>" when the
// file is complete. Such a name ends in a number, never ".kv", so the start-up
// scan tells leftovers of a crashed writer (removed) from objects (indexed).

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry::xfer::store {

inline constexpr std::size_t kMaxEncodedName = 180;  // leaves room for ".kv.tmp.<pid>.<n>" under NAME_MAX
inline constexpr std::string_view kObjectSuffix = ".kv";

std::string object_file_name(std::string_view key);
// A temporary name for a writer of `name`, unique in this process and across
// processes (pid).
std::string temp_file_name(std::string_view name);

bool is_object_file_name(std::string_view name);
bool is_temp_file_name(std::string_view name);

}  // namespace ferry::xfer::store
