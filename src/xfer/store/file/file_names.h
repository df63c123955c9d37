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
// Small objects are kept in pack files instead (pack_format.h), named
// "pack-<16 hex digits of the pack's sequence number>.fpk"; removals of packed
// objects are recorded in ".ferry-tombstones" (tombstone_log.h).
//
// Writers use "<name>.tmp.<pid>.<counter>" and rename it over "<name>" when the
// file is complete. Such a name ends in a number, never ".kv" or ".fpk", so the
// start-up scan tells leftovers of a crashed writer (removed) from objects and
// packs (indexed).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::xfer::store {

inline constexpr std::size_t kMaxEncodedName = 180;  // leaves room for ".kv.tmp.<pid>.<n>" under NAME_MAX
inline constexpr std::string_view kObjectSuffix = ".kv";
inline constexpr std::string_view kPackSuffix = ".fpk";
inline constexpr const char* kTombstoneLogName = ".ferry-tombstones";

std::string object_file_name(std::string_view key);
// A temporary name for a writer of `name`, unique in this process and across
// processes (pid).
std::string temp_file_name(std::string_view name);

// "pack-00000000000000ff.fpk" for sequence number 255.
std::string pack_file_name(std::uint64_t seq);

bool is_object_file_name(std::string_view name);
// True for a pack's name; sets *seq to the number it carries.
bool is_pack_file_name(std::string_view name, std::uint64_t* seq = nullptr);
// A temporary of an object, a pack or the tombstone log.
bool is_temp_file_name(std::string_view name);

}  // namespace ferry::xfer::store
