#pragma once
// Objects as builds before leaf checksums (checksum.h) stored them: flags 0 and
// the XXH3-64 of all the bytes as the checksum. For the tests that show such
// objects still read, verify, and are re-summed when copied.

#include <xxhash.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_names.h"

namespace ferry::xfer::store::test {

// Rewrites a header's flags (and its header_sum, which covers them).
inline void set_file_flags(std::byte* header, std::uint32_t flags) {
  FileHeader h;
  std::memcpy(&h, header, sizeof(h));
  h.flags = flags;
  h.header_sum = 0;
  std::memcpy(header, &h, sizeof(h));
  h.header_sum = XXH3_64bits(header, kFileHeaderFixed + h.key_len);
  std::memcpy(header + offsetof(FileHeader, header_sum), &h.header_sum, sizeof(h.header_sum));
}

// An object file as a build before leaf checksums wrote it: flags 0, and the
// XXH3-64 of all its bytes as its checksum.
inline void write_older_build_object_file(const std::string& dir, const std::string& key,
                                          const std::vector<std::uint8_t>& data) {
  AlignedBuffer h(kFileHeaderSize);
  encode_file_header(key, data.size(), XXH3_64bits(data.data(), data.size()), 0, h.data());
  set_file_flags(h.data(), 0);
  std::ofstream f(dir + "/" + object_file_name(key), std::ios::binary);
  f.write(reinterpret_cast<const char*>(h.data()), kFileHeaderSize);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace ferry::xfer::store::test
