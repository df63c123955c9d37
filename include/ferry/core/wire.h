#pragma once
// The DOCA remote-offload wire format, shared by the TCP protocol and the
// control link (DOCA's "DPU GPU Remote Offload Application Guide",
// https://docs.nvidia.com/doca/sdk/doca-dpu-gpu-remote-offload-application-guide/index.html;
// docs/protocol.md):
//
//   0        4        8        12
//   +--------+--------+--------+----------------------+
//   |wire_sz |msg_id  |len     | payload (len bytes)  |   client_request / client_response
//   +--------+--------+--------+----------------------+
//   all fields big-endian uint32; wire_size counts the 8-byte header too.
//
// Ferry adds one message, ferry_error (id 64): a big-endian uint32 error code and
// a UTF-8 reason, sent before the server closes a connection it cannot serve.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/core/host_device.h"

namespace ferry::wire {

inline constexpr std::size_t kHeaderSize = 8;
inline constexpr std::size_t kLengthPrefixSize = 4;
inline constexpr std::size_t kRequestOverhead = kHeaderSize + kLengthPrefixSize;  // 12

enum class MsgId : std::uint32_t {
  StartShutdown = 0,
  ShutdownComplete = 1,
  ExchangeConsumerIdRequest = 2,
  ExchangeConsumerIdResponse = 3,
  ClientRequest = 4,
  ClientResponse = 5,  // defined by DOCA, never sent by its server: responses carry id 4
  FerryError = 64,
};

// Error codes carried by ferry_error (documented in README "Error responses").
enum class ErrorCode : std::uint32_t {
  WireSizeTooSmall = 1,   // wire_size < 12
  MessageTooLarge = 2,    // wire_size > 8 + --max-message-length
  UnexpectedMsgId = 3,    // anything other than client_request from a client
  LengthMismatch = 4,     // length prefix != wire_size - 12
  NoWorkers = 5,          // no orchestrator attached, or it went away with requests in flight
  ServerFull = 6,         // every data-path thread is at its client limit
  ShuttingDown = 7,       // the server is stopping
  ProtocolError = 8,      // control link: unexpected or malformed control message
  ConfigMismatch = 9,     // control link: server and orchestrator flags disagree
  NotAllowed = 10,        // control link: the peer's uid is not let in (docs/security.md)
};

const char* to_string(MsgId id) noexcept;
const char* to_string(ErrorCode code) noexcept;

FERRY_HOST_DEVICE inline std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

FERRY_HOST_DEVICE inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v >> 24);
  p[1] = std::uint8_t(v >> 16);
  p[2] = std::uint8_t(v >> 8);
  p[3] = std::uint8_t(v);
}

struct Header {
  std::uint32_t wire_size = 0;
  std::uint32_t msg_id = 0;
};

inline Header decode_header(const std::uint8_t* p) { return {load_be32(p), load_be32(p + 4)}; }

inline void encode_header(std::uint8_t* p, std::uint32_t wire_size, MsgId id) {
  store_be32(p, wire_size);
  store_be32(p + 4, static_cast<std::uint32_t>(id));
}

// Writes header + length prefix for a request/response carrying `len` payload
// bytes; the payload goes at p + 12. Returns the total wire size.
inline std::uint32_t encode_data_prefix(std::uint8_t* p, std::uint32_t len, MsgId id) {
  const auto wire_size = static_cast<std::uint32_t>(kRequestOverhead + len);
  encode_header(p, wire_size, id);
  store_be32(p + kHeaderSize, len);
  return wire_size;
}

// A whole ferry_error message as bytes, ready to send.
std::string encode_error(ErrorCode code, std::string_view reason);

// What validating a client's frame header found.
enum class FrameCheck {
  Ok,
  NeedMore,          // fewer bytes than the header or than wire_size
  WireSizeTooSmall,
  MessageTooLarge,
  UnexpectedMsgId,
  LengthMismatch,
};

// Checks the client_request at p[0..avail). On Ok, *payload_len is the payload
// length and *frame_size the bytes the frame occupies. Header errors are reported
// as soon as the header is complete, before the body arrives, so an oversized
// request is refused without buffering it.
FrameCheck check_request(const std::uint8_t* p, std::size_t avail, std::size_t max_message_length,
                         std::uint32_t* payload_len, std::uint32_t* frame_size) noexcept;

ErrorCode to_error_code(FrameCheck check) noexcept;

}  // namespace ferry::wire
