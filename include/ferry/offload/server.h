#pragma once
// ferry server: the proxy role of the DOCA remote-offload system. It accepts TCP
// clients, forwards their requests into the arena's channels, and sends the
// workers' responses back, in order per connection.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/core/peer_policy.h"
#include "ferry/offload/framing.h"

namespace ferry::offload {

struct ServerOptions {
  std::string device_id;       // DOCA: the DPU's device; accepted, unused without DOCA
  std::string representor_id;  // DOCA: the host representor; accepted, unused without DOCA
  std::string channel_name = "dpu_gpu_remote_offload";
  std::string listen_address = "0.0.0.0";
  std::uint16_t port = 0;
  std::vector<int> cpus;  // one pinned data-path thread per core
  std::uint32_t max_concurrent_messages = 128;  // per connection in flight
  std::uint32_t max_message_length = 256;       // excludes the 8-byte header
  std::uint32_t max_clients_per_thread = 1024;
  std::string port_file;               // write the bound port here once listening
  double shutdown_timeout_s = 5.0;     // how long to drain and to wait for the peer
  // Requests in a channel that get no response for this long mean a frozen or
  // deadlocked orchestrator: it is detached and those clients get no_workers.
  // 0: wait forever.
  double request_timeout_s = 30.0;
  // A client whose request has begun but is not complete after read_timeout_s
  // gets the framing's ReadTimeout reply and is closed (slow-header attacks);
  // one with nothing in flight and nothing sent for idle_timeout_s is closed.
  // 0: never.
  double read_timeout_s = 0;
  double idle_timeout_s = 0;
  // Bytes of response copies one data-path thread may hold for clients that
  // have not read them, the room reserved for responses in flight included.
  // Beyond it the thread takes new requests only from connections that owe
  // nothing. 0: each connection's own bound only.
  std::uint64_t max_output_per_thread = 0;
  PeerPolicy control_peers;  // who besides our own uid may attach as the orchestrator
  bool pin_threads = true;
  // The clients' protocol. Null: the DOCA wire with max_message_length. Another
  // framing keeps max_message_length as the arena's slot payload bound.
  std::shared_ptr<const Framing> framing;
  // Serve GET /metrics (Prometheus text) and GET /health on this TCP port of
  // metrics_address, from a thread of its own (README.md, "Metrics").
  // Unset: no endpoint; 0: a free port (metrics_port() says which).
  std::optional<std::uint16_t> metrics_port;
  std::string metrics_address = "127.0.0.1";
};

// Where a request's time goes on its way through the server, as Prometheus
// histograms: counts per bucket (upper bounds in microseconds, the last one
// +Inf) and the sum.
struct StageLatency {
  static constexpr std::array<double, 15> kBoundsUs = {1,    2,    5,    10,    20,    50,     100,  200,
                                                       500,  1000, 2000, 5000, 10000, 100000, 1e300};
  std::array<std::uint64_t, kBoundsUs.size()> counts{};
  double sum_us = 0;
  std::uint64_t count() const;
};

// Why clients were answered with an error and closed (ServerStats::refused):
// the framing rejected a request, then each Framing::Failure in its order.
inline constexpr std::array<const char*, 6> kRefusalKinds = {"malformed",      "no_workers",  "workers_lost",
                                                             "slot_too_small", "server_full", "read_timeout"};
inline constexpr std::size_t refusal_index(Framing::Failure f) noexcept {
  return 1 + static_cast<std::size_t>(f);
}

struct ServerStats {
  std::uint64_t requests = 0;
  std::uint64_t responses = 0;
  std::uint64_t request_bytes = 0;    // requests' bytes as received, framing included
  std::uint64_t response_bytes = 0;   // responses' bytes as written for their clients
  std::uint64_t protocol_errors = 0;  // connections refused (refused, all but server_full)
  std::array<std::uint64_t, kRefusalKinds.size()> refused{};
  std::uint32_t in_flight = 0;          // requests in the channels, waiting for or on a worker
  std::uint64_t dropped_responses = 0;  // their client had gone
  std::uint32_t clients = 0;
  bool orchestrator_attached = false;
  // Per request: read (its first byte to its last), queue (in the channel
  // before a worker took it), handle (on the worker, as the framing reports it;
  // queue and handle together when it does not), write (the response ready to
  // the last of its connection's queued bytes sent).
  StageLatency read, queue, handle, write;
};

// The proxy as a service an application hosts:
//
//   Server server(options);
//   server.start();            // listening; throws ferry::Error for bad options
//   ...                        // an orchestrator attaches, clients are served
//   server.stop();             // drains, then asks the orchestrator to shut down
//   int code = server.wait();  // 0, or 1 after an error (first_error() says which)
//
// It also stops by itself when the orchestrator sends start_shutdown. It
// handles no signals: that is the host's business.
class Server {
 public:
  explicit Server(ServerOptions options);  // checks the options; throws ferry::Error
  ~Server();                               // stops and waits
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the TCP port and the control socket and starts serving. Throws ferry::Error.
  void start();
  // The TCP port bound by start() (the chosen one when options.port is 0).
  std::uint16_t port() const noexcept;
  // The metrics endpoint's port once started; 0 without one.
  std::uint16_t metrics_port() const noexcept;
  // Drain in-flight requests, tell the orchestrator, close; returns at once (any thread).
  void stop() noexcept;
  int wait();
  // The exit code once stopped, after waiting up to `timeout` for it.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  ServerStats stats() const;
  std::string first_error() const;  // sticky; empty while healthy

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::offload
