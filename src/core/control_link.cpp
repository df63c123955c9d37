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
#include "ferry/core/unix_socket.h"

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
                                      "another ferry server runs with this --comch-channel-name");
}

ControlLink ControlLink::accept(int listen_fd) { return ControlLink(unix_socket::accept_blocking(listen_fd)); }

std::optional<ControlLink> ControlLink::try_connect(const std::string& channel_name) {
  const int fd = unix_socket::try_connect_abstract(socket_name(channel_name));
  if (fd < 0) return std::nullopt;
  return ControlLink(fd);
}

void ControlLink::send(wire::MsgId id, std::uint32_t value, int pass_fd) {
  std::uint8_t buf[12];
  const bool has_value = id == wire::MsgId::ExchangeConsumerIdRequest ||
                         id == wire::MsgId::ExchangeConsumerIdResponse;
  const std::uint32_t size = has_value ? 12 : 8;
  wire::encode_header(buf, size, id);
  if (has_value) wire::store_be32(buf + 8, value);
  if (!unix_socket::write_all(fd_, buf, size, pass_fd, "control link"))
    throw Error(std::string("control link closed by the peer during send of ") + wire::to_string(id));
}

void ControlLink::send_error(wire::ErrorCode code, const std::string& text) {
  const std::string msg = wire::encode_error(code, text);
  if (!unix_socket::write_all(fd_, msg.data(), msg.size(), -1, "control link"))
    throw Error("control link closed by the peer during send of ferry_error");
}

std::optional<ControlMessage> ControlLink::recv(int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    const int r = poll(&p, 1, timeout_ms);
    if (r > 0) break;
    if (r == 0) return std::nullopt;
    if (errno != EINTR) throw_errno("control link poll");
  }
  ControlMessage m;
  std::uint8_t hdr[8];
  try {
    read_exact(fd_, hdr, sizeof(hdr), &m.fd);
    const wire::Header h = wire::decode_header(hdr);
    if (h.wire_size < 8 || h.wire_size > kMaxControlMessage)
      throw Error("control link: message with wire_size " + std::to_string(h.wire_size));
    std::vector<std::uint8_t> body(h.wire_size - 8);
    if (!body.empty()) read_exact(fd_, body.data(), body.size(), &m.fd);
    m.id = static_cast<wire::MsgId>(h.msg_id);
    switch (m.id) {
      case wire::MsgId::StartShutdown:
      case wire::MsgId::ShutdownComplete:
        if (!body.empty()) throw Error("control link: shutdown message with a payload");
        break;
      case wire::MsgId::ExchangeConsumerIdRequest:
      case wire::MsgId::ExchangeConsumerIdResponse:
        if (body.size() != 4) throw Error("control link: consumer-id message of wrong size");
        m.value = wire::load_be32(body.data());
        break;
      case wire::MsgId::FerryError:
        if (body.size() < 4) throw Error("control link: truncated ferry_error");
        m.value = wire::load_be32(body.data());
        m.text.assign(body.begin() + 4, body.end());
        break;
      default:
        throw Error("control link: unexpected message id " + std::to_string(h.msg_id));
    }
  } catch (...) {
    if (m.fd >= 0) ::close(m.fd);
    throw;
  }
  return m;
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
