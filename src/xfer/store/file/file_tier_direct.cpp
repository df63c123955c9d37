// The file tier's O_DIRECT streaming (streaming.h): an object file's header
// and data through io_uring in one batch, up to kDirectInFlight pieces in
// flight, so that the disk writes (or reads) one piece while the next is
// filled (or checked). Whole pages of lent memory go to and from the disk in
// place; the rest passes through the lane's piece buffers.
// - A put submits each piece as soon as it is filled, not once the batch is
//   full: filling a piece (a copy out of the application and its hash) takes
//   as long as the disk needs to start on the one before. Its header, which
//   holds the sum of every piece, is the batch's last write.
// - A get reads the header beside the data, which it lays out for the
//   index's size, and checks the header once all is in: the disk sees the
//   object's reads at once, not the header's first and the data's after it.
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

// O_DIRECT pieces in flight per object: enough that one object keeps tens of
// MiB outstanding, which a virtio disk needs to reach its rate (a single 32 MiB
// write(2) gets there alone; four pieces of 1 MiB did not: docs/bench/lmcache.md).
constexpr unsigned kDirectInFlight = 16;

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
