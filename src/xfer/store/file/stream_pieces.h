#pragma once
// What the file tier's buffered streaming (file_tier_stream.cpp) and its
// O_DIRECT streaming (file_tier_direct.cpp) share: each thread's piece
// buffers, the leaf sums, the header, and whole reads and writes.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/object_io.h"

namespace ferry::xfer::store {

// This thread's piece buffer number k, of at least `bytes`, page aligned.
std::byte* piece_buffer(std::size_t bytes, unsigned k = 0);

// The leaves of bytes [at, at + n) of an object, into their places in `leaves`.
void hash_leaves(const std::byte* piece, std::uint64_t at, std::size_t n, std::vector<std::uint64_t>& leaves);

// The object's checksum from the sums of all its leaves.
std::uint64_t sum_of_leaves(std::uint64_t size, const std::vector<std::uint64_t>& leaves);

// Sets a streamed put's checksum from its leaves and encodes its header into
// op.header, ready to be written at offset 0.
void seal_header(ObjectWrite& op, std::uint64_t size, const std::vector<std::uint64_t>& leaves);

// 0, or the errno of the first failed write.
int pwrite_all(int fd, const std::byte* data, std::size_t len, std::uint64_t at);

// Bytes read (fewer than len only at the end of the file), or -errno.
ssize_t pread_all(int fd, std::byte* data, std::size_t len, std::uint64_t at);

}  // namespace ferry::xfer::store
