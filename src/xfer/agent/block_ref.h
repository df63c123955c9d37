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

#include "ferry/core/bytes.h"
#include "xfer/agent/remote_memory.h"
#include "xfer/base/fault.h"
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
inline XferStatus read_app(const BlockRef& b, std::size_t at, std::uint8_t* to, std::size_t len,
                           Fault& fault) noexcept {
  if (b.remote != nullptr) return b.remote->read(b.app + at, to, len, fault);
  std::memcpy(to, b.app + at, len);
  return XferStatus::Ok;
}

inline XferStatus write_app(const BlockRef& b, std::size_t at, const std::uint8_t* from, std::size_t len,
                            Fault& fault) noexcept {
  if (b.remote != nullptr) return b.remote->write(b.app + at, from, len, fault);
  std::memcpy(b.app + at, from, len);
  return XferStatus::Ok;
}

// A host block's application side as a streamed put's source, or a streamed
// get's sink.
class AppSource final : public store::PieceSource {
 public:
  explicit AppSource(const BlockRef& block) : block_(block) {}
  XferStatus read(std::uint64_t at, MutableByteView into, Fault& fault) const noexcept override {
    return read_app(block_, at, into.data, into.size, fault);
  }

 private:
  const BlockRef& block_;
};

class AppSink final : public store::PieceSink {
 public:
  explicit AppSink(const BlockRef& block) : block_(block) {}
  XferStatus write(std::uint64_t at, ByteView from, Fault& fault) const noexcept override {
    return write_app(block_, at, from.data, from.size, fault);
  }

 private:
  const BlockRef& block_;
};

}  // namespace ferry::xfer::agent
