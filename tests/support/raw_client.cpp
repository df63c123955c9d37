#include "support/raw_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include "core/net.h"
#include "ferry/core/wire.h"

namespace ferry::test {

RawClient::RawClient(std::uint16_t port, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while ((fd_ = net::connect_tcp("127.0.0.1", port)) < 0) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("connect refused");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RawClient RawClient::slow_reader(std::uint16_t port) {
  RawClient c;
  c.fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c.fd_ < 0) throw std::runtime_error("socket failed");
  const int smallest = 1;  // the kernel raises it to its minimum
  const int ethernet_mss = 1448;
  setsockopt(c.fd_, SOL_SOCKET, SO_RCVBUF, &smallest, sizeof(smallest));
  setsockopt(c.fd_, IPPROTO_TCP, TCP_MAXSEG, &ethernet_mss, sizeof(ethernet_mss));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(c.fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0)
    throw std::runtime_error("connect failed");
  return c;
}

RawClient::~RawClient() { close(); }
RawClient::RawClient(RawClient&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string RawClient::raw_frame(std::uint32_t wire_size, std::uint32_t msg_id, std::uint32_t len,
                                 const std::string& body) {
  std::string f(12, '\0');
  auto* p = reinterpret_cast<std::uint8_t*>(f.data());
  wire::store_be32(p, wire_size);
  wire::store_be32(p + 4, msg_id);
  wire::store_be32(p + 8, len);
  return f + body;
}

std::string RawClient::request(const std::string& payload) {
  return raw_frame(static_cast<std::uint32_t>(12 + payload.size()), 4, static_cast<std::uint32_t>(payload.size()),
                   payload);
}

void RawClient::send_bytes(const std::string& bytes) {
  if (!net::write_all(fd_, bytes.data(), bytes.size())) throw std::runtime_error("send failed");
}

std::size_t RawClient::try_send(const std::string& bytes) {
  const ssize_t r = ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  return r > 0 ? static_cast<std::size_t>(r) : 0;
}

bool RawClient::read_exact(std::uint8_t* p, std::size_t n, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::size_t got = 0;
  while (got < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("timed out waiting for the server");
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t r = recv(fd_, p + got, n - got, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) {
      if (got == 0) return false;
      throw std::runtime_error("connection closed mid-frame");
    }
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::runtime_error("recv failed");
    }
    got += static_cast<std::size_t>(r);
  }
  return true;
}

std::optional<Frame> RawClient::read_frame(double timeout_s) {
  std::uint8_t hdr[12];
  if (!read_exact(hdr, 8, timeout_s)) return std::nullopt;
  const std::uint32_t wire_size = wire::load_be32(hdr);
  Frame f;
  f.msg_id = wire::load_be32(hdr + 4);
  if (wire_size < 12) throw std::runtime_error("server sent a frame shorter than 12 bytes");
  if (!read_exact(hdr + 8, 4, timeout_s)) throw std::runtime_error("closed mid-frame");
  f.code_or_len = wire::load_be32(hdr + 8);
  f.payload.resize(wire_size - 12);
  if (!f.payload.empty() &&
      !read_exact(reinterpret_cast<std::uint8_t*>(f.payload.data()), f.payload.size(), timeout_s))
    throw std::runtime_error("closed mid-frame");
  return f;
}

std::string RawClient::read_bytes(std::size_t n, double timeout_s) {
  std::string out(n, '\0');
  if (n != 0 && !read_exact(reinterpret_cast<std::uint8_t*>(out.data()), n, timeout_s))
    throw std::runtime_error("connection closed before any of " + std::to_string(n) + " bytes");
  return out;
}

std::string RawClient::read_to_end(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string out;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("timed out waiting for the server to close");
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t r = recv(fd_, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return out;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::runtime_error("recv failed");
    }
    out.append(buf, static_cast<std::size_t>(r));
  }
}

bool RawClient::closed_by_peer(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, 50) <= 0) continue;
    const ssize_t r = recv(fd_, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

}  // namespace ferry::test
