#pragma once
// A pack file: many small objects of the file tier in one file, written once,
// published by rename and never modified afterwards (log-structured: an object
// that is overwritten or removed leaves dead bytes behind, which compaction
// reclaims by copying the live objects of sparse packs into a new pack).
//
//   +0      header (4096 bytes)
//             +0   magic        u64  "FERRYPAK" (little-endian)
//             +8   version      u32  1
//             +12  header_size  u32  4096 (where the first object starts)
//             +16  seq          u64  the pack's sequence number (also in its name)
//             +24  count        u32  index records
//             +28  flags        u32  kPackLeafSums (1): the records' checksums are
//                                    checksum.h's two-level sums (0 in packs of
//                                    older builds: XXH3-64 of all the bytes)
//             +32  index_offset u64  where the index starts (a multiple of 4096)
//             +40  index_size   u64  bytes of index records
//             +48  index_sum    u64  XXH3-64 of the index_size bytes of the index
//             +56  header_sum   u64  XXH3-64 of bytes [0, 64), this field read as 0
//             +64  zeros up to 4096
//   +4096   objects: each starts on a 4096 boundary and is zero padded to the next
//   +index_offset  count index records, each 8-byte aligned:
//             +0   seq          u64  the publish that wrote this version of the key
//             +8   offset       u64  where its bytes start (a multiple of 4096)
//             +16  size         u64  object bytes
//             +24  checksum     u64  the object's checksum (checksum.h)
//             +32  key_len      u32  1 .. kMaxFileKeyLength
//             +36  reserved     u32  0
//             +40  key          key_len bytes, zero padded to a multiple of 8
//           then zeros up to the next 4096 boundary: the end of the file.
//
// Why this shape:
// - Objects on page boundaries: O_DIRECT reads and writes them in place, and a
//   directory written in one mode reads in the other (as for object files).
// - The index is written in the same parallel pass as the data (its place is
//   known before anything is written), and the header says where it is: a pack
//   is either complete (renamed) or a temporary the start-up scan removes, so
//   no trailer or second pass is needed to tell a finished pack.
// - A record's seq is its own, not the pack's: compaction copies live objects
//   into a newer pack and must not make an old version look newer than a
//   version written meanwhile. seq orders versions of a key across packs,
//   object files (file_format.h) and tombstones (tombstone_log.h).
// - The index and the header have checksums, so the start-up scan can trust the
//   index without reading the objects; each object's checksum is verified on
//   every get, as for object files.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::xfer::store {

inline constexpr std::uint64_t kPackMagic = 0x4b41505952524546ull;  // "FERRYPAK"
inline constexpr std::uint32_t kPackVersion = 1;
inline constexpr std::size_t kPackHeaderSize = 4096;
inline constexpr std::size_t kPackHeaderFixed = 64;
inline constexpr std::size_t kPackRecordFixed = 40;
inline constexpr std::uint32_t kPackLeafSums = 1;  // flags: checksum() rather than whole_checksum()

struct PackHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint64_t seq;
  std::uint32_t count;
  std::uint32_t flags;
  std::uint64_t index_offset;
  std::uint64_t index_size;
  std::uint64_t index_sum;
  std::uint64_t header_sum;
};
static_assert(sizeof(PackHeader) == kPackHeaderFixed);
static_assert(offsetof(PackHeader, seq) == 16);
static_assert(offsetof(PackHeader, index_offset) == 32);
static_assert(offsetof(PackHeader, header_sum) == 56);

struct PackRecordFixed {
  std::uint64_t seq;
  std::uint64_t offset;
  std::uint64_t size;
  std::uint64_t checksum;
  std::uint32_t key_len;
  std::uint32_t reserved;
};
static_assert(sizeof(PackRecordFixed) == kPackRecordFixed);

struct PackRecord {
  std::string key;
  std::uint64_t seq = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t checksum = 0;
  bool whole_sum = false;  // in a pack written before kPackLeafSums: verify with whole_checksum()
};

// Bytes one index record of a key of key_len bytes takes.
constexpr std::size_t pack_record_size(std::size_t key_len) {
  return kPackRecordFixed + ((key_len + 7) & ~std::size_t{7});
}

// Appends one record to an index being built.
void encode_pack_record(std::string_view key, std::uint64_t seq, std::uint64_t offset, std::uint64_t size,
                        std::uint64_t checksum, std::vector<std::byte>* index);

// Writes the whole 4 KiB header (zero padded) for an index already built, with
// kPackLeafSums set: every record's checksum must be checksum()'s.
void encode_pack_header(std::uint64_t seq, std::uint32_t count, std::uint64_t index_offset,
                        const std::byte* index, std::uint64_t index_size, std::byte* out /* kPackHeaderSize */);

// Parses a header; returns "" or why it is not a valid pack header.
std::string decode_pack_header(const std::byte* in /* kPackHeaderSize bytes */, PackHeader* out);

// Parses and checks an index (checksum, record bounds against the data region
// [kPackHeaderSize, header.index_offset)); returns "" or why it is bad.
std::string decode_pack_index(const PackHeader& header, const std::byte* index, std::vector<PackRecord>* out);

}  // namespace ferry::xfer::store
