#include "ferry/core/wire.h"

namespace ferry::wire {

const char* to_string(MsgId id) noexcept {
  switch (id) {
    case MsgId::StartShutdown: return "start_shutdown";
    case MsgId::ShutdownComplete: return "shutdown_complete";
    case MsgId::ExchangeConsumerIdRequest: return "exchange_consumer_id_request";
    case MsgId::ExchangeConsumerIdResponse: return "exchange_consumer_id_response";
    case MsgId::ClientRequest: return "client_request";
    case MsgId::ClientResponse: return "client_response";
    case MsgId::FerryError: return "ferry_error";
  }
  return "unknown";
}

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::WireSizeTooSmall: return "wire_size_too_small";
    case ErrorCode::MessageTooLarge: return "message_too_large";
    case ErrorCode::UnexpectedMsgId: return "unexpected_msg_id";
    case ErrorCode::LengthMismatch: return "length_mismatch";
    case ErrorCode::NoWorkers: return "no_workers";
    case ErrorCode::ServerFull: return "server_full";
    case ErrorCode::ShuttingDown: return "shutting_down";
    case ErrorCode::ProtocolError: return "protocol_error";
    case ErrorCode::ConfigMismatch: return "config_mismatch";
    case ErrorCode::NotAllowed: return "not_allowed";
  }
  return "unknown";
}

std::string encode_error(ErrorCode code, std::string_view reason) {
  std::string out(kRequestOverhead + reason.size(), '\0');
  auto* p = reinterpret_cast<std::uint8_t*>(out.data());
  encode_header(p, static_cast<std::uint32_t>(out.size()), MsgId::FerryError);
  store_be32(p + kHeaderSize, static_cast<std::uint32_t>(code));
  out.replace(kRequestOverhead, reason.size(), reason);
  return out;
}

FrameCheck check_request(const std::uint8_t* p, std::size_t avail, std::size_t max_message_length,
                         std::uint32_t* payload_len, std::uint32_t* frame_size) noexcept {
  if (avail < kHeaderSize) return FrameCheck::NeedMore;
  const Header h = decode_header(p);
  if (h.msg_id != static_cast<std::uint32_t>(MsgId::ClientRequest)) return FrameCheck::UnexpectedMsgId;
  if (h.wire_size < kRequestOverhead) return FrameCheck::WireSizeTooSmall;
  if (h.wire_size > kHeaderSize + max_message_length) return FrameCheck::MessageTooLarge;
  if (avail < kRequestOverhead) return FrameCheck::NeedMore;
  const std::uint32_t len = load_be32(p + kHeaderSize);
  if (len != h.wire_size - kRequestOverhead) return FrameCheck::LengthMismatch;
  if (avail < h.wire_size) return FrameCheck::NeedMore;
  *payload_len = len;
  *frame_size = h.wire_size;
  return FrameCheck::Ok;
}

ErrorCode to_error_code(FrameCheck check) noexcept {
  switch (check) {
    case FrameCheck::WireSizeTooSmall: return ErrorCode::WireSizeTooSmall;
    case FrameCheck::MessageTooLarge: return ErrorCode::MessageTooLarge;
    case FrameCheck::UnexpectedMsgId: return ErrorCode::UnexpectedMsgId;
    case FrameCheck::LengthMismatch: return ErrorCode::LengthMismatch;
    case FrameCheck::Ok:
    case FrameCheck::NeedMore: break;
  }
  return ErrorCode::ProtocolError;
}

}  // namespace ferry::wire
