// The file tier's O_DIRECT streaming (streaming.h): an object file's header
// and data through io_uring in pieces of up to 4 MiB, up to four in flight,
// the header page in the same request as the first piece. Whole pages of lent
// memory go to and from the disk in place; the rest passes through the
// thread's piece buffers.
// - Why these shapes: on a virtio disk a request of its own for the header
//   cost 6-11%, and 1 MiB pieces 6-8%, against a request per object
//   (direct_shape_probe.py, docs/bench/nixl.md), and the kernel cuts requests
//   at 4 MiB (max_sectors_kb) anyway. Pieces rather than one request per
//   object, so that the copy out of (or into) the application overlaps the disk.
// - A put submits each piece as soon as it is filled (copied and hashed), the
//   first piece last: its request carries the header, which holds the sum of
//   every piece.
// - A get submits the first piece with the header first, lays the data out for
//   the index's size, and checks the header once all is in.
#include <fcntl.h>

#include <algorithm>
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

constexpr std::size_t kDirectPiece = std::size_t{4} << 20;
static_assert(kDirectPiece % kChecksumLeafBytes == 0 && kDirectPiece % kIoAlign == 0);

// Pieces in flight per object: 16 MiB, as sixteen of 1 MiB kept before, which
// a lone 32 MiB object needed to reach a virtio disk's rate; four of 1 MiB
// held it to 0.7x (docs/bench/lmcache.md).
constexpr unsigned kDirectInFlight = 4;

std::uint64_t direct_pieces(std::uint64_t size) {
  return std::max<std::uint64_t>(1, (size + kDirectPiece - 1) / kDirectPiece);
}

// One piece in flight; the first carries the file's header page in front.
struct DirectPiece {
  std::size_t slot = 0;
  std::byte* buf = nullptr;   // the slot's buffer, once one was needed (buffer())
  std::byte* io = nullptr;    // where the piece's bytes move to or from
  bool lent = false;          // io is the application's memory
  std::byte* header = nullptr;  // the header page moved in front of the piece, or null
  std::uint64_t at = 0;         // in the object
  std::size_t n = 0;          // the object's bytes in it
  std::size_t len = 0;        // the piece's bytes to move: n, padded to a page
  std::size_t done = 0;       // bytes moved, the header's included
  iovec iov[2];               // what is in flight

  std::size_t header_bytes() const { return header != nullptr ? kFileHeaderSize : 0; }
  std::uint64_t file_at() const { return header != nullptr ? 0 : kFileHeaderSize + at; }
  std::size_t total() const { return header_bytes() + len; }
  // The iovecs for the bytes not yet moved.
  int remaining() {
    int count = 0;
    if (done < header_bytes()) iov[count++] = {header + done, kFileHeaderSize - done};
    const std::size_t from = done > header_bytes() ? done - header_bytes() : 0;
    if (from < len) iov[count++] = {io + from, len - from};
    return count;
  }
};

// A slot's buffer is taken only for a piece that is not lent (the first call
// of buffer()), so an agent's lanes, which stream lent memory, keep none.
std::vector<DirectPiece> direct_slots(std::uint64_t pieces, unsigned ring_entries) {
  std::vector<DirectPiece> slots(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>({kDirectInFlight, pieces, ring_entries})));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  return slots;
}

std::byte* buffer(DirectPiece& p) {
  if (p.buf == nullptr) p.buf = piece_buffer(kDirectPiece, static_cast<unsigned>(p.slot));
  return p.buf;
}

// Piece i of an object of `size` bytes, with the header page in front when it is the first.
void lay_out_piece(DirectPiece& p, std::uint64_t i, std::uint64_t size, std::byte* header) {
  p.header = i == 0 ? header : nullptr;
  p.at = i * kDirectPiece;
  p.n = static_cast<std::size_t>(std::min<std::uint64_t>(kDirectPiece, size - p.at));
  p.len = io_round_up(p.n);
  p.done = 0;
}

}  // namespace

XferStatus FileTier::write_file_direct(ObjectWrite& op, std::uint64_t size, const PieceSource& source,
                                       std::vector<std::uint64_t>& leaves, Fault& fault) noexcept {
  auto ring = rings_->take_or_raise(spec_, fault);
  if (!ring) return XferStatus::IoError;
  const std::uint64_t pieces = direct_pieces(size);
  std::vector<DirectPiece> slots = direct_slots(pieces, (*ring)->entries());
  XferStatus status = XferStatus::Ok;
  const auto queue = [&](DirectPiece& p) {
    io_uring_sqe* sqe = next_sqe(**ring);
    io_uring_prep_writev(sqe, op.fd, p.iov, static_cast<unsigned>(p.remaining()), p.file_at() + p.done);
    io_uring_sqe_set_data64(sqe, p.slot);
  };
  run_batch(
      **ring, slots, pieces,
      [&](std::size_t i, DirectPiece& p) {
        if (status != XferStatus::Ok) return false;
        // The first piece goes last, with the header: by then every other
        // piece was hashed, and its own is hashed just below.
        const std::uint64_t piece = (i + 1) % pieces;
        lay_out_piece(p, piece, size, op.header.data());
        // Whole pages of lent memory go to the disk from where they are
        // (after hashing them there); the rest through the slot's buffer.
        const auto* lent = reinterpret_cast<const std::byte*>(source.in_place(p.at, p.n));
        p.lent = lent != nullptr && io_aligned(lent) && p.n == p.len && p.n > 0;
        if (p.lent) {
          p.io = const_cast<std::byte*>(lent);
          status = source.leaf_sums(p.at, p.n, &leaves[p.at / kChecksumLeafBytes], fault);
        } else if (p.n > 0) {
          p.io = buffer(p);
          status = source.read(p.at, {reinterpret_cast<std::uint8_t*>(p.buf), p.n}, fault);
          hash_leaves(p.buf, p.at, p.n, leaves);
          std::memset(p.buf + p.n, 0, p.len - p.n);  // the last page whole; cut off at close
        }
        if (status != XferStatus::Ok) return false;
        if (piece == 0) seal_header(op, size, leaves);
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
        if (p.done >= p.total()) return false;
        queue(p);  // a short write: the rest
        return true;
      });
  return status;
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
  const std::uint64_t pieces = direct_pieces(r.size);
  std::vector<DirectPiece> slots = direct_slots(pieces, (*ring)->entries());
  // Whole pages: the last one comes back short at the file's end.
  const auto queue = [&](DirectPiece& p) {
    io_uring_sqe* sqe = next_sqe(**ring);
    io_uring_prep_readv(sqe, r.fd, p.iov, static_cast<unsigned>(p.remaining()), p.file_at() + p.done);
    io_uring_sqe_set_data64(sqe, p.slot);
  };
  run_batch(
      **ring, slots, pieces,
      [&](std::size_t i, DirectPiece& p) {
        if (i > 0 && (out.data != XferStatus::Ok || out.ended_at != kNotShort)) return false;
        lay_out_piece(p, i, r.size, header);
        // Whole pages straight into lent memory; the rest through the slot's buffer.
        auto* lent = reinterpret_cast<std::byte*>(sink.in_place(p.at, p.n));
        p.lent = lent != nullptr && io_aligned(lent) && p.n == p.len && p.n > 0;
        p.io = p.lent ? lent : buffer(p);
        queue(p);
        return true;
      },
      [&](DirectPiece& p, int res) {
        if (res > 0) p.done += static_cast<std::size_t>(res);
        if (p.header != nullptr)
          out.header_got =
              res < 0 && p.done == 0 ? res : static_cast<ssize_t>(std::min(p.done, kFileHeaderSize));
        if (out.data != XferStatus::Ok) return false;
        if (res < 0) {
          if (res == -EFAULT && p.lent) {
            // The application's pages went away, and the whole request
            // failed, a header in front with it: read that alone, since the
            // caller checks it first.
            out.data = sink_gone(key, p.at, p.n, fault);
            if (p.header != nullptr && p.done < kFileHeaderSize)
              out.header_got = pread_all(r.fd, header, kFileHeaderSize, 0);
          } else if (p.done >= p.header_bytes()) {
            out.data = read_error(r, key, -res, fault);
          }
          return false;
        }
        const std::size_t need = p.header_bytes() + p.n;
        if (res > 0 && p.done < need) {
          queue(p);  // a short read: the rest
          return true;
        }
        if (p.done < need) {  // the header tells whether the file is short or another version
          const std::size_t data = p.done > p.header_bytes() ? p.done - p.header_bytes() : 0;
          out.ended_at = std::min(out.ended_at, p.at + data);
          return false;
        }
        if (p.n == 0) return false;
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
    const DirectFileRead got =
        read_file_direct({op.fd, kFileHeaderSize, n, where}, key, sink, leaves, op.header.data(), fault);
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
