#include "xfer/store/file/file_format.h"

#include <xxhash.h>

#include <cstring>

#include "ferry/xfer/checksum.h"

namespace ferry::xfer::store {
namespace {

// XXH3-64 of the fixed part and the key, with the header_sum field read as 0.
std::uint64_t header_sum(const std::byte* in, std::size_t key_len) {
  std::byte copy[kFileHeaderSize];
  const std::size_t n = kFileHeaderFixed + key_len;
  std::memcpy(copy, in, n);
  std::memset(copy + offsetof(FileHeader, header_sum), 0, sizeof(std::uint64_t));
  return XXH3_64bits(copy, n);
}

}  // namespace

void encode_file_header(std::string_view key, std::uint64_t size, std::uint64_t checksum, std::uint64_t seq,
                        std::byte* out) {
  std::memset(out, 0, kFileHeaderSize);
  FileHeader h{};
  h.magic = kFileMagic;
  h.version = kFileVersion;
  h.header_size = kFileHeaderSize;
  h.key_len = static_cast<std::uint32_t>(key.size());
  h.flags = kFileLeafSums;
  h.size = size;
  h.checksum = checksum;
  h.seq = seq;
  std::memcpy(out, &h, sizeof(h));
  if (!key.empty()) std::memcpy(out + kFileHeaderFixed, key.data(), key.size());
  h.header_sum = header_sum(out, key.size());
  std::memcpy(out + offsetof(FileHeader, header_sum), &h.header_sum, sizeof(h.header_sum));
}

std::string decode_file_header(const std::byte* in, DecodedHeader* out) {
  FileHeader h;
  std::memcpy(&h, in, sizeof(h));
  if (h.magic != kFileMagic) return "not a ferry object file (bad magic)";
  if (h.version != kFileVersion) return "unknown format version " + std::to_string(h.version);
  if (h.header_size != kFileHeaderSize) return "unexpected header size " + std::to_string(h.header_size);
  if (h.key_len == 0 || h.key_len > kMaxFileKeyLength) return "bad key length " + std::to_string(h.key_len);
  if ((h.flags & ~kFileLeafSums) != 0) return "unknown flags " + std::to_string(h.flags);
  const std::uint64_t want = header_sum(in, h.key_len);
  if (want != h.header_sum)
    return "header checksum mismatch (stored " + checksum_hex(h.header_sum) + ", computed " +
           checksum_hex(want) + ")";
  out->key.assign(reinterpret_cast<const char*>(in + kFileHeaderFixed), h.key_len);
  out->size = h.size;
  out->checksum = h.checksum;
  out->seq = h.seq;
  out->whole_sum = (h.flags & kFileLeafSums) == 0;
  return {};
}

}  // namespace ferry::xfer::store
