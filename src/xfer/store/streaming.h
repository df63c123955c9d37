#pragma once
// The streaming capability of a tier (Tier::streamable()): an object moves
// between the application's memory and the tier's medium piece by piece,
// through a buffer small enough to stay in cache, instead of whole through the
// agent's staging. For host memory the agent reaches by copy calls and a tier
// on files, each byte then crosses memory twice (read from the application,
// written to the page cache), as it does for a plain write(2) of the
// application's buffer, rather than four times (docs/bench/lmcache.md).
//
// The tier hashes the pieces on the way: a put computes the object's checksum
// (checksum.h's leaf sums) and stores it; a get verifies it. A get's bytes reach
// the sink before the whole object is verified, so a ChecksumMismatch answer
// means that what the sink holds is not data.
//
// Source and sink are addressed by offset and may be called from several
// threads at once, with disjoint ranges: a tier may split one object's pieces
// across threads.

#include <cstdint>
#include <optional>
#include <string_view>

#include "ferry/core/bytes.h"
#include "ferry/xfer/fault.h"
#include "ferry/xfer/types.h"

namespace ferry::xfer::store {

// Where a streamed put's bytes come from.
class PieceSource {
 public:
  virtual ~PieceSource() = default;
  // Copies the object's bytes [at, at + into.size) into `into`; a failure is
  // raised where it happens (the application's memory is gone ...).
  virtual XferStatus read(std::uint64_t at, MutableByteView into, Fault& fault) const noexcept = 0;
  // Bytes [at, at + len) lent in place, when the source's memory is in this
  // process: the tier then writes them with one kernel copy (EFAULT: they went
  // away meanwhile) and hashes them with leaf_sums(). nullptr: read() them.
  virtual const std::uint8_t* in_place(std::uint64_t /*at*/, std::size_t /*len*/) const noexcept { return nullptr; }
  // leaf_checksums() of lent bytes [at, at + len); IoError, raised, when they went away.
  virtual XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault& fault) const noexcept;
};

// Where a streamed get's bytes go.
class PieceSink {
 public:
  virtual ~PieceSink() = default;
  // Copies `from` to the object's bytes [at, at + from.size).
  virtual XferStatus write(std::uint64_t at, ByteView from, Fault& fault) const noexcept = 0;
  // Bytes [at, at + len) lent in place, for the tier to read into with one
  // kernel copy and then check with leaf_sums(). nullptr: write() to them.
  virtual std::uint8_t* in_place(std::uint64_t /*at*/, std::size_t /*len*/) const noexcept { return nullptr; }
  virtual XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault& fault) const noexcept;
};

inline XferStatus PieceSource::leaf_sums(std::uint64_t, std::size_t, std::uint64_t*, Fault& fault) const noexcept {
  return fault.raise(XferStatus::InvalidDesc, "a piece source that lends nothing was asked for its leaves");
}

inline XferStatus PieceSink::leaf_sums(std::uint64_t, std::size_t, std::uint64_t*, Fault& fault) const noexcept {
  return fault.raise(XferStatus::InvalidDesc, "a piece sink that lends nothing was asked for its leaves");
}

class Streamable {
 public:
  virtual ~Streamable() = default;
  // Objects larger than this stream; smaller ones are better put() (the file
  // tier packs them).
  virtual std::uint64_t stream_above() const noexcept = 0;
  // Stores `size` bytes read from `source` under key, as put() would (the same
  // contract: atomic replacement, NoSpace as an answer), and sets *checksum to
  // the checksum it computed and stored.
  virtual XferStatus put_streamed(std::string_view key, std::uint64_t size, const PieceSource& source,
                                  std::uint64_t* checksum, Fault& fault) noexcept = 0;
  // Reads the object into `sink` and verifies it; *size: its size (also with
  // TooLarge, when it exceeds `capacity`). NotFound for a missing key.
  // nullopt: this object is stored in a way that only get() reads.
  virtual std::optional<XferStatus> get_streamed(std::string_view key, std::uint64_t capacity,
                                                 const PieceSink& sink, std::uint64_t* size,
                                                 Fault& fault) noexcept = 0;
};

}  // namespace ferry::xfer::store
