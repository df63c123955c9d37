#pragma once
// A raw HTTP/1.1 client for the end-to-end tests: sends any bytes (valid or
// not) and reads whole responses, with a timeout, so that tests see exactly
// what the server sent and when it closed.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ferry::test {

struct HttpResponse {
  int status = 0;
  std::string status_line;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& name) const;  // "" when absent
};

class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port, double timeout_s = 10.0);
  ~HttpConnection();
  HttpConnection(HttpConnection&& o) noexcept;
  HttpConnection(const HttpConnection&) = delete;

  void send(const std::string& bytes);
  // The next response; nullopt when the server closed before any of it.
  // head_only: the answer to a HEAD request (Content-Length without a body).
  // Throws on a timeout or a malformed response.
  std::optional<HttpResponse> read_response(bool head_only = false, double timeout_s = 10.0);
  // True once the server has closed the connection within timeout_s (bytes it
  // still sends are discarded).
  bool closed_by_peer(double timeout_s = 10.0);
  void close();
  // Stops sending (shutdown SHUT_WR), as `nc -N` does after its request; reading goes on.
  void shutdown_write();

 private:
  bool fill(double timeout_s);  // more bytes into buf_; false on EOF
  int fd_ = -1;
  std::string buf_;
};

// "GET path HTTP/1.1" with Host and any extra header lines (each ending in \r\n).
std::string http_get(const std::string& path, const std::string& extra = "", const std::string& method = "GET");

// "POST path HTTP/1.1" with a JSON body, its Content-Length, and any extra
// header lines (each ending in \r\n).
std::string json_post(const std::string& path, const std::string& body, const std::string& extra = "");

}  // namespace ferry::test
