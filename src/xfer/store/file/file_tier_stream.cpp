// The file tier's streaming (streaming.h): an object file written and read
// piece by piece, each piece hashed while it sits in a buffer.
// - Buffered: pwrite and pread of pieces that stay in cache. Large objects
//   take helper threads, each call its share of them (all of them alone in
//   the tier, half each beside one other call, none beside as many calls as
//   there are helpers):
//   - a read runs on the caller and its share, each reading part of the file;
//   - a write of lent memory, and a read into lent memory whose share is no
//     helper, is copied by one thread while a helper hashes each piece the
//     copy has passed; only while cores are idle, so that the hash takes
//     time no copy would have used (the page cache takes one buffered writer
//     of a file at a time);
//   - a write of copied pieces has up to two threads, each reading, hashing
//     and writing its half.
// - O_DIRECT: file_tier_direct.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "ferry/xfer/checksum.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/file/helper_threads.h"
#include "xfer/store/file/stream_pieces.h"
#include "xfer/store/quote_key.h"

namespace ferry::xfer::store {
namespace {

// Pieces where two threads write one file: a buffered writer takes the
// file's lock once per piece, and smaller pieces spend the gain of a second
// thread on lock hand-offs (ferry-stream-probe measures both sizes).
constexpr std::size_t kPiece = std::size_t{1} << 20;
static_assert(kPiece % kChecksumLeafBytes == 0);

// Buffered pieces otherwise. A piece is hashed where the copy left it (or
// found it), and the copy passes both its source's lines and its
// destination's through the core's 2 MiB L2: a 1 MiB piece is partly evicted
// again before it is hashed, while a 256 KiB one is hashed from cache
// (ferry-stream-probe compares the two; docs/bench/lmcache.md has its runs).
constexpr std::size_t kBufferedPiece = std::size_t{256} << 10;
static_assert(kPiece % kBufferedPiece == 0 && kBufferedPiece % kChecksumLeafBytes == 0);

// Where the buffered piece of lent memory that starts at byte `at` of an
// object ends (at most at `end`): where the file's offset is next a multiple
// of kBufferedPiece. The page cache sizes a write's folios by the write and
// aligns each to its own size, so a piece that starts at the header's 4 KiB
// past such a boundary is cut into folios of 4 to 128 KiB; aligned, it fills
// one of 256 KiB, and fewer, larger folios make the store faster
// (ferry-stream-probe --compare measures aligned against unaligned pieces;
// docs/xfer.md and docs/bench/lmcache.md give the results).
std::uint64_t piece_end(std::uint64_t data_at, std::uint64_t at, std::uint64_t end) {
  const std::uint64_t next_boundary = ((data_at + at) / kBufferedPiece + 1) * kBufferedPiece;
  return std::min(end, next_boundary - data_at);
}

// Hashes a range of an object's leaves in order as its bytes become ready.
// Pieces aligned to the file (piece_end) are not aligned to the leaves, which
// are aligned to the data: each call hashes the whole leaves ready so far, and
// the range's last leaf once its end is ready.
class LeafCursor {
 public:
  LeafCursor(std::uint64_t first, std::uint64_t end) : done_(first), end_(end) {}
  // hash(at, n) hashes leaves [at, at + n); its status is returned.
  template <class Hash>
  XferStatus ready_to(std::uint64_t ready, Hash&& hash) {
    const std::uint64_t to = ready >= end_ ? end_ : ready / kChecksumLeafBytes * kChecksumLeafBytes;
    if (to <= done_) return XferStatus::Ok;
    const std::uint64_t from = std::exchange(done_, to);
    return hash(from, static_cast<std::size_t>(to - from));
  }

 private:
  std::uint64_t done_;
  std::uint64_t end_;
};

std::uint64_t leaf_round_up(std::uint64_t at) {
  return (at + kChecksumLeafBytes - 1) / kChecksumLeafBytes * kChecksumLeafBytes;
}

// Threads on one object's put of copied (not lent) pieces: each reads and
// hashes its pieces while the other writes; more only queue for the file's
// lock (the page cache takes one buffered writer of a file at a time). Gets
// read one file from as many threads as there are.
constexpr unsigned kPutParts = 2;

// An object is split across threads only in parts of at least this much, and
// a lent one is hashed beside its writer only from this size.
constexpr std::uint64_t kMinPartBytes = std::uint64_t{8} << 20;

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

// How far the writer of an object has come, for the thread that hashes
// behind it.
class Progress {
 public:
  void advance(std::uint64_t to) noexcept {
    done_.store(to, std::memory_order_release);
    done_.notify_one();
  }
  void give_up() noexcept { advance(kGaveUp); }
  // Waits until more than `at` bytes are written; false when the writer gave up.
  bool wait_past(std::uint64_t at) const noexcept {
    for (std::uint64_t seen = done_.load(std::memory_order_acquire);;
         seen = done_.load(std::memory_order_acquire)) {
      if (seen == kGaveUp) return false;
      if (seen > at) return true;
      done_.wait(seen, std::memory_order_acquire);
    }
  }

 private:
  static constexpr std::uint64_t kGaveUp = ~std::uint64_t{0};
  std::atomic<std::uint64_t> done_{0};
};

// An object's `size` bytes in buffered pieces of lent memory, which starts at
// `data_at` in its file: copy(at, n) on one helper, in order, while a second
// helper runs hash(at, n) on whole leaves the copy has passed. Each returns a
// status; the first failure stops the other side at its next piece. nullopt:
// two helpers were not free, and nothing was done.
template <class Copy, class Hash>
std::optional<XferStatus> copy_with_hash_behind(HelperThreads& helpers, std::uint64_t data_at, std::uint64_t size,
                                                Copy&& copy, Hash&& hash) noexcept {
  FirstFailure failure;
  Progress copied;
  const auto copier = [&] {
    for (std::uint64_t at = 0, next = 0; at < size; at = next) {
      next = piece_end(data_at, at, size);
      XferStatus s = failure.status();
      if (s == XferStatus::Ok) s = copy(at, static_cast<std::size_t>(next - at));
      if (s != XferStatus::Ok) {
        failure.set(s);
        copied.give_up();
        return;
      }
      copied.advance(next);
    }
  };
  const auto hasher = [&] {
    // Leaf-aligned steps of a piece's size, each once the copy is past its end.
    for (std::uint64_t at = 0; at < size; at += kBufferedPiece) {
      const std::uint64_t to = std::min<std::uint64_t>(size, at + kBufferedPiece);
      if (!copied.wait_past(to - 1)) return;
      if (const XferStatus s = hash(at, static_cast<std::size_t>(to - at)); s != XferStatus::Ok) {
        failure.set(s);  // the copier stops at its next piece
        return;
      }
    }
  };
  if (!helpers.try_run(2, [&](unsigned role) { role == 0 ? copier() : hasher(); })) return std::nullopt;
  return failure.status();
}

}  // namespace

bool FileTier::try_stream_parts(std::uint64_t size, unsigned max_parts,
                                const std::function<void(std::uint64_t first, std::uint64_t end)>& fn) {
  if (!helpers_) return false;
  // The caller and its share of the helpers. Calls that start together may
  // count each other only after the first has taken more than its share: the
  // next then takes what is left of its own.
  const unsigned calls = std::max(1u, calls_running_.load(std::memory_order_relaxed));
  const unsigned share = helpers_->helpers() / calls;
  if (share == 0) return false;
  const std::uint64_t most = std::min<std::uint64_t>(size / kMinPartBytes, max_parts);
  for (const unsigned helpers : {share, std::min(share, helpers_->helpers() - helpers_->busy())}) {
    const std::uint64_t parts = std::min<std::uint64_t>(std::uint64_t{helpers} + 1, most);
    if (parts < 2) continue;
    // Parts of whole pieces, so that every piece but the object's last is full
    // and aligned, and no leaf spans two parts.
    const std::uint64_t pieces = (size + kPiece - 1) / kPiece;
    const auto start = [&](std::uint64_t p) { return std::min(size, pieces * p / parts * kPiece); };
    if (helpers_->try_run(static_cast<unsigned>(parts), [&](unsigned p) { fn(start(p), start(p + 1)); }))
      return true;
  }
  return false;
}

XferStatus FileTier::write_pieces(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                                  std::vector<std::uint64_t>& leaves, Fault& fault) noexcept {
  if (source.in_place(0, size) != nullptr) {
    if (const auto s = write_hashed_behind(op, size, source, leaves, fault)) return *s;
    return write_lent(op, size, source, leaves, fault);
  }
  FirstFailure failure;
  const auto write_range = [&](std::uint64_t first, std::uint64_t end) {
    std::byte* buf = piece_buffer(kPiece);
    for (std::uint64_t at = first; at < end && !failure.failed(); at += kPiece) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, end - at));
      XferStatus s = source.read(at, {reinterpret_cast<std::uint8_t*>(buf), n}, fault);
      if (s == XferStatus::Ok) hash_leaves(buf, at, n, leaves);
      if (s == XferStatus::Ok) {
        if (const int err = pwrite_all(op.fd, buf, n, kFileHeaderSize + at); err != 0)
          s = files_.write_failed(op, -err, fault);
      }
      if (s != XferStatus::Ok) {
        failure.set(s);
        return;
      }
    }
  };
  if (!try_stream_parts(size, kPutParts, write_range)) write_range(0, size);
  return failure.status();
}

XferStatus FileTier::write_lent(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                                std::vector<std::uint64_t>& leaves, Fault& fault) noexcept {
  // Each piece's leaves are hashed where the bytes are (which brings them into
  // cache), and the piece is written from there: one copy, as a write(2) of them would make.
  LeafCursor hashed(0, size);
  const auto hash = [&](std::uint64_t at, std::size_t n) {
    return source.leaf_sums(at, n, &leaves[at / kChecksumLeafBytes], fault);
  };
  for (std::uint64_t at = 0, next = 0; at < size; at = next) {
    next = piece_end(kFileHeaderSize, at, size);
    const auto n = static_cast<std::size_t>(next - at);
    // Lent at the start: a piece that is not lent now went away since.
    const auto* from = reinterpret_cast<const std::byte*>(source.in_place(at, n));
    if (from == nullptr) return source_gone(op.item->key, at, n, fault);
    if (const XferStatus s = hashed.ready_to(leaf_round_up(next), hash); s != XferStatus::Ok) return s;
    if (const int err = pwrite_all(op.fd, from, n, kFileHeaderSize + at); err != 0)
      return err == EFAULT ? source_gone(op.item->key, at, n, fault) : files_.write_failed(op, -err, fault);
  }
  return XferStatus::Ok;
}

bool FileTier::may_hash_beside(std::uint64_t size) const noexcept {
  if (!helpers_ || size < kMinPartBytes) return false;
  return calls_running_.load(std::memory_order_relaxed) + helpers_->busy() < cores_;
}

std::optional<XferStatus> FileTier::write_hashed_behind(ObjectWrite& op, std::uint64_t size,
                                                        const PieceSource& source,
                                                        std::vector<std::uint64_t>& leaves,
                                                        Fault& fault) noexcept {
  if (!may_hash_beside(size)) return std::nullopt;
  return copy_with_hash_behind(
      *helpers_, kFileHeaderSize, size,
      [&](std::uint64_t at, std::size_t n) {
        // Lent at the start: a piece that is not lent now went away since.
        const auto* from = source.in_place(at, n);
        if (from == nullptr) return source_gone(op.item->key, at, n, fault);
        const int err = pwrite_all(op.fd, reinterpret_cast<const std::byte*>(from), n, kFileHeaderSize + at);
        if (err == 0) return XferStatus::Ok;
        return err == EFAULT ? source_gone(op.item->key, at, n, fault) : files_.write_failed(op, -err, fault);
      },
      [&](std::uint64_t at, std::size_t n) {
        return source.leaf_sums(at, n, &leaves[at / kChecksumLeafBytes], fault);
      });
}

std::optional<XferStatus> FileTier::read_hashed_behind(const Piecewise& r, std::string_view key,
                                                       const PieceSink& sink,
                                                       std::vector<std::uint64_t>& leaves,
                                                       Fault& fault) noexcept {
  if (!may_hash_beside(r.size)) return std::nullopt;
  return copy_with_hash_behind(
      *helpers_, r.data_at, r.size,
      [&](std::uint64_t at, std::size_t len) {
        // Lent at the start: a piece that is not lent now went away since.
        auto* into = reinterpret_cast<std::byte*>(sink.in_place(at, len));
        if (into == nullptr) return sink_gone(key, at, len, fault);
        const ssize_t got = pread_all(r.fd, into, len, r.data_at + at);
        if (got < 0)
          return got == -EFAULT ? sink_gone(key, at, len, fault)
                                : read_error(r, key, static_cast<int>(-got), fault);
        if (static_cast<std::size_t>(got) < len)
          return truncated(r, key, at + static_cast<std::uint64_t>(got), fault);
        return XferStatus::Ok;
      },
      [&](std::uint64_t at, std::size_t len) {
        return sink.leaf_sums(at, len, &leaves[at / kChecksumLeafBytes], fault);
      });
}

XferStatus FileTier::read_pieces(const Piecewise& r, std::string_view key, const PieceSink& sink,
                                 std::vector<std::uint64_t>& leaves, Fault& fault) noexcept {
  // Read by the caller and its share of the helpers at once; where that share
  // is none, a lent one may still get a helper to hash behind the read.
  FirstFailure failure;
  // One thread's part: into lent bytes straight from the page cache, in pieces
  // aligned to the file (piece_end), and hashed there while in cache; else
  // through this thread's buffer.
  const auto read_range = [&](std::uint64_t first, std::uint64_t end) {
    const bool lent = sink.in_place(first, end - first) != nullptr;
    std::byte* buf = lent ? nullptr : piece_buffer(kBufferedPiece);
    LeafCursor hashed(first, end);
    const auto hash = [&](std::uint64_t at, std::size_t n) {
      return sink.leaf_sums(at, n, &leaves[at / kChecksumLeafBytes], fault);
    };
    for (std::uint64_t at = first, next = 0; at < end && !failure.failed(); at = next) {
      next = lent ? piece_end(r.data_at, at, end) : std::min<std::uint64_t>(end, at + kBufferedPiece);
      const auto len = static_cast<std::size_t>(next - at);
      auto* into = lent ? reinterpret_cast<std::byte*>(sink.in_place(at, len)) : buf;
      if (into == nullptr) {  // lent at the start: it went away since
        failure.set(sink_gone(key, at, len, fault));
        return;
      }
      const ssize_t got = pread_all(r.fd, into, len, r.data_at + at);
      if (got < 0) {
        failure.set(lent && got == -EFAULT ? sink_gone(key, at, len, fault)
                                           : read_error(r, key, static_cast<int>(-got), fault));
        return;
      }
      if (static_cast<std::size_t>(got) < len) {
        failure.set(truncated(r, key, at + static_cast<std::uint64_t>(got), fault));
        return;
      }
      const XferStatus s = lent ? hashed.ready_to(next, hash)
                                : (hash_leaves(buf, at, len, leaves),
                                   sink.write(at, {reinterpret_cast<const std::uint8_t*>(buf), len}, fault));
      if (s != XferStatus::Ok) {
        failure.set(s);
        return;
      }
    }
  };
  if (try_stream_parts(r.size, ~0u, read_range)) return failure.status();
  if (sink.in_place(0, r.size) != nullptr) {
    if (const auto s = read_hashed_behind(r, key, sink, leaves, fault)) return *s;
  }
  read_range(0, r.size);
  return failure.status();
}

XferStatus FileTier::read_error(const Piecewise& r, std::string_view key, int err, Fault& fault) noexcept {
  return fault.raise(
      XferStatus::IoError,
      "file tier: reading " + r.where + " for key " + quote_key(key) + ": " + std::strerror(err), key);
}

XferStatus FileTier::source_gone(std::string_view key, std::uint64_t at, std::size_t len,
                                 Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError,
                     "file tier: storing " + quote_key(key) + ": " + std::to_string(len) +
                         " bytes at offset " + std::to_string(at) +
                         " of the application's memory went away while being written",
                     key);
}

XferStatus FileTier::sink_gone(std::string_view key, std::uint64_t at, std::size_t len,
                               Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError,
                     "file tier: reading " + quote_key(key) + ": " + std::to_string(len) +
                         " bytes at offset " + std::to_string(at) +
                         " of the application's memory went away while being filled",
                     key);
}

XferStatus FileTier::truncated(const Piecewise& r, std::string_view key, std::uint64_t there,
                               Fault& fault) noexcept {
  return fault.raise(XferStatus::ChecksumMismatch,
                     "file tier: key " + quote_key(key) + " in " + r.where + ": truncated: " +
                         std::to_string(r.size) + " bytes expected, " + std::to_string(there) + " there",
                     key);
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

  std::vector<std::uint64_t> leaves((size + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
  XferStatus written = XferStatus::Ok;
  if (opts_.direct) {
    written = write_file_direct(op, size, source, leaves, fault);  // the header in the same batch
  } else if (written = write_pieces(op, size, source, leaves, fault); written == XferStatus::Ok) {
    seal_header(op, size, leaves);
    if (const int err = pwrite_all(op.fd, op.header.data(), kFileHeaderSize, 0); err != 0)
      written = files_.write_failed(op, -err, fault);
  }
  if (written != XferStatus::Ok) {
    fail_put(op, written);
    return written;
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
  const std::string where =
      op.pack ? "pack " + opts_.dir + "/" + op.pack->name : "file " + opts_.dir + "/" + op.name;
  if (!op.pack && opts_.direct) return get_file_direct(op, key, capacity, sink, size, where, fault);
  std::uint64_t n = op.hint, sum = op.sum, data_at = op.base;
  bool whole_sum = op.whole_sum;
  if (!op.pack) {
    // The file we opened is the authority (it may have been replaced since the
    // lookup): its header gives the size and the checksum.
    const ssize_t got = pread_all(op.fd, op.header.data(), kFileHeaderSize, 0);
    DecodedHeader h;
    if (const auto failed = check_file_header(op, key, got, where, &h, fault)) return failed;
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
    return too_large(key, n, capacity, fault);
  }

  std::vector<std::uint64_t> leaves((n + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
  const Piecewise read{op.fd, data_at, n, where};
  const XferStatus s = read_pieces(read, key, sink, leaves, fault);
  files_.release(op);
  if (s != XferStatus::Ok) return s;
  if (const std::uint64_t got = sum_of_leaves(n, leaves); got != sum)
    return corrupt(key, where,
                   "checksum mismatch (stored " + checksum_hex(sum) + ", computed " + checksum_hex(got) + ")",
                   fault);
  return XferStatus::Ok;
}

std::optional<XferStatus> FileTier::check_file_header(ObjectRead& op, std::string_view key, ssize_t got,
                                                      const std::string& where, DecodedHeader* h,
                                                      Fault& fault) noexcept {
  if (got < 0) return files_.read_failed(op, static_cast<int>(got), fault);
  std::string why;
  if (static_cast<std::size_t>(got) < kFileHeaderSize) {
    why = "truncated (" + std::to_string(got) + " bytes)";
  } else if (why = decode_file_header(op.header.data(), h); !why.empty()) {
    why = "bad header: " + why;
  }
  if (!why.empty()) {
    files_.release(op);
    return corrupt(key, where, why, fault);
  }
  if (h->key != key) {
    files_.release(op);
    return fault.raise(XferStatus::IoError,
                       "file tier: " + where + " holds key " + quote_key(h->key) + ", not " + quote_key(key),
                       key);
  }
  return std::nullopt;
}

XferStatus FileTier::corrupt(std::string_view key, const std::string& where, const std::string& why,
                             Fault& fault) noexcept {
  return fault.raise(XferStatus::ChecksumMismatch,
                     "file tier: key " + quote_key(key) + " in " + where + ": " + why, key);
}

XferStatus FileTier::too_large(std::string_view key, std::uint64_t size, std::uint64_t capacity,
                               Fault& fault) noexcept {
  return fault.raise(XferStatus::TooLarge,
                     "file tier: object " + quote_key(key) + " has " + std::to_string(size) +
                         " bytes, the buffer holds " + std::to_string(capacity),
                     key);
}

}  // namespace ferry::xfer::store
