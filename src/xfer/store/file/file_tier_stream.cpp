// The file tier's streaming (streaming.h): an object file written and read
// piece by piece, each piece hashed while it sits in a buffer that stays in
// cache, with pwrite and pread. Large objects are split across the helper
// threads when nothing else runs: reads of one file run in parallel, and so do
// the source's reads and the hashing of a write (the page cache takes one
// buffered writer of a file at a time).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "xfer/checksum/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/file/helper_threads.h"
#include "xfer/store/quote_key.h"

namespace ferry::xfer::store {
namespace {

// A buffered piece is copied from the source, hashed and copied to the page
// cache while it stays in a core's L2; O_DIRECT pieces are larger, since each
// is one request to the disk.
constexpr std::size_t kBufferedPiece = std::size_t{256} << 10;
constexpr std::size_t kDirectPiece = std::size_t{1} << 20;
static_assert(kBufferedPiece % kChecksumLeafBytes == 0 && kDirectPiece % kChecksumLeafBytes == 0);
static_assert(kBufferedPiece % kIoAlign == 0 && kDirectPiece % kIoAlign == 0);

// An object is split across threads only in parts of at least this much.
constexpr std::uint64_t kMinPartBytes = std::uint64_t{8} << 20;

std::byte* piece_buffer(std::size_t bytes) {
  thread_local AlignedBuffer buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// The leaves of bytes [at, at + n) of an object, into their places in `leaves`.
void hash_leaves(const std::byte* piece, std::uint64_t at, std::size_t n, std::vector<std::uint64_t>& leaves) {
  for (std::size_t off = 0; off < n; off += kChecksumLeafBytes)
    leaves[(at + off) / kChecksumLeafBytes] =
        checksum({reinterpret_cast<const std::uint8_t*>(piece) + off, std::min(kChecksumLeafBytes, n - off)});
}

std::uint64_t sum_of_leaves(std::uint64_t size, const std::vector<std::uint64_t>& leaves) {
  if (size == 0) return checksum({});
  return leaves.size() == 1 ? leaves[0] : combine_leaf_sums(leaves);
}

// 0, or the errno of the first failed write.
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

// Bytes read (fewer than len only at the end of the file), or -errno.
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

// The first failure of an object's parts; the others stop at their next piece.
class FirstFailure {
 public:
  void set(XferStatus s) noexcept {
    XferStatus ok = XferStatus::Ok;
    status_.compare_exchange_strong(ok, s, std::memory_order_relaxed);
  }
  bool failed() const noexcept { return status_.load(std::memory_order_relaxed) != XferStatus::Ok; }
  XferStatus status() const noexcept { return status_.load(std::memory_order_relaxed); }

 private:
  std::atomic<XferStatus> status_{XferStatus::Ok};
};

}  // namespace

void FileTier::stream_parts(std::uint64_t size,
                            const std::function<void(std::uint64_t first, std::uint64_t end)>& fn) {
  const std::uint64_t piece = opts_.direct ? kDirectPiece : kBufferedPiece;
  std::uint64_t parts = 1;
  if (helpers_ && calls_running_.load(std::memory_order_relaxed) == 1)
    parts = std::min<std::uint64_t>(helpers_->helpers() + 1, size / kMinPartBytes);
  if (parts >= 2) {
    // Parts of whole pieces, so that every piece but the object's last is full
    // and aligned, and no leaf spans two parts.
    const std::uint64_t pieces = (size + piece - 1) / piece;
    const auto start = [&](std::uint64_t p) { return std::min(size, pieces * p / parts * piece); };
    if (helpers_->try_run(static_cast<unsigned>(parts), [&](unsigned p) { fn(start(p), start(p + 1)); })) return;
  }
  fn(0, size);
}

XferStatus FileTier::put_streamed(std::string_view key, std::uint64_t size, const PieceSource& source,
                                  std::uint64_t* checksum_out, Fault& fault) noexcept {
  if (key.empty()) return fault.raise(XferStatus::InvalidDesc, "file tier: empty key");
  if (key.size() > kMaxFileKeyLength)
    return fault.raise(XferStatus::InvalidDesc,
                       "file tier: a key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                           std::to_string(kMaxFileKeyLength),
                       key);
  const CallCount counted(calls_running_);
  PutItem item;
  item.key = key;
  item.data = ByteView{nullptr, size};
  ObjectWrite op;
  op.item = &item;
  if (!reserve(item)) return item.status;  // NoSpace, an answer
  op.reserved = true;
  op.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  if (const XferStatus s = files_.create_temp(op, fault); s != XferStatus::Ok) {
    fail_put(op, s);
    return s;
  }
  op.truncate = opts_.direct && io_round_up(size) != size;  // O_DIRECT writes the last page whole

  const std::size_t piece = opts_.direct ? kDirectPiece : kBufferedPiece;
  std::vector<std::uint64_t> leaves((size + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
  FirstFailure failure;
  stream_parts(size, [&](std::uint64_t first, std::uint64_t end) {
    std::byte* buf = piece_buffer(piece);
    for (std::uint64_t at = first; at < end && !failure.failed(); at += piece) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece, end - at));
      if (const XferStatus s = source.read(at, {reinterpret_cast<std::uint8_t*>(buf), n}, fault);
          s != XferStatus::Ok) {
        failure.set(s);
        return;
      }
      hash_leaves(buf, at, n, leaves);
      std::size_t len = n;
      if (opts_.direct) {
        len = io_round_up(n);
        std::memset(buf + n, 0, len - n);
      }
      if (const int err = pwrite_all(op.fd, buf, len, kFileHeaderSize + at); err != 0) {
        failure.set(files_.write_failed(op, -err, fault));
        return;
      }
    }
  });
  if (failure.failed()) {
    fail_put(op, failure.status());
    return failure.status();
  }
  item.checksum = sum_of_leaves(size, leaves);
  encode_file_header(key, size, item.checksum, op.seq, op.header.data());
  if (const int err = pwrite_all(op.fd, op.header.data(), kFileHeaderSize, 0); err != 0) {
    const XferStatus s = files_.write_failed(op, -err, fault);
    fail_put(op, s);
    return s;
  }
  finish_put(op, fault);
  *checksum_out = item.checksum;
  return item.status;
}

std::optional<XferStatus> FileTier::get_streamed(std::string_view key, std::uint64_t capacity,
                                                 const PieceSink& sink, std::uint64_t* size,
                                                 Fault& fault) noexcept {
  *size = 0;
  const CallCount counted(calls_running_);
  GetItem item;
  item.key = key;
  item.out = MutableByteView{nullptr, capacity};  // start_get checks the size against it; nothing lands there
  ObjectRead op;
  op.item = &item;
  op.relookup = true;
  if (!start_get(op, fault)) {  // missing, too large, unreadable, or empty: settled
    *size = item.size;
    return item.status;
  }
  if (op.pack && opts_.direct) {  // packed objects need not start on a page: get() reads those
    files_.release(op);
    return std::nullopt;
  }
  const std::string where = op.pack ? "pack " + opts_.dir + "/" + op.pack->name : "file " + opts_.dir + "/" + op.name;
  const auto corrupt = [&](const std::string& why) {
    return fault.raise(XferStatus::ChecksumMismatch, "file tier: key " + quote_key(key) + " in " + where + ": " + why,
                       key);
  };
  std::uint64_t n = op.hint, sum = op.sum, data_at = op.base;
  bool whole_sum = op.whole_sum;
  if (!op.pack) {
    // The file we opened is the authority (it may have been replaced since the
    // lookup): its header gives the size and the checksum.
    const ssize_t got = pread_all(op.fd, op.header.data(), kFileHeaderSize, 0);
    DecodedHeader h;
    std::string why;
    if (got < 0) {
      const XferStatus s = files_.read_failed(op, static_cast<int>(got), fault);
      return s;
    }
    if (static_cast<std::size_t>(got) < kFileHeaderSize) {
      why = "truncated (" + std::to_string(got) + " bytes)";
    } else if (why = decode_file_header(op.header.data(), &h); !why.empty()) {
      why = "bad header: " + why;
    }
    if (!why.empty()) {
      files_.release(op);
      return corrupt(why);
    }
    if (h.key != key) {
      files_.release(op);
      return fault.raise(XferStatus::IoError,
                         "file tier: " + where + " holds key " + quote_key(h.key) + ", not " + quote_key(key), key);
    }
    n = h.size;
    sum = h.checksum;
    whole_sum = h.whole_sum;
    data_at = kFileHeaderSize;
  }
  if (whole_sum) {  // of a build before leaf sums: get() verifies those
    files_.release(op);
    return std::nullopt;
  }
  *size = n;
  if (n > capacity) {
    files_.release(op);
    return fault.raise(XferStatus::TooLarge,
                       "file tier: object " + quote_key(key) + " has " + std::to_string(n) + " bytes, the buffer holds " +
                           std::to_string(capacity),
                       key);
  }

  const std::size_t piece = opts_.direct ? kDirectPiece : kBufferedPiece;
  std::vector<std::uint64_t> leaves((n + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
  FirstFailure failure;
  stream_parts(n, [&](std::uint64_t first, std::uint64_t end) {
    std::byte* buf = piece_buffer(piece);
    for (std::uint64_t at = first; at < end && !failure.failed(); at += piece) {
      const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(piece, end - at));
      // O_DIRECT reads whole pages; the last one comes back short at the file's end.
      const ssize_t got = pread_all(op.fd, buf, opts_.direct ? io_round_up(len) : len, data_at + at);
      if (got < 0) {
        failure.set(fault.raise(XferStatus::IoError,
                                "file tier: reading " + where + " for key " + quote_key(key) + ": " +
                                    std::strerror(static_cast<int>(-got)),
                                key));
        return;
      }
      if (static_cast<std::size_t>(got) < len) {
        failure.set(corrupt("truncated: " + std::to_string(n) + " bytes expected, " +
                            std::to_string(at + static_cast<std::uint64_t>(got)) + " there"));
        return;
      }
      hash_leaves(buf, at, len, leaves);
      if (const XferStatus s = sink.write(at, {reinterpret_cast<const std::uint8_t*>(buf), len}, fault);
          s != XferStatus::Ok) {
        failure.set(s);
        return;
      }
    }
  });
  files_.release(op);
  if (failure.failed()) return failure.status();
  if (const std::uint64_t got = sum_of_leaves(n, leaves); got != sum)
    return corrupt("checksum mismatch (stored " + checksum_hex(sum) + ", computed " + checksum_hex(got) + ")");
  return XferStatus::Ok;
}

}  // namespace ferry::xfer::store
