// A program adds its own routes to ferry http, as docs/http.md "Adding a
// route" shows: it sees only the public headers (include/ferry/...) and links
// only ferry_http, as a program built against the installed package
// (ferry::http) does. The server runs on an ephemeral port and is asked over
// real sockets. Exits 0 when every check passes.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/http/route.h"
#include "ferry/http/server.h"

namespace {

using namespace ferry;

// GET /hello?NAME: answered at once, on the proxy thread.
class Hello final : public http::Route {
 public:
  void handle(const http::RouteRequest& request, http::Responder& reply) const override {
    reply.send(200, "text/plain", "hello, " + std::string(request.query) + "\n");
  }
};

// POST /echo: answered later, by another thread, with the request's body.
class Echo final : public http::Route {
 public:
  ~Echo() override {
    for (std::thread& t : threads_) t.join();
  }
  void handle(const http::RouteRequest& request, http::Responder& reply) const override {
    http::Responder::Later later = reply.defer();
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([later, body = std::string(request.body)] {
      later.complete([body] { return http::RouteResponse{200, "application/octet-stream", body, ""}; });
    });
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::thread> threads_;
};

// Sends one request with Connection: close and reads the whole response.
std::string ask(std::uint16_t port, const std::string& method, const std::string& target,
                const std::string& body = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return "";
  }
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n";
  if (!body.empty()) request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n" + body;
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    response.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return response;
}

std::string body_of(const std::string& response) {
  const std::size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

int failures = 0;

void check(bool ok, const std::string& what, const std::string& response = "") {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "FAILED: %s\n%s\n", what.c_str(), response.c_str());
}

http::HttpOptions options() {
  http::HttpOptions o;
  o.listen_address = "127.0.0.1";
  o.port = 0;  // any free port
  o.cpus = {0};
  o.pin_threads = false;
  return o;
}

}  // namespace

int main() {
  try {
    http::HttpOptions o = options();
    o.routes.push_back({"/hello", http::Methods::Get | http::Methods::Head, std::make_shared<Hello>()});
    o.routes.push_back({"/echo", http::Methods::Post, std::make_shared<Echo>()});
    http::HttpServer server(o);
    server.start();
    const std::uint16_t port = server.port();

    const std::string hello = ask(port, "GET", "/hello?ferry");
    check(hello.rfind("HTTP/1.1 200 OK\r\n", 0) == 0, "GET /hello is 200", hello);
    check(hello.find("\r\nContent-Type: text/plain\r\n") != std::string::npos, "GET /hello is text", hello);
    check(body_of(hello) == "hello, ferry\n", "GET /hello's body", hello);

    const std::string head = ask(port, "HEAD", "/hello?ferry");
    check(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0 && body_of(head).empty(), "HEAD /hello: the head only",
          head);
    check(head.find("\r\nContent-Length: 13\r\n") != std::string::npos, "HEAD /hello's length", head);

    const std::string echo = ask(port, "POST", "/echo", "ping");
    check(echo.rfind("HTTP/1.1 200 OK\r\n", 0) == 0 && body_of(echo) == "ping", "POST /echo, answered later",
          echo);

    const std::string wrong = ask(port, "GET", "/echo");
    check(wrong.rfind("HTTP/1.1 405 ", 0) == 0, "GET /echo is 405", wrong);

    // The server's own routes and pages serve beside them.
    check(ask(port, "GET", "/health").rfind("HTTP/1.1 200 ", 0) == 0, "GET /health");
    check(ask(port, "GET", "/index.html").rfind("HTTP/1.1 200 ", 0) == 0, "GET /index.html");
    const std::string metrics = ask(port, "GET", "/metrics");
    check(metrics.find("ferry_http_responses_total{code=\"405\"} 1\n") != std::string::npos,
          "/metrics counts the routes' responses", metrics);

    server.stop();
    check(server.wait() == 0, "the server stops cleanly: " + server.first_error());

    // A built-in route's path cannot be taken.
    http::HttpOptions taken = options();
    taken.routes.push_back({"/health", http::Methods::Get, std::make_shared<Hello>()});
    bool refused = false;
    try {
      http::HttpServer clash(taken);
    } catch (const Error& e) {
      refused = std::string(e.what()).find("/health") != std::string::npos;
    }
    check(refused, "a route on /health is refused, naming the path");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
  if (failures == 0) std::printf("http_route_from_outside: every check passed\n");
  return failures == 0 ? 0 : 1;
}
