#pragma once
// A streamed put's source and a streamed get's sink over bytes in memory
// (streaming.h), for the chain's tests and the stress run. They copy only:
// nothing is lent in place.

#include <cstdint>
#include <cstring>
#include <vector>

#include "xfer/store/streaming.h"

namespace ferry::xfer::store::test {

class VectorSource final : public PieceSource {
 public:
  explicit VectorSource(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
  XferStatus read(std::uint64_t at, MutableByteView into, Fault&) const noexcept override {
    std::memcpy(into.data, bytes_.data() + at, into.size);
    return XferStatus::Ok;
  }

 private:
  const std::vector<std::uint8_t>& bytes_;
};

class VectorSink final : public PieceSink {
 public:
  explicit VectorSink(std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
  XferStatus write(std::uint64_t at, ByteView from, Fault&) const noexcept override {
    std::memcpy(bytes_.data() + at, from.data, from.size);
    return XferStatus::Ok;
  }

 private:
  std::vector<std::uint8_t>& bytes_;
};

}  // namespace ferry::xfer::store::test
