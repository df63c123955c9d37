#include "ferry/core/control_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "ferry/core/status.h"
#include "core/unix_socket.h"

namespace ferry {
namespace {

constexpr std::uint32_t kMaxControlMessage = 4096;

// Once a message has begun, the rest must arrive within this time: a peer that
// sends half a header and stalls must not hang the caller's loop.
constexpr int kRestOfMessageMs = 5000;

std::string socket_name(const std::string& channel_name) { return "ferry." + channel_name; }

void read_exact(int fd, std::uint8_t* p, std::size_t n, int* passed_fd) {
  unix_socket::read_exact(fd, p, n, passed_fd, kRestOfMessageMs, "control link");
}

}  // namespace

std::string ControlLink::address_of(const std::string& channel_name) {
  return "@ferry." + channel_name;
}

int ControlLink::listen(const std::string& channel_name) {
  return unix_socket::listen_abstract(socket_name(channel_name), 4,
                                      "another ferry server runs with this ServerOptions::channel_name");
}

ControlLink ControlLink::accept(int listen_fd) { return ControlLink(unix_socket::accept_blocking(listen_fd)); }

std::optional<ControlLink> ControlLink::try_connect(const std::string& channel_name) {
  const int fd = unix_socket::try_connect_abstract(socket_name(channel_name));
  if (fd < 0) return std::nullopt;
  return ControlLink(fd);
}

std::string ControlLink::encode(wire::MsgId id, std::uint32_t value) {
  const bool has_value = id == wire::MsgId::ExchangeConsumerIdRequest ||
                         id == wire::MsgId::ExchangeConsumerIdResponse;
  std::string out(has_value ? 12 : 8, '\0');
  auto* p = reinterpret_cast<std::uint8_t*>(out.data());
  wire::encode_header(p, static_cast<std::uint32_t>(out.size()), id);
  if (has_value) wire::store_be32(p + 8, value);
  return out;
}

void ControlLink::send(wire::MsgId id, std::uint32_t value, int pass_fd) {
  const std::string msg = encode(id, value);
  if (!unix_socket::write_all(fd_, msg.data(), msg.size(), pass_fd, "control link"))
    throw Error(std::string("control link closed by the peer during send of ") + wire::to_string(id));
}

void ControlLink::send_error(wire::ErrorCode code, const std::string& text) {
  const std::string msg = wire::encode_error(code, text);
  if (!unix_socket::write_all(fd_, msg.data(), msg.size(), -1, "control link"))
    throw Error("control link closed by the peer during send of ferry_error");
}

std::size_t ControlLink::body_size(const std::uint8_t* header) {
  const wire::Header h = wire::decode_header(header);
  if (h.wire_size < 8 || h.wire_size > kMaxControlMessage)
    throw Error("control link: message with wire_size " + std::to_string(h.wire_size));
  return h.wire_size - 8;
}

ControlMessage ControlLink::decode(const std::uint8_t* header, const std::uint8_t* body,
                                   std::size_t body_len) {
  const wire::Header h = wire::decode_header(header);
  if (body_len != body_size(header)) throw Error("control link: a body that is not the header's wire_size");
  ControlMessage m;
  m.id = static_cast<wire::MsgId>(h.msg_id);
  switch (m.id) {
    case wire::MsgId::StartShutdown:
    case wire::MsgId::ShutdownComplete:
      if (body_len != 0) throw Error("control link: shutdown message with a payload");
      break;
    case wire::MsgId::ExchangeConsumerIdRequest:
    case wire::MsgId::ExchangeConsumerIdResponse:
      if (body_len != 4) throw Error("control link: consumer-id message of wrong size");
      m.value = wire::load_be32(body);
      break;
    case wire::MsgId::FerryError:
      if (body_len < 4) throw Error("control link: truncated ferry_error");
      m.value = wire::load_be32(body);
      m.text.assign(reinterpret_cast<const char*>(body) + 4, body_len - 4);
      break;
    default: throw Error("control link: unexpected message id " + std::to_string(h.msg_id));
  }
  return m;
}

std::optional<ControlMessage> ControlLink::recv(int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    const int r = poll(&p, 1, timeout_ms);
    if (r > 0) break;
    if (r == 0) return std::nullopt;
    if (errno != EINTR) throw_errno("control link poll");
  }
  int passed_fd = -1;
  std::uint8_t hdr[8];
  try {
    read_exact(fd_, hdr, sizeof(hdr), &passed_fd);
    std::vector<std::uint8_t> body(body_size(hdr));
    if (!body.empty()) read_exact(fd_, body.data(), body.size(), &passed_fd);
    ControlMessage m = decode(hdr, body.data(), body.size());
    m.fd = passed_fd;
    return m;
  } catch (...) {
    if (passed_fd >= 0) ::close(passed_fd);
    throw;
  }
}

void ControlLink::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ControlLink::~ControlLink() { close(); }

ControlLink::ControlLink(ControlLink&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

ControlLink& ControlLink::operator=(ControlLink&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

}  // namespace ferry
