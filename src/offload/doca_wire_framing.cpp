// The DOCA wire as a framing: the request's payload (after its 12-byte prefix)
// goes into the channel, and the worker's output comes back with the same prefix.

#include <algorithm>
#include <cstring>

#include "ferry/core/wire.h"
#include "ferry/offload/framing.h"

namespace ferry::offload {
namespace {

std::string describe(wire::FrameCheck check, const std::uint8_t* p, std::uint32_t max_message_length) {
  const wire::Header h = wire::decode_header(p);
  switch (check) {
    case wire::FrameCheck::WireSizeTooSmall:
      return "wire_size " + std::to_string(h.wire_size) + " is below the 12-byte minimum";
    case wire::FrameCheck::MessageTooLarge:
      return "wire_size " + std::to_string(h.wire_size) + " exceeds 8 + ServerOptions::max_message_length " +
             std::to_string(max_message_length);
    case wire::FrameCheck::UnexpectedMsgId:
      return "msg_id " + std::to_string(h.msg_id) + " is not client_request (4)";
    case wire::FrameCheck::LengthMismatch:
      return "length prefix " + std::to_string(wire::load_be32(p + wire::kHeaderSize)) +
             " disagrees with wire_size " + std::to_string(h.wire_size) + " (which implies " +
             std::to_string(h.wire_size - wire::kRequestOverhead) + ")";
    default: return "malformed request";
  }
}

class DocaWireFraming final : public Framing {
 public:
  explicit DocaWireFraming(std::uint32_t max_message_length) : max_message_length_(max_message_length) {}

  Scan scan(const std::uint8_t* p, std::size_t n) const noexcept override {
    std::uint32_t len = 0;
    std::uint32_t frame = 0;
    switch (wire::check_request(p, n, max_message_length_, &len, &frame)) {
      case wire::FrameCheck::NeedMore: return {};
      case wire::FrameCheck::Ok: return {Scan::Result::Request, frame, wire::kRequestOverhead, len};
      default: return {Scan::Result::Reject, 0, 0, 0};
    }
  }

  Rejection reject(const std::uint8_t* p, std::size_t n) const override {
    std::uint32_t len = 0;
    std::uint32_t frame = 0;
    const wire::FrameCheck check = wire::check_request(p, n, max_message_length_, &len, &frame);
    std::string why = describe(check, p, max_message_length_);
    std::string reply = wire::encode_error(wire::to_error_code(check), why);
    return {std::move(reply), std::move(why)};
  }

  std::string failure_reply(Failure failure, const std::string& why) const override {
    switch (failure) {
      case Failure::SlotTooSmall: return wire::encode_error(wire::ErrorCode::MessageTooLarge, why);
      case Failure::ServerFull: return wire::encode_error(wire::ErrorCode::ServerFull, why);
      case Failure::ReadTimeout: return wire::encode_error(wire::ErrorCode::ProtocolError, why);
      case Failure::NoWorkers:
      case Failure::WorkersLost: break;
    }
    return wire::encode_error(wire::ErrorCode::NoWorkers, why);
  }

  std::size_t max_request_bytes() const noexcept override { return wire::kHeaderSize + max_message_length_; }
  std::size_t max_response_bytes() const noexcept override { return wire::kHeaderSize + max_message_length_; }

  Written write_response(ByteView out, std::uint8_t* dst, const Client&) const noexcept override {
    // The reference server answers with msg_id 4 (client_request); clients must accept 4 or 5.
    wire::encode_data_prefix(dst, static_cast<std::uint32_t>(out.size), wire::MsgId::ClientRequest);
    if (out.size != 0) std::memcpy(dst + wire::kRequestOverhead, out.data, out.size);
    return {wire::kRequestOverhead + out.size, false, 0};
  }

 private:
  std::uint32_t max_message_length_;
};

}  // namespace

std::shared_ptr<const Framing> make_doca_wire_framing(std::uint32_t max_message_length) {
  return std::make_shared<DocaWireFraming>(max_message_length);
}

}  // namespace ferry::offload
