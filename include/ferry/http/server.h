#pragma once
// ferry http: an HTTP/1.1 server whose parsing, validation, routing and response
// heads run on the workers (CPU threads or a GPU launch method), behind Ferry's
// TCP proxy. The proxy only finds where each request ends; a worker gets the
// request head through a channel and names the reply, which the proxy sends.
//
//   http::HttpServer server(options);
//   server.start();            // serving once it returns; throws ferry::Error
//   ...
//   server.stop();
//   int code = server.wait();  // 0, or 1 after an error (first_error() says which)
//
// HttpOptions::routes adds paths answered by the program's own code (route.h).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/http/route.h"
#include "ferry/infer/service.h"
#include "ferry/worker/backend.h"

namespace ferry::http {

struct HttpOptions {
  std::string listen_address = "0.0.0.0";
  std::uint16_t port = 8080;  // 0: any free port (port() says which)
  std::vector<int> cpus;      // one proxy thread per core; as many workers
  bool pin_threads = true;
  worker::WorkerOptions worker;  // the backend and launch method, the workers' cores
  std::string root;              // also serve every file under this directory
  std::uint64_t max_file_bytes = std::uint64_t{64} << 20;
  std::uint32_t max_request_line = 8192;  // 414 beyond
  std::uint32_t max_head = 16384;         // 431 beyond
  std::uint64_t max_body = 65536;         // a body's data (a chunked one's decoded bytes); 413 beyond
  // A chunked body's chunk-size lines, extensions, line ends and trailers; 413
  // beyond. The proxy holds a request until it is whole, so a connection's
  // input buffer is sized for max_head + max_body + this.
  std::uint64_t max_chunk_framing = 131072;
  std::uint32_t max_connections_per_thread = 1024;  // 503 beyond
  std::uint32_t max_pipelined = 128;                // requests in flight per connection
  // Response copies (heads, small bodies, /metrics) a proxy thread may hold for
  // clients that have not read them; pages are sent uncopied from the page
  // store. Beyond it, only connections that owe nothing are read.
  std::uint64_t max_output_per_thread = std::uint64_t{64} << 20;
  double header_timeout_s = 10;  // a begun request must be whole this soon (408)
  double idle_timeout_s = 75;    // a keep-alive connection idle this long is closed
  std::string port_file;         // write the bound port here once serving
  std::string access_log;        // append a common-log-format line per response here ("-": stdout)
  // The embedding service behind /inference, /embed, /v1/embeddings and /info
  // (docs/inference.md); null: those answer 503. The server starts and stops it.
  std::shared_ptr<infer::EmbeddingService> embedding;
  std::size_t max_client_batch = 32;  // inputs in one embedding request (413 beyond)
  // TEI's --api-key: non-empty, every route but /health and /metrics needs
  // "Authorization: Bearer KEY", compared in constant time; else 401 with
  // WWW-Authenticate: Bearer. Never logged nor shown.
  std::string api_key;
  // Served besides the built-in routes (/health, /metrics, the embedding APIs),
  // which a route may not replace; each path once (route.h).
  std::vector<RouteBinding> routes;
};

struct HttpStats {
  std::uint64_t requests = 0;   // forwarded to the workers
  std::uint64_t responses = 0;  // of those, answered
  std::uint64_t refused = 0;    // requests the proxy answered itself (malformed, over a limit)
  std::uint32_t connections = 0;
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);  // loads the content; throws ferry::Error
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, starts the workers and returns once they serve. Throws ferry::Error.
  void start();
  std::uint16_t port() const noexcept;
  void stop() noexcept;
  int wait();
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  HttpStats stats() const;
  std::string first_error() const;
  // Paths served from the content table (the built-in pages and --root).
  std::vector<std::string> pages() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::http
