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

namespace ferry {
namespace {

constexpr std::uint32_t kMaxControlMessage = 4096;

socklen_t make_address(const std::string& channel_name, sockaddr_un* addr) {
  const std::string name = "ferry." + channel_name;
  if (name.size() + 1 > sizeof(addr->sun_path))
    throw Error("--comch-channel-name '" + channel_name + "' is too long for a socket name");
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): no file to clean up after a crash.
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// Once a message has begun, the rest must arrive within this time: a peer that
// sends half a header and stalls must not hang the caller's loop.
constexpr int kRestOfMessageMs = 5000;

// Reads exactly n bytes, waiting at most kRestOfMessageMs for each chunk;
// throws on EOF, errors and stalls.
void read_exact(int fd, std::uint8_t* p, std::size_t n, int* passed_fd) {
  std::size_t got = 0;
  while (got < n) {
    pollfd pf{fd, POLLIN, 0};
    const int ready = poll(&pf, 1, kRestOfMessageMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw_errno("control link poll");
    if (ready == 0) throw Error("control link: the peer sent part of a message and stalled");
    iovec iov{p + got, n - got};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    const ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno("control link read");
    }
    if (r == 0) throw Error("control link closed by the peer");
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fd_in = -1;
        std::memcpy(&fd_in, CMSG_DATA(c), sizeof(int));
        if (passed_fd != nullptr && *passed_fd < 0)
          *passed_fd = fd_in;
        else
          ::close(fd_in);  // a descriptor nobody asked for must not leak
      }
    }
    got += static_cast<std::size_t>(r);
  }
}

}  // namespace

std::string ControlLink::address_of(const std::string& channel_name) {
  return "@ferry." + channel_name;
}

int ControlLink::listen(const std::string& channel_name) {
  sockaddr_un addr{};
  const socklen_t len = make_address(channel_name, &addr);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("control link socket");
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EADDRINUSE)
      throw Error("control channel " + address_of(channel_name) +
                  " is already in use: another ferry server runs with this --comch-channel-name");
    errno = err;
    throw_errno("binding control channel " + address_of(channel_name));
  }
  if (::listen(fd, 4) != 0) {
    ::close(fd);
    throw_errno("listening on the control channel");
  }
  return fd;
}

ControlLink ControlLink::accept(int listen_fd) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return ControlLink(fd);
    if (errno != EINTR) throw_errno("accepting on the control channel");
  }
}

std::optional<ControlLink> ControlLink::try_connect(const std::string& channel_name) {
  sockaddr_un addr{};
  const socklen_t len = make_address(channel_name, &addr);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("control link socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == ECONNREFUSED || err == ENOENT) return std::nullopt;
    errno = err;
    throw_errno("connecting to control channel " + address_of(channel_name));
  }
  return ControlLink(fd);
}

void ControlLink::send(wire::MsgId id, std::uint32_t value, int pass_fd) {
  std::uint8_t buf[12];
  const bool has_value = id == wire::MsgId::ExchangeConsumerIdRequest ||
                         id == wire::MsgId::ExchangeConsumerIdResponse;
  const std::uint32_t size = has_value ? 12 : 8;
  wire::encode_header(buf, size, id);
  if (has_value) wire::store_be32(buf + 8, value);
  iovec iov{buf, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  for (;;) {
    const ssize_t r = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(size)) return;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno(std::string("control link send of ") + wire::to_string(id));
    throw Error("control link: short send");  // 12 bytes on a stream socket: not expected
  }
}

void ControlLink::send_error(wire::ErrorCode code, const std::string& text) {
  const std::string msg = wire::encode_error(code, text);
  std::size_t sent = 0;
  while (sent < msg.size()) {
    const ssize_t r = ::send(fd_, msg.data() + sent, msg.size() - sent, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno("control link send of ferry_error");
    sent += static_cast<std::size_t>(r);
  }
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
