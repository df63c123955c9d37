#include "xfer/store/file/pack_format.h"

#include <xxhash.h>

#include <cstring>

#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"

namespace ferry::xfer::store {
namespace {

std::uint64_t header_sum(const std::byte* in) {
  std::byte copy[kPackHeaderFixed];
  std::memcpy(copy, in, kPackHeaderFixed);
  std::memset(copy + offsetof(PackHeader, header_sum), 0, sizeof(std::uint64_t));
  return XXH3_64bits(copy, kPackHeaderFixed);
}

}  // namespace

void encode_pack_record(std::string_view key, std::uint64_t seq, std::uint64_t offset, std::uint64_t size,
                        std::uint64_t checksum, std::vector<std::byte>* index) {
  PackRecordFixed r{};
  r.seq = seq;
  r.offset = offset;
  r.size = size;
  r.checksum = checksum;
  r.key_len = static_cast<std::uint32_t>(key.size());
  const std::size_t at = index->size();
  index->resize(at + pack_record_size(key.size()), std::byte{0});
  std::memcpy(index->data() + at, &r, sizeof(r));
  std::memcpy(index->data() + at + kPackRecordFixed, key.data(), key.size());
}

void encode_pack_header(std::uint64_t seq, std::uint32_t count, std::uint64_t index_offset,
                        const std::byte* index, std::uint64_t index_size, std::byte* out) {
  std::memset(out, 0, kPackHeaderSize);
  PackHeader h{};
  h.magic = kPackMagic;
  h.version = kPackVersion;
  h.header_size = kPackHeaderSize;
  h.seq = seq;
  h.count = count;
  h.flags = kPackLeafSums;
  h.index_offset = index_offset;
  h.index_size = index_size;
  h.index_sum = XXH3_64bits(index, index_size);
  std::memcpy(out, &h, sizeof(h));
  h.header_sum = header_sum(out);
  std::memcpy(out + offsetof(PackHeader, header_sum), &h.header_sum, sizeof(h.header_sum));
}

std::string decode_pack_header(const std::byte* in, PackHeader* out) {
  PackHeader h;
  std::memcpy(&h, in, sizeof(h));
  if (h.magic != kPackMagic) return "not a ferry pack (bad magic)";
  if (h.version != kPackVersion) return "unknown pack version " + std::to_string(h.version);
  if (h.header_size != kPackHeaderSize) return "unexpected header size " + std::to_string(h.header_size);
  if ((h.flags & ~kPackLeafSums) != 0) return "unknown flags " + std::to_string(h.flags);
  const std::uint64_t want = header_sum(in);
  if (want != h.header_sum)
    return "header checksum mismatch (stored " + checksum_hex(h.header_sum) + ", computed " +
           checksum_hex(want) + ")";
  if (h.index_offset < kPackHeaderSize || h.index_offset % kIoAlign != 0)
    return "bad index offset " + std::to_string(h.index_offset);
  if (h.index_size > (std::uint64_t{1} << 32) || h.index_size < std::uint64_t{h.count} * kPackRecordFixed)
    return "bad index size " + std::to_string(h.index_size) + " for " + std::to_string(h.count) + " records";
  *out = h;
  return {};
}

std::string decode_pack_index(const PackHeader& header, const std::byte* index, std::vector<PackRecord>* out) {
  const std::uint64_t got = XXH3_64bits(index, header.index_size);
  if (got != header.index_sum)
    return "index checksum mismatch (stored " + checksum_hex(header.index_sum) + ", computed " +
           checksum_hex(got) + ")";
  out->clear();
  out->reserve(header.count);
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < header.count; ++i) {
    if (header.index_size - at < kPackRecordFixed) return "index record " + std::to_string(i) + " is cut off";
    PackRecordFixed r;
    std::memcpy(&r, index + at, sizeof(r));
    if (r.key_len == 0 || r.key_len > kMaxFileKeyLength || r.reserved != 0 ||
        header.index_size - at < pack_record_size(r.key_len))
      return "index record " + std::to_string(i) + " has a bad key length " + std::to_string(r.key_len);
    if (r.offset < kPackHeaderSize || r.offset % kIoAlign != 0 || r.offset > header.index_offset ||
        r.size > header.index_offset - r.offset)
      return "index record " + std::to_string(i) + " points outside the data (offset " +
             std::to_string(r.offset) + ", size " + std::to_string(r.size) + ")";
    PackRecord rec;
    rec.key.assign(reinterpret_cast<const char*>(index + at + kPackRecordFixed), r.key_len);
    rec.seq = r.seq;
    rec.offset = r.offset;
    rec.size = r.size;
    rec.checksum = r.checksum;
    rec.whole_sum = (header.flags & kPackLeafSums) == 0;
    out->push_back(std::move(rec));
    at += pack_record_size(r.key_len);
  }
  if (at != header.index_size) return "index has " + std::to_string(header.index_size - at) + " stray bytes";
  return {};
}

}  // namespace ferry::xfer::store
