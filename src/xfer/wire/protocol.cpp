#include "xfer/wire/protocol.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "core/net.h"
#include "ferry/core/status.h"
#include "core/unix_socket.h"
#include "ferry/core/wire.h"

namespace ferry::xfer::proto {

const char* to_string(Type t) noexcept {
  switch (t) {
    case Type::Hello: return "hello";
    case Type::HelloOk: return "hello_ok";
    case Type::Register: return "register";
    case Type::RegisterOk: return "register_ok";
    case Type::Deregister: return "deregister";
    case Type::Transfer: return "transfer";
    case Type::TransferDone: return "transfer_done";
    case Type::List: return "list";
    case Type::ListReply: return "list_reply";
    case Type::Remove: return "remove";
    case Type::RemoveReply: return "remove_reply";
    case Type::Stats: return "stats";
    case Type::StatsReply: return "stats_reply";
    case Type::CallError: return "call_error";
    case Type::Exists: return "exists";
    case Type::ExistsReply: return "exists_reply";
  }
  return "unknown";
}

void Encoder::u32(std::uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (x86-64, aarch64): checked in Hello
  bytes_.append(b, 4);
}

void Encoder::u64(std::uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  bytes_.append(b, 8);
}

void Encoder::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  bytes_.append(s);
}

std::string Encoder::frame(Type type) {
  auto* p = reinterpret_cast<std::uint8_t*>(bytes_.data());
  wire::store_be32(p, static_cast<std::uint32_t>(bytes_.size()));
  wire::store_be32(p + 4, static_cast<std::uint32_t>(type));
  return std::exchange(bytes_, std::string(kFrameHeader, '\0'));
}

bool Decoder::take(std::size_t n) {
  if (failed_ || body_.size() - pos_ < n) {
    failed_ = true;
    return false;
  }
  return true;
}

std::uint8_t Decoder::u8() {
  if (!take(1)) return 0;
  return static_cast<std::uint8_t>(body_[pos_++]);
}

std::uint32_t Decoder::u32() {
  std::uint32_t v = 0;
  if (!take(4)) return 0;
  std::memcpy(&v, body_.data() + pos_, 4);
  pos_ += 4;
  return v;
}

std::uint64_t Decoder::u64() {
  std::uint64_t v = 0;
  if (!take(8)) return 0;
  std::memcpy(&v, body_.data() + pos_, 8);
  pos_ += 8;
  return v;
}

std::string Decoder::str(std::size_t max_len) { return std::string(view(max_len)); }

std::string_view Decoder::view(std::size_t max_len) {
  const std::uint32_t n = u32();
  if (n > max_len) failed_ = true;
  if (!take(n)) return {};
  const std::string_view s = body_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::size_t check_frame_header(const std::uint8_t* header, Type* type) {
  const std::uint32_t size = wire::load_be32(header);
  const std::uint32_t t = wire::load_be32(header + 4);
  if (size < kFrameHeader || size > kMaxFrame)
    throw Error("agent link: frame of " + std::to_string(size) + " bytes (the limit is " +
                std::to_string(kMaxFrame) + ")");
  if (t < static_cast<std::uint32_t>(Type::Hello) || t > static_cast<std::uint32_t>(kLastType))
    throw Error("agent link: unknown frame type " + std::to_string(t));
  *type = static_cast<Type>(t);
  return size - kFrameHeader;
}

FrameSocket::~FrameSocket() {
  if (fd_ >= 0) ::close(fd_);
}

FrameSocket& FrameSocket::operator=(FrameSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

bool FrameSocket::send(const std::string& frame, int pass_fd) {
  return unix_socket::write_all(fd_, frame.data(), frame.size(), pass_fd, "agent link");
}

// A peer that starts a frame must finish it within this time.
constexpr int kRestOfFrameMs = 10000;

std::optional<Frame> FrameSocket::recv() {
  Frame f;
  std::uint8_t hdr[kFrameHeader];
  // Wait without a bound for the first byte (an idle peer is fine), then bound the rest.
  for (;;) {
    const ssize_t r = ::recv(fd_, hdr, 1, MSG_PEEK);
    if (r == 0) return std::nullopt;
    if (r > 0) break;
    if (errno == EINTR) continue;
    if (errno == ECONNRESET || errno == EBADF || errno == ENOTCONN) return std::nullopt;
    throw_errno("agent link read");
  }
  try {
    unix_socket::read_exact(fd_, hdr, kFrameHeader, &f.fd, kRestOfFrameMs, "agent link");
    f.body.resize(check_frame_header(hdr, &f.type));
    if (!f.body.empty())
      unix_socket::read_exact(fd_, reinterpret_cast<std::uint8_t*>(f.body.data()), f.body.size(), &f.fd,
                              kRestOfFrameMs, "agent link");
  } catch (...) {
    if (f.fd >= 0) ::close(f.fd);
    throw;
  }
  return f;
}

void FrameSocket::shutdown() noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Endpoint Endpoint::parse(const std::string& text) {
  Endpoint ep;
  const auto bad = [&] {
    return Error("agent endpoint '" + text + "': use unix:NAME (the abstract socket @NAME) or tcp:HOST:PORT");
  };
  if (text.rfind("unix:", 0) == 0) {
    ep.name = text.substr(5);
    if (ep.name.empty()) throw bad();
    return ep;
  }
  if (text.rfind("tcp:", 0) == 0) {
    const std::string rest = text.substr(4);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) throw bad();
    ep.tcp = true;
    ep.name = rest.substr(0, colon);
    try {
      const unsigned long port = std::stoul(rest.substr(colon + 1));
      if (port > 65535) throw bad();
      ep.port = static_cast<std::uint16_t>(port);
    } catch (const std::logic_error&) {
      throw bad();
    }
    return ep;
  }
  throw bad();
}

std::string Endpoint::to_string() const {
  return tcp ? "tcp:" + name + ":" + std::to_string(port) : "unix:" + name;
}

int listen_on(const Endpoint& ep, std::uint16_t* bound_port) {
  // Non-blocking: the agent's loop accepts until EAGAIN.
  if (ep.tcp) return net::listen_tcp(ep.name, ep.port, bound_port, 64);
  const int fd = unix_socket::listen_abstract(ep.name, 64, "another ferry agent runs with this endpoint");
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

FrameSocket connect_to(const Endpoint& ep, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int fd = ep.tcp ? net::connect_tcp(ep.name, ep.port) : unix_socket::try_connect_abstract(ep.name);
    if (fd >= 0) return FrameSocket(fd);
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error("no ferry agent answers at " + ep.to_string() + " (waited " + std::to_string(timeout_ms) +
                  " ms): start one with 'ferry agent --endpoint " + ep.to_string() + "'");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ferry::xfer::proto
