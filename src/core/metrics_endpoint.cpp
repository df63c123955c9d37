#include "core/metrics_endpoint.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/accept_pause.h"
#include "core/log.h"
#include "core/net.h"
#include "ferry/core/status.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

bool is_tchar(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool is_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (const char c : s)
    if (!is_tchar(c)) return false;
  return true;
}

// A header value: visible bytes, spaces, tabs and bytes above 0x7f.
bool is_field_value(std::string_view s) noexcept {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return false;
  }
  return true;
}

const char* reason(int status) noexcept {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    default: return "Error";
  }
}

std::string response(int status, bool head, const std::string& body, const char* type) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                    "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n";
  if (status == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!head) out += body;
  return out;
}

struct Client {
  int fd = -1;
  std::string in;
  std::string out;
  std::size_t sent = 0;
  bool answered = false;  // out holds the whole answer
  bool draining = false;  // answer sent, write side shut: reading to EOF before close
  // Accepted, or last wrote: the head must arrive, and each write progress,
  // within the idle timeout of it (a client that trickles bytes gains nothing).
  Clock::time_point last{};
};

}  // namespace

MetricsRequest parse_metrics_request(std::string_view head) noexcept {
  MetricsRequest r;
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") return r;
  std::size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return r;
  const std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) return r;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method) || (version != "HTTP/1.1" && version != "HTTP/1.0")) return r;
  if (target.empty() || target[0] != '/') return r;
  for (const char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) return r;
  // Header lines up to the blank line that ends the head.
  for (std::size_t at = eol + 2; at < head.size() - 2;) {
    const std::size_t end = head.find("\r\n", at);
    const std::string_view field = head.substr(at, end - at);
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon)) ||
        !is_field_value(field.substr(colon + 1)))
      return r;
    at = end + 2;
  }
  if (method != "GET" && method != "HEAD") {
    r.status = 405;
    return r;
  }
  r.head = method == "HEAD";
  const std::string_view path = target.substr(0, target.find('?'));
  if (path == "/metrics") {
    r.status = 200;
    r.metrics = true;
  } else if (path == "/health") {
    r.status = 200;
  } else {
    r.status = 404;
  }
  return r;
}

MetricsEndpoint::MetricsEndpoint(const std::string& address, std::uint16_t port,
                                 std::function<std::string()> render, std::chrono::milliseconds idle_timeout)
    : render_(std::move(render)), idle_timeout_(idle_timeout) {
  listen_fd_ = net::listen_tcp(address, port, &port_, 64);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    ::close(listen_fd_);
    throw_errno("eventfd for the metrics endpoint");
  }
  thread_ = std::thread([this] { run(); });
}

MetricsEndpoint::~MetricsEndpoint() {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
  ::close(listen_fd_);
}

std::uint64_t MetricsEndpoint::requests() const noexcept {
  return requests_.load(std::memory_order_relaxed);
}

void MetricsEndpoint::run() {
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  AcceptPause accept_pause;  // out of descriptors: stop watching the listener for a while
  const auto answer = [&](Client& c, int status, bool head, bool metrics) {
    c.answered = true;
    requests_.fetch_add(1, std::memory_order_relaxed);
    if (status == 200 && metrics) {
      std::string body;
      try {
        body = render_();
      } catch (const std::exception& e) {
        log::app().warn("metrics endpoint: rendering failed: {}", e.what());
        c.out = response(500, false, "metrics unavailable\n", "text/plain; charset=utf-8");
        return;
      }
      c.out = response(200, head, body, "text/plain; version=0.0.4; charset=utf-8");
    } else {
      c.out = response(status, head, status == 200 ? "ok\n" : std::string(reason(status)) + "\n",
                       "text/plain; charset=utf-8");
    }
  };
  for (;;) {
    fds.clear();
    fds.push_back({stop_fd_, POLLIN, 0});
    const bool accepting = clients.size() < kMaxClients && !accept_pause.paused(Clock::now());
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const Client& c : clients) {
      const bool writing = c.answered && !c.draining && c.sent < c.out.size();
      fds.push_back({c.fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0});
    }
    if (::poll(fds.data(), fds.size(), 250) < 0 && errno != EINTR) {
      log::app().error("metrics endpoint: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds[0].revents & POLLIN) break;
    const auto now = Clock::now();
    for (std::size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      const short ev = fds[i + 2].revents;
      bool close_it = false;
      if (ev & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n > 0) {
          if (!c.answered) {
            c.in.append(buf, static_cast<std::size_t>(n));
            const std::size_t end = c.in.find("\r\n\r\n");
            if (end != std::string::npos && end + 4 <= kMaxHead) {
              const MetricsRequest r = parse_metrics_request(std::string_view(c.in).substr(0, end + 4));
              answer(c, r.status, r.head, r.metrics);
            } else if (c.in.size() > kMaxHead) {
              answer(c, 431, false, false);
            }
          }
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          close_it = true;  // the peer left (or, draining, finished)
        }
      }
      if (!close_it && c.answered && !c.draining && c.sent < c.out.size()) {
        const ssize_t n =
            ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          c.sent += static_cast<std::size_t>(n);
          c.last = now;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          close_it = true;
        }
        if (c.sent == c.out.size()) {
          // Closing with unread input would reset the connection and could
          // lose the answer: shut the write side and read to the peer's EOF.
          ::shutdown(c.fd, SHUT_WR);
          c.draining = true;
        }
      }
      if (now - c.last > idle_timeout_) close_it = true;
      if (close_it) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    std::erase_if(clients, [](const Client& c) { return c.fd < 0; });
    if (fds[1].revents & POLLIN) {
      while (clients.size() < kMaxClients) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            (void)accept_pause.on_failure(now);
          break;
        }
        accept_pause.on_success();
        clients.push_back({fd, {}, {}, 0, false, false, now});
      }
    }
  }
  for (Client& c : clients) ::close(c.fd);
}

}  // namespace ferry
