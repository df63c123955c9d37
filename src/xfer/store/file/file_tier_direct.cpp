// The file tier's O_DIRECT streaming (streaming.h). Whole pages of lent
// memory go to and from the disk in place; the rest passes through the
// lane's buffers.
// - An object of up to kWholeMax bytes moves in one request, its header page
//   and its data together: one request per object is what the disk serves
//   best (a header request beside the data's cost a virtio disk 6-11%, and
//   1 MiB pieces 6-8%, against one: direct_shape_probe.py, docs/bench/nixl.md).
// - A larger one goes through io_uring in pieces, up to kDirectInFlight in
//   flight, so that the disk writes (or reads) one piece while the next is
//   filled (or checked). A put submits each piece as soon as it is filled and
//   queues its header, which holds the sum of every piece, last. A get reads
//   the header beside the data, which it lays out for the index's size, and
//   checks the header once all is in.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/file/stream_pieces.h"
#include "xfer/store/file/uring.h"
#include "xfer/store/file/uring_batch.h"
#include "xfer/store/quote_key.h"

namespace ferry::xfer::store {
namespace {

// O_DIRECT pieces in flight per object: enough that one object keeps tens of
// MiB outstanding, which a virtio disk needs to reach its rate (a single 32 MiB
// write(2) gets there alone; four pieces of 1 MiB did not: docs/bench/lmcache.md).
constexpr unsigned kDirectInFlight = 16;

// Objects up to this size move in one request, through a buffer of this size
// per lane where they are not lent: as much as a larger one's pieces keep in
// flight.
constexpr std::uint64_t kWholeMax = std::uint64_t{kDirectInFlight} * kPiece;

// One transfer in flight: a piece of the object, or its header.
struct DirectPiece {
  std::size_t slot = 0;
  std::byte* buf = nullptr;   // the slot's buffer, once one was needed (buffer())
  std::byte* io = nullptr;    // where the bytes move to or from
  bool lent = false;          // io is the application's memory
  bool header = false;        // the file's header, not a piece of the object
  std::uint64_t at = 0;       // in the object
  std::uint64_t file_at = 0;  // in the file
  std::size_t n = 0;          // the object's bytes in it
  std::size_t len = 0;        // bytes to move: n, padded to a page
  std::size_t done = 0;
};

// A slot's buffer is taken only for a piece that is not lent (the first call
// of buffer()), so an agent's lanes, which stream lent memory, keep none.
std::vector<DirectPiece> direct_slots(std::uint64_t transfers, unsigned ring_entries) {
  std::vector<DirectPiece> slots(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>({kDirectInFlight, transfers, ring_entries})));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  return slots;
}

std::byte* buffer(DirectPiece& p) {
  if (p.buf == nullptr) p.buf = piece_buffer(kPiece, static_cast<unsigned>(p.slot));
  return p.buf;
}

// Piece i of an object of `size` bytes, whose data starts at kFileHeaderSize.
void lay_out_piece(DirectPiece& p, std::uint64_t i, std::uint64_t size) {
  p.header = false;
  p.at = i * kPiece;
  p.file_at = kFileHeaderSize + p.at;
  p.n = static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, size - p.at));
  p.len = io_round_up(p.n);
  p.done = 0;
}

void lay_out_header(DirectPiece& p, std::byte* header) {
  p.header = true;
  p.io = header;
  p.lent = false;
  p.at = p.file_at = 0;
  p.n = p.len = kFileHeaderSize;
  p.done = 0;
}

}  // namespace

XferStatus FileTier::write_file_direct(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                                       std::vector<std::uint64_t>& leaves, Fault& fault) noexcept {
  if (size <= kWholeMax) return write_whole_direct(op, size, source, leaves, fault);
  auto ring = rings_->take_or_raise(spec_, fault);
  if (!ring) return XferStatus::IoError;
  const std::uint64_t pieces = piece_count(size);
  std::vector<DirectPiece> slots = direct_slots(pieces + 1, (*ring)->entries());
  XferStatus status = XferStatus::Ok;
  const auto queue = [&](DirectPiece& p) {
    io_uring_sqe* sqe = next_sqe(**ring);
    io_uring_prep_write(sqe, op.fd, p.io + p.done, static_cast<unsigned>(p.len - p.done), p.file_at + p.done);
    io_uring_sqe_set_data64(sqe, p.slot);
  };
  run_batch(
      **ring, slots, pieces + 1,
      [&](std::size_t i, DirectPiece& p) {
        if (status != XferStatus::Ok) return false;
        if (i == pieces) {
          // Every piece was hashed before its write was queued: the sum is whole.
          seal_header(op, size, leaves);
          lay_out_header(p, op.header.data());
        } else {
          lay_out_piece(p, i, size);
          // Whole pages of lent memory go to the disk from where they are
          // (after hashing them there); the rest through the slot's buffer.
          const auto* lent = reinterpret_cast<const std::byte*>(source.in_place(p.at, p.n));
          p.lent = lent != nullptr && io_aligned(lent) && p.n == p.len;
          if (p.lent) {
            p.io = const_cast<std::byte*>(lent);
            status = source.leaf_sums(p.at, p.n, &leaves[p.at / kChecksumLeafBytes], fault);
          } else {
            p.io = buffer(p);
            status = source.read(p.at, {reinterpret_cast<std::uint8_t*>(p.buf), p.n}, fault);
            hash_leaves(p.buf, p.at, p.n, leaves);
            std::memset(p.buf + p.n, 0, p.len - p.n);  // the last page whole; cut off at close
          }
          if (status != XferStatus::Ok) return false;
        }
        queue(p);
        // A failed submit leaves it queued: the batch's next wait submits it.
        io_uring_submit((*ring)->get());
        return true;
      },
      [&](DirectPiece& p, int res) {
        if (res <= 0) {
          if (status == XferStatus::Ok)
            status = res == -EFAULT && p.lent ? source_gone(op.item->key, p.at, p.n, fault)
                                              : files_.write_failed(op, res, fault);
          return false;
        }
        p.done += static_cast<std::size_t>(res);
        if (p.done >= p.len) return false;
        queue(p);  // a short write: the rest
        return true;
      });
  return status;
}

XferStatus FileTier::write_whole_direct(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                                        std::vector<std::uint64_t>& leaves, Fault& fault) noexcept {
  const auto n = static_cast<std::size_t>(size);
  const std::size_t padded = io_round_up(n);
  // Whole pages of lent memory go from where they are, hashed there, and a
  // last partial page through a padded page of this lane's; memory that is
  // not lent is copied after the header page in this lane's buffer.
  const auto* lent = reinterpret_cast<const std::byte*>(source.in_place(0, n));
  const bool in_place = lent != nullptr && io_aligned(lent);
  const std::size_t body = in_place ? n & ~(kIoAlign - 1) : 0;
  std::byte* buf = piece_buffer(in_place ? kIoAlign : kFileHeaderSize + kWholeMax);
  XferStatus status = XferStatus::Ok;
  if (in_place) {
    status = source.leaf_sums(0, n, leaves.data(), fault);
    if (status == XferStatus::Ok && body < n) {
      status = source.read(body, {reinterpret_cast<std::uint8_t*>(buf), n - body}, fault);
      std::memset(buf + (n - body), 0, kIoAlign - (n - body));  // cut off at close
    }
  } else if (n > 0) {
    std::byte* data = buf + kFileHeaderSize;
    status = source.read(0, {reinterpret_cast<std::uint8_t*>(data), n}, fault);
    if (status == XferStatus::Ok) hash_leaves(data, 0, n, leaves);
    std::memset(data + n, 0, padded - n);  // the last page whole; cut off at close
  }
  if (status != XferStatus::Ok) return status;
  seal_header(op, size, leaves);
  iovec iov[3];
  int count = 1;
  if (in_place) {
    iov[0] = {op.header.data(), kFileHeaderSize};
    if (body > 0) iov[count++] = {const_cast<std::byte*>(lent), body};
    if (body < n) iov[count++] = {buf, kIoAlign};
  } else {
    std::memcpy(buf, op.header.data(), kFileHeaderSize);
    iov[0] = {buf, kFileHeaderSize + padded};
  }
  for (std::size_t at = 0, total = kFileHeaderSize + padded; at < total;) {
    const ssize_t done = ::pwritev(op.fd, iov, count, static_cast<off_t>(at));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      const int res = done < 0 ? -errno : 0;
      return res == -EFAULT && in_place ? source_gone(op.item->key, 0, n, fault)
                                        : files_.write_failed(op, res, fault);
    }
    at += static_cast<std::size_t>(done);
    advance_iov(iov, &count, static_cast<std::size_t>(done));
  }
  return XferStatus::Ok;
}

FileTier::DirectFileRead FileTier::read_whole_direct(const Piecewise& r, std::string_view key,
                                                     const PieceSink& sink,
                                                     std::vector<std::uint64_t>& leaves, std::byte* header,
                                                     Fault& fault) noexcept {
  DirectFileRead out;
  const auto n = static_cast<std::size_t>(r.size);
  const std::size_t padded = io_round_up(n);
  // Whole pages straight into lent memory, a last partial page through a page
  // of this lane's; memory that is not lent through this lane's buffer.
  auto* lent = reinterpret_cast<std::byte*>(sink.in_place(0, n));
  const bool in_place = lent != nullptr && io_aligned(lent);
  const std::size_t body = in_place ? n & ~(kIoAlign - 1) : 0;
  std::byte* buf = piece_buffer(in_place ? kIoAlign : kFileHeaderSize + kWholeMax);
  iovec iov[3];
  int count = 1;
  if (in_place) {
    iov[0] = {header, kFileHeaderSize};
    if (body > 0) iov[count++] = {lent, body};
    if (body < n) iov[count++] = {buf, kIoAlign};
  } else {
    iov[0] = {buf, kFileHeaderSize + padded};
  }
  // Whole pages: the last one comes back short at the file's end.
  std::size_t got = 0;
  int err = 0;
  for (const std::size_t total = kFileHeaderSize + padded; got < total;) {
    const ssize_t done = ::preadv(r.fd, iov, count, static_cast<off_t>(got));
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) err = errno;
    if (done <= 0) break;
    got += static_cast<std::size_t>(done);
    advance_iov(iov, &count, static_cast<std::size_t>(done));
  }
  if (!in_place) std::memcpy(header, buf, std::min(got, kFileHeaderSize));
  out.header_got =
      got < kFileHeaderSize && err != 0 ? -err : static_cast<ssize_t>(std::min(got, kFileHeaderSize));
  if (err == EFAULT && in_place) {
    // The application's pages went away: the whole request failed, the
    // header with it, which the caller checks first. Read that alone.
    out.data = sink_gone(key, 0, n, fault);
    if (got < kFileHeaderSize) out.header_got = pread_all(r.fd, header, kFileHeaderSize, 0);
    return out;
  }
  if (err != 0) {
    if (got >= kFileHeaderSize) out.data = read_error(r, key, err, fault);
    return out;
  }
  if (got < kFileHeaderSize + n) {  // the header tells whether the file is short or another version
    out.ended_at = got > kFileHeaderSize ? got - kFileHeaderSize : 0;
    return out;
  }
  if (in_place) {
    if (body < n) out.data = sink.write(body, {reinterpret_cast<const std::uint8_t*>(buf), n - body}, fault);
    if (out.data == XferStatus::Ok) out.data = sink.leaf_sums(0, n, leaves.data(), fault);
  } else if (n > 0) {
    hash_leaves(buf + kFileHeaderSize, 0, n, leaves);
    out.data = sink.write(0, {reinterpret_cast<const std::uint8_t*>(buf + kFileHeaderSize), n}, fault);
  }
  return out;
}

FileTier::DirectFileRead FileTier::read_file_direct(const Piecewise& r, std::string_view key,
                                                    const PieceSink& sink, std::vector<std::uint64_t>& leaves,
                                                    std::byte* header, Fault& fault) noexcept {
  DirectFileRead out;
  auto ring = rings_->take_or_raise(spec_, fault);
  if (!ring) {
    out.data = XferStatus::IoError;
    return out;
  }
  const std::uint64_t pieces = piece_count(r.size);
  std::vector<DirectPiece> slots = direct_slots(pieces + 1, (*ring)->entries());
  // Whole pages: the last one comes back short at the file's end.
  const auto queue = [&](DirectPiece& p) {
    io_uring_sqe* sqe = next_sqe(**ring);
    io_uring_prep_read(sqe, r.fd, p.io + p.done, static_cast<unsigned>(p.len - p.done), p.file_at + p.done);
    io_uring_sqe_set_data64(sqe, p.slot);
  };
  const auto data_failed = [&] { return out.data != XferStatus::Ok || out.ended_at != kNotShort; };
  run_batch(
      **ring, slots, pieces + 1,
      [&](std::size_t i, DirectPiece& p) {
        if (i == 0) {
          lay_out_header(p, header);
        } else {
          if (data_failed()) return false;
          lay_out_piece(p, i - 1, r.size);
          // Whole pages straight into lent memory; the rest through the slot's buffer.
          auto* lent = reinterpret_cast<std::byte*>(sink.in_place(p.at, p.n));
          p.lent = lent != nullptr && io_aligned(lent) && p.n == p.len;
          p.io = p.lent ? lent : buffer(p);
        }
        queue(p);
        return true;
      },
      [&](DirectPiece& p, int res) {
        if (p.header) {
          if (res < 0) {
            out.header_got = res;
            return false;
          }
          p.done += static_cast<std::size_t>(res);
          out.header_got = static_cast<ssize_t>(p.done);
          if (res > 0 && p.done < p.len) {
            queue(p);
            return true;
          }
          return false;
        }
        if (out.data != XferStatus::Ok) return false;
        if (res < 0) {
          out.data =
              res == -EFAULT && p.lent ? sink_gone(key, p.at, p.n, fault) : read_error(r, key, -res, fault);
          return false;
        }
        p.done += static_cast<std::size_t>(res);
        if (res > 0 && p.done < p.n) {
          queue(p);  // a short read: the rest
          return true;
        }
        if (p.done < p.n) {  // the header tells whether the file is short or another version
          out.ended_at = std::min(out.ended_at, p.at + p.done);
          return false;
        }
        if (p.lent) {
          out.data = sink.leaf_sums(p.at, p.n, &leaves[p.at / kChecksumLeafBytes], fault);
        } else {
          hash_leaves(p.buf, p.at, p.n, leaves);
          out.data = sink.write(p.at, {reinterpret_cast<const std::uint8_t*>(p.buf), p.n}, fault);
        }
        return false;
      });
  return out;
}

std::optional<XferStatus> FileTier::get_file_direct(ObjectRead& op, std::string_view key,
                                                    std::uint64_t capacity, const PieceSink& sink,
                                                    std::uint64_t* size, const std::string& where,
                                                    Fault& fault) noexcept {
  std::uint64_t n = op.hint;
  for (bool again = false;; again = true) {
    std::vector<std::uint64_t> leaves((n + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
    const Piecewise r{op.fd, kFileHeaderSize, n, where};
    const DirectFileRead got = n <= kWholeMax
                                   ? read_whole_direct(r, key, sink, leaves, op.header.data(), fault)
                                   : read_file_direct(r, key, sink, leaves, op.header.data(), fault);
    DecodedHeader h;
    if (const auto failed = check_file_header(op, key, got.header_got, where, &h, fault)) return failed;
    if (h.whole_sum) {  // of a build before leaf sums: get() verifies those
      files_.release(op);
      return std::nullopt;
    }
    *size = h.size;
    if (h.size != n && !again && got.data == XferStatus::Ok) {
      // Replaced since the lookup by a version of another size: read that.
      if (h.size > capacity) {
        files_.release(op);
        return too_large(key, h.size, capacity, fault);
      }
      n = h.size;
      continue;
    }
    files_.release(op);
    if (got.data != XferStatus::Ok) return got.data;
    if (h.size != n) return corrupt(key, where, "its header changed while it was read", fault);
    if (got.ended_at != kNotShort)
      return truncated({op.fd, kFileHeaderSize, n, where}, key, got.ended_at, fault);
    if (const std::uint64_t sum = sum_of_leaves(n, leaves); sum != h.checksum)
      return corrupt(
          key, where,
          "checksum mismatch (stored " + checksum_hex(h.checksum) + ", computed " + checksum_hex(sum) + ")",
          fault);
    return XferStatus::Ok;
  }
}

}  // namespace ferry::xfer::store
