#pragma once
// A service's operations port: `GET /metrics` answers the service's metrics in
// the Prometheus text format (prometheus.h), `GET /health` answers 200 "ok".
// The agent, the server and the orchestrator host one when their options give
// a metrics port.
//
// One thread of its own polls the listener and at most kMaxClients clients,
// every socket non-blocking, so a client that stalls or floods holds up only
// itself and never the service's data path. Each connection carries one
// request: the answer ends with Connection: close. A request head that is not
// HTTP/1.x gets 400, one larger than kMaxHead 431, another method 405, another
// path 404. A client whose head is not complete within the idle timeout of
// connecting, or that reads none of its answer for that long, is closed.
//
// `render` runs on the endpoint's thread for each /metrics request; it must
// only read (relaxed atomics, or a lock the data path never takes).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace ferry {

struct MetricsRequest {
  int status = 400;      // 200, or the error to answer
  bool head = false;     // HEAD: the answer without its body
  bool metrics = false;  // /metrics; else /health (when status is 200)
};

// Reads one request head: the bytes up to and including the blank line. The
// request line must be METHOD SP /PATH[?QUERY] SP HTTP/1.0|1.1 and each header
// line NAME: VALUE, without control bytes. Never throws.
MetricsRequest parse_metrics_request(std::string_view head) noexcept;

class MetricsEndpoint {
 public:
  static constexpr std::size_t kMaxHead = 8192;
  static constexpr std::size_t kMaxClients = 16;

  // Binds address:port (port 0 picks one) and starts serving. Throws
  // ferry::Error when the address cannot be bound.
  MetricsEndpoint(const std::string& address, std::uint16_t port, std::function<std::string()> render,
                  std::chrono::milliseconds idle_timeout = std::chrono::seconds(5));
  ~MetricsEndpoint();  // stops and joins
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::uint64_t requests() const noexcept;  // requests answered, whatever the status

 private:
  void run();

  std::function<std::string()> render_;
  std::chrono::milliseconds idle_timeout_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<std::uint64_t> requests_{0};
  std::thread thread_;
};

}  // namespace ferry
