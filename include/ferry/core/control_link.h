#pragma once
// The control link between the proxy (server) and the host role (orchestrator):
// a Unix stream socket in the abstract namespace, "@ferry.<comch-channel-name>",
// carrying the DOCA control messages in the 8-byte big-endian framing, and the
// arena's fd with SCM_RIGHTS on exchange_consumer_id_request.
//
// The server listens (it starts first, as on a DPU); the orchestrator connects.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ferry/core/wire.h"

namespace ferry {

struct ControlMessage {
  wire::MsgId id = wire::MsgId::StartShutdown;
  std::uint32_t value = 0;  // consumer id, or the error code of ferry_error
  std::string text;         // the reason of ferry_error
  int fd = -1;              // a passed descriptor (the caller owns it)
};

class ControlLink {
 public:
  ControlLink() = default;
  explicit ControlLink(int fd) : fd_(fd) {}
  ~ControlLink();
  ControlLink(ControlLink&& other) noexcept;
  ControlLink& operator=(ControlLink&& other) noexcept;
  ControlLink(const ControlLink&) = delete;
  ControlLink& operator=(const ControlLink&) = delete;

  // The socket address a channel name maps to, as shown in logs ("@ferry.NAME").
  static std::string address_of(const std::string& channel_name);
  // A listening socket for the channel. Throws ferry::Error when another server
  // already holds the name.
  static int listen(const std::string& channel_name);
  // Accepts one peer on a listening socket (blocking).
  static ControlLink accept(int listen_fd);
  // Connects to the server of a channel; std::nullopt while nobody listens.
  static std::optional<ControlLink> try_connect(const std::string& channel_name);

  // Sends one message; ferry_error carries `text`. Throws ferry::Error when the
  // peer is gone.
  void send(wire::MsgId id, std::uint32_t value = 0, int pass_fd = -1);
  void send_error(wire::ErrorCode code, const std::string& text);

  // Waits up to timeout_ms (-1: forever) for one whole message. std::nullopt on
  // timeout; throws ferry::Error when the peer closed the link or sent garbage.
  std::optional<ControlMessage> recv(int timeout_ms);

  // The pure halves of send() and recv() (the fuzz target fuzz/control_link_fuzz.cpp
  // drives them without a socket):
  // The bytes send(id, value) writes; ferry_error's are wire::encode_error()'s.
  static std::string encode(wire::MsgId id, std::uint32_t value = 0);
  // The body length an 8-byte header announces. Throws ferry::Error for a wire_size
  // outside [8, 4096], before any of the body is read.
  static std::size_t body_size(const std::uint8_t* header);
  // One message from its header and its body_size(header) bytes of body. Throws
  // ferry::Error for an unknown id or a body of the wrong size; fd stays -1.
  static ControlMessage decode(const std::uint8_t* header, const std::uint8_t* body, std::size_t body_len);

  int fd() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  void close() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace ferry
