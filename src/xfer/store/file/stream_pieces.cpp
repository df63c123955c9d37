#include "xfer/store/file/stream_pieces.h"

#include <unistd.h>

#include <cerrno>

#include "xfer/store/file/file_format.h"

namespace ferry::xfer::store {

std::byte* piece_buffer(std::size_t bytes, unsigned k) {
  thread_local std::vector<AlignedBuffer> buffers;
  if (buffers.size() <= k) buffers.resize(k + 1);
  if (buffers[k].size() < bytes) buffers[k].resize(bytes);
  return buffers[k].data();
}

void hash_leaves(const std::byte* piece, std::uint64_t at, std::size_t n,
                 std::vector<std::uint64_t>& leaves) {
  leaf_checksums({reinterpret_cast<const std::uint8_t*>(piece), n}, &leaves[at / kChecksumLeafBytes]);
}

std::uint64_t sum_of_leaves(std::uint64_t size, const std::vector<std::uint64_t>& leaves) {
  if (size == 0) return checksum({});
  return leaves.size() == 1 ? leaves[0] : combine_leaf_sums(leaves);
}

void seal_header(ObjectWrite& op, std::uint64_t size, const std::vector<std::uint64_t>& leaves) {
  op.item->checksum = sum_of_leaves(size, leaves);
  encode_file_header(op.item->key, size, op.item->checksum, op.seq, op.header.data());
}

int pwrite_all(int fd, const std::byte* data, std::size_t len, std::uint64_t at) {
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, data, len, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    data += n;
    len -= static_cast<std::size_t>(n);
    at += static_cast<std::uint64_t>(n);
  }
  return 0;
}

ssize_t pread_all(int fd, std::byte* data, std::size_t len, std::uint64_t at) {
  std::size_t got = 0;
  while (got < len) {
    const ssize_t n = ::pread(fd, data + got, len - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

}  // namespace ferry::xfer::store
