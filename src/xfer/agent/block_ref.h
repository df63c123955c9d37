#pragma once
// One block of a transfer as the agent's data path sees it: the application's
// side (memory the agent maps, or reaches by copy calls: remote_memory.h) and,
// once it has one, its place in host memory. The copy and hash strategy
// (block_copier.h) moves blocks through host memory; a streamed object
// (store/streaming.h) is read from or written to the application's side piece
// by piece, through AppSource and AppSink.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "ferry/core/bytes.h"
#include "ferry/xfer/checksum.h"
#include "ferry/xfer/fault.h"
#include "xfer/agent/guarded_access.h"
#include "xfer/agent/phases.h"
#include "xfer/agent/remote_memory.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/streaming.h"

namespace ferry::xfer::agent {

struct BlockRef {
  std::uint8_t* host = nullptr;
  std::uint8_t* app = nullptr;  // in the remote memory's own space when `remote` is set
  std::size_t len = 0;          // 0: nothing to move (an empty object, or a pull that failed)
  bool on_device = false;
  const RemoteMemory* remote = nullptr;  // reached by copy calls: another process's memory, a shared file
};

// Bytes [at, at + len) of a host block's application side, into `to`, or
// from `from`: memcpy where the agent maps the memory, else its copy calls.
// Byte `at` of a block reached by copy calls (remote set), in that memory's own
// space: an integer sum, since a space of offsets (a shared file's) starts at
// 0, and null plus an offset is undefined behaviour.
inline std::uint8_t* remote_at(const BlockRef& b, std::size_t at) noexcept {
  return reinterpret_cast<std::uint8_t*>(reinterpret_cast<std::uintptr_t>(b.app) + at);
}

inline XferStatus read_app(const BlockRef& b, std::size_t at, std::uint8_t* to, std::size_t len,
                           Fault& fault) noexcept {
  if (b.remote != nullptr) return b.remote->read(remote_at(b, at), to, len, fault);
  std::memcpy(to, b.app + at, len);
  return XferStatus::Ok;
}

inline XferStatus write_app(const BlockRef& b, std::size_t at, const std::uint8_t* from, std::size_t len,
                            Fault& fault) noexcept {
  if (b.remote != nullptr) return b.remote->write(remote_at(b, at), from, len, fault);
  std::memcpy(b.app + at, from, len);
  return XferStatus::Ok;
}

// Bytes [at, at + len) of a host block's application side in the agent's
// address space, or nullptr where only copy calls reach them.
inline std::uint8_t* lend(const BlockRef& b, std::size_t at, std::size_t len, bool for_write) noexcept {
  if (b.remote != nullptr) return b.remote->in_place(remote_at(b, at), len, for_write);
  return b.app + at;
}

// leaf_checksums() of lent bytes, guarded: their pages may vanish.
inline XferStatus hash_lent(const BlockRef& b, std::size_t at, std::size_t len, std::uint64_t* out,
                            std::string_view key, Fault& fault) noexcept {
  const std::uint8_t* p = lend(b, at, len, false);
  if (p != nullptr && run_guarded([&] { leaf_checksums({p, len}, out); })) return XferStatus::Ok;
  return fault.raise(XferStatus::IoError,
                     store::quote_key(key) + ": " + std::to_string(len) + " bytes at offset " + std::to_string(at) +
                         " of the application's memory went away while being read (" +
                         (b.remote != nullptr ? b.remote->describe() : std::string("mapped")) +
                         "; a shared file that shrank?)",
                     key);
}

// A host block's application side as a streamed put's source, or a streamed
// get's sink. Memory the agent maps (its own buffers, a shared file's
// mapping) is lent in place, and hashed there under run_guarded(). The copies
// count as the StreamCopy phase, so that a stream's time splits into them and
// the rest (checksums and the tier's I/O).
class AppSource final : public store::PieceSource {
 public:
  AppSource(const BlockRef& block, std::string_view key, PhaseStats& phases)
      : block_(block), key_(key), phases_(phases) {}
  XferStatus read(std::uint64_t at, MutableByteView into, Fault& fault) const noexcept override {
    const PhaseTimer copy(phases_, Phase::StreamCopy);
    return read_app(block_, at, into.data, into.size, fault);
  }
  const std::uint8_t* in_place(std::uint64_t at, std::size_t len) const noexcept override {
    return lend(block_, at, len, false);
  }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault& fault) const noexcept override {
    return hash_lent(block_, at, len, out, key_, fault);
  }

 private:
  const BlockRef& block_;
  std::string_view key_;  // for the messages
  PhaseStats& phases_;
};

class AppSink final : public store::PieceSink {
 public:
  AppSink(const BlockRef& block, std::string_view key, PhaseStats& phases)
      : block_(block), key_(key), phases_(phases) {}
  XferStatus write(std::uint64_t at, ByteView from, Fault& fault) const noexcept override {
    const PhaseTimer copy(phases_, Phase::StreamCopy);
    return write_app(block_, at, from.data, from.size, fault);
  }
  std::uint8_t* in_place(std::uint64_t at, std::size_t len) const noexcept override {
    return lend(block_, at, len, true);
  }
  XferStatus leaf_sums(std::uint64_t at, std::size_t len, std::uint64_t* out, Fault& fault) const noexcept override {
    return hash_lent(block_, at, len, out, key_, fault);
  }

 private:
  const BlockRef& block_;
  std::string_view key_;  // for the messages
  PhaseStats& phases_;
};

}  // namespace ferry::xfer::agent
