#include "support/http_client.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/net.h"

namespace ferry::test {

std::string HttpResponse::header(const std::string& name) const {
  const auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

std::string http_get(const std::string& path, const std::string& extra, const std::string& method) {
  return method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n" + extra + "\r\n";
}

std::string json_post(const std::string& path, const std::string& body, const std::string& extra) {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

HttpConnection::HttpConnection(std::uint16_t port, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    fd_ = net::connect_tcp("127.0.0.1", port);
    if (fd_ >= 0) return;
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("cannot connect to the http server");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

HttpConnection::~HttpConnection() { close(); }

HttpConnection::HttpConnection(HttpConnection&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }

void HttpConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void HttpConnection::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

void HttpConnection::send(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t r = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error("send failed: the server closed the connection");
    off += static_cast<std::size_t>(r);
  }
}

bool HttpConnection::fill(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("timed out waiting for the http server");
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, static_cast<int>(left.count())) <= 0) continue;
    char tmp[65536];
    const ssize_t r = recv(fd_, tmp, sizeof(tmp), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return false;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw std::runtime_error("recv failed");
    }
    buf_.append(tmp, static_cast<std::size_t>(r));
    return true;
  }
}

std::optional<HttpResponse> HttpConnection::read_response(bool head_only, double timeout_s) {
  std::size_t end;
  while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(timeout_s)) {
      if (buf_.empty()) return std::nullopt;
      throw std::runtime_error("connection closed mid-head: " + buf_);
    }
  }
  HttpResponse r;
  const std::string head = buf_.substr(0, end);
  buf_.erase(0, end + 4);
  std::size_t line_end = head.find("\r\n");
  r.status_line = head.substr(0, line_end);
  if (r.status_line.rfind("HTTP/1.1 ", 0) != 0 || r.status_line.size() < 12)
    throw std::runtime_error("malformed status line: " + r.status_line);
  r.status = std::stoi(r.status_line.substr(9, 3));
  while (line_end != std::string::npos && line_end < head.size()) {
    const std::size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) throw std::runtime_error("malformed header line: " + line);
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::size_t v = colon + 1;
    while (v < line.size() && line[v] == ' ') ++v;
    if (r.headers.count(name) != 0) throw std::runtime_error("header sent twice: " + name);
    r.headers[name] = line.substr(v);
  }
  const std::string cl = r.header("content-length");
  if (cl.empty()) throw std::runtime_error("response without Content-Length: " + r.status_line);
  const std::size_t n = head_only ? 0 : std::stoul(cl);
  while (buf_.size() < n)
    if (!fill(timeout_s)) throw std::runtime_error("connection closed mid-body");
  r.body = buf_.substr(0, n);
  buf_.erase(0, n);
  return r;
}

bool HttpConnection::closed_by_peer(double timeout_s) {
  buf_.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char tmp[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, 20) <= 0) continue;
    const ssize_t r = recv(fd_, tmp, sizeof(tmp), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

}  // namespace ferry::test
