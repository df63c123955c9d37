#pragma once
// Pack file I/O for the file tier (format: pack_format.h): writing a whole pack
// through io_uring, reading its index back, reading object ranges.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/bytes.h"
#include "xfer/store/file/pack_format.h"

namespace ferry::xfer::store {

class SpareFiles;
class Uring;

struct PackItem {
  std::string_view key;  // 1 .. kMaxFileKeyLength bytes (the caller checks)
  ByteView data;
  std::uint64_t checksum = 0;
  std::uint64_t seq = 0;     // the version's sequence number (pack_format.h: why per record)
  std::uint64_t offset = 0;  // set by write_pack: where the bytes start in the pack
};

struct PackWriteResult {
  int fd = -1;  // the published pack, open for reading (O_DIRECT when direct); -1 on failure
  std::uint64_t file_size = 0;
  int err = 0;        // errno of the failure (ENOSPC, EFBIG... map to NoSpace)
  std::string error;  // what failed, naming the file
};

// Writes items as the pack `seq`: the whole file (header, objects, index) is cut
// into writes of up to 1 MiB, issued at once up to `depth` (0: the ring's), into
// "<pack name>.tmp.<pid>.<n>", which is then (fsynced and) renamed to
// pack_file_name(seq). On failure nothing is published and the temporary is
// removed. With direct, every write is whole pages from page-aligned memory:
// page-aligned item data is written in place (only a partial last page is
// copied), other data through a bounce buffer; buffered writes take the data in
// place and pad it from a page of zeros. With spares (O_DIRECT), a spare file
// of the pack's size or a little more is overwritten in place and cut to size
// instead of a new file (spare_files.h says why).
PackWriteResult write_pack(Uring& ring, int dir_fd, const std::string& dir, std::uint64_t seq,
                           std::span<PackItem> items, bool direct, bool fsync, SpareFiles* spares,
                           unsigned depth = 0);

// Reads and checks a pack's header and index through fd (which may be
// O_DIRECT). Returns "" or why the pack is unusable.
std::string read_pack_index(int fd, std::uint64_t file_size, PackHeader* header, std::vector<PackRecord>* records);

struct ReadRange {
  std::uint64_t offset = 0;  // in the file; with O_DIRECT a multiple of 4096
  std::uint64_t length = 0;  // with O_DIRECT a multiple of 4096
  std::byte* out = nullptr;  // with O_DIRECT page aligned
  std::int64_t result = 0;   // set: bytes read (less at end of file), or -errno
};

// Reads every range through the ring, up to its depth in flight.
void read_ranges(Uring& ring, int fd, std::span<ReadRange> ranges);

}  // namespace ferry::xfer::store
