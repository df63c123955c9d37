#pragma once
// One object per file in the file tier's directory. The header is a fixed 4 KiB
// so that the data starts on a page boundary: with O_DIRECT the data is read and
// written in place, and files written in either mode read back in the other.
//
//   +0     magic        u64  "FERRYKVO" (little-endian)
//   +8     version      u32  1
//   +12    header_size  u32  4096 (where the data starts)
//   +16    key_len      u32  <= kMaxFileKeyLength
//   +20    flags        u32  kFileLeafSums (1): checksum is checksum.h's
//                              two-level sum; 0 in files of older builds, whose
//                              checksum is XXH3-64 of all the bytes
//   +24    size         u64  object bytes
//   +32    checksum     u64  the object's checksum (the caller's; checksum.h)
//   +40    seq          u64  sequence number of the publish (0 in files of older
//                              builds: they count as older than any other)
//   +48    reserved     u64  0
//   +56    header_sum   u64  XXH3-64 of bytes [0, 64 + key_len), this field read as 0
//   +64    key          key_len bytes, then zeros up to 4096
//   +4096  data         size bytes; the file is exactly 4096 + size bytes long
//
// header_sum lets the start-up scan tell a torn or foreign file from an object
// without reading its data; the data's own checksum is verified on every get.
//
// seq comes from the tier's one counter that orders every publish, object files
// and packs (pack_format.h) alike: after a restart, the version of a key with
// the highest seq is the newest one. It sits in what version 1 reserved as zero,
// so files written before it existed still load (as seq 0), and the version
// stays 1.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::xfer::store {

inline constexpr std::uint64_t kFileMagic = 0x4f564b5952524546ull;  // "FERRYKVO"
inline constexpr std::uint32_t kFileVersion = 1;
inline constexpr std::size_t kFileHeaderSize = 4096;
inline constexpr std::size_t kFileHeaderFixed = 64;
inline constexpr std::size_t kMaxFileKeyLength = kFileHeaderSize - kFileHeaderFixed;  // 4032
inline constexpr std::uint32_t kFileLeafSums = 1;  // flags: checksum() rather than whole_checksum()

struct FileHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint32_t key_len;
  std::uint32_t flags;
  std::uint64_t size;
  std::uint64_t checksum;
  std::uint64_t seq;
  std::uint64_t reserved;
  std::uint64_t header_sum;
};
static_assert(sizeof(FileHeader) == kFileHeaderFixed);
static_assert(offsetof(FileHeader, size) == 24);
static_assert(offsetof(FileHeader, checksum) == 32);
static_assert(offsetof(FileHeader, seq) == 40);
static_assert(offsetof(FileHeader, header_sum) == 56);

// Writes the whole 4 KiB header region (zero padded) into out, with
// kFileLeafSums set: checksum must be checksum()'s. key.size() must be
// <= kMaxFileKeyLength.
void encode_file_header(std::string_view key, std::uint64_t size, std::uint64_t checksum, std::uint64_t seq,
                        std::byte* out /* kFileHeaderSize bytes */);

struct DecodedHeader {
  std::string key;
  std::uint64_t size = 0;
  std::uint64_t checksum = 0;
  std::uint64_t seq = 0;
  bool whole_sum = false;  // written before kFileLeafSums: verify with whole_checksum()
};

// Parses a 4 KiB header region; returns an empty string and fills *out, or the
// reason it is not a valid header (bad magic, unknown version, header checksum).
std::string decode_file_header(const std::byte* in /* kFileHeaderSize bytes */, DecodedHeader* out);

}  // namespace ferry::xfer::store
