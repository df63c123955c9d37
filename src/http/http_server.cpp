// HttpServer: an offload::Server with the HTTP framing and an Orchestrator
// whose backend serves HttpHandler, in one process, joined by their control
// link on a channel name of their own.

#include "ferry/http/server.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "core/log.h"
#include "ferry/core/status.h"
#include "ferry/offload/orchestrator.h"
#include "ferry/offload/server.h"
#include "ferry/worker/cpu_backend.h"
#include "http/content.h"
#include "http/http_framing.h"
#include "http/http_handler.h"
#include "http/inference_route.h"
#include "http/reply.h"
#if defined(FERRY_HAVE_CUDA)
#include "http/http_cuda.h"
#endif

namespace ferry::http {
namespace {

std::string unique_channel() {
  static std::atomic<unsigned> n{0};
  return "http-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1));
}

void validate(const HttpOptions& o) {
  if (o.cpus.empty())
    throw Error("HttpOptions::cpus is required: one core per proxy thread (each gets a worker)");
  if (o.max_head < 1024) throw Error("HttpOptions::max_head must be at least 1024 bytes");
  if (o.max_request_line < 16 || o.max_request_line > o.max_head)
    throw Error("HttpOptions::max_request_line must be between 16 and HttpOptions::max_head");
  if (o.max_pipelined < 1) throw Error("HttpOptions::max_pipelined must be at least 1");
  if (o.max_output_per_thread < (std::uint64_t{1} << 20))
    throw Error("HttpOptions::max_output_per_thread must be at least 1MiB (" +
                std::to_string(o.max_output_per_thread) + " bytes given)");
  if (o.header_timeout_s < 0 || o.idle_timeout_s < 0)
    throw Error(
        "HttpOptions::header_timeout_s and HttpOptions::idle_timeout_s must be 0 (off) or more seconds");
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpOptions o) : opts_(std::move(o)) {
    validate(opts_);
    metrics_ = std::make_shared<Metrics>();
    infer::api::Limits api_limits;
    api_limits.max_inputs = opts_.max_client_batch;
    api_limits.max_input_bytes = opts_.max_body;
    auto inference = std::make_shared<const InferenceRoute>(opts_.embedding, api_limits);
    metrics_->set_extra([inference] { return inference->render_metrics(); });
    // The built-in routes first: a program's own route of the same path is refused.
    std::vector<RouteBinding> routes = builtin_routes(inference, metrics_);
    routes.insert(routes.end(), opts_.routes.begin(), opts_.routes.end());
    Content content = Content::load(opts_.root, opts_.max_file_bytes, std::move(routes));
    content.require_api_key(opts_.api_key);
    content_ = std::make_shared<const Content>(std::move(content));
    limits_.max_request_line = opts_.max_request_line;
    limits_.max_head = opts_.max_head;
    limits_.max_body = opts_.max_body;
    limits_.max_chunk_framing = opts_.max_chunk_framing;
    channel_ = unique_channel();
    // A slot holds a request head, and a reply's meta and head (much smaller).
    slot_payload_ = opts_.max_head + 64 + static_cast<std::uint32_t>(kMaxLoggedLine);
  }

  ~Impl() {
    if (server_) server_->stop();
    if (server_) server_->wait();
    if (orchestrator_) orchestrator_->wait();
    // Its jobs call back into the routes the content owns.
    if (opts_.embedding) opts_.embedding->stop();
    // Every line is in: write them out now, whoever else still holds the log.
    if (access_log_) access_log_->close();
    // The metrics' sources: the inference route, and the server about to go.
    metrics_->set_extra(nullptr);
    metrics_->set_server_stats(nullptr);
  }

  void start() {
    offload::ServerOptions so;
    so.channel_name = channel_;
    so.listen_address = opts_.listen_address;
    so.port = opts_.port;
    so.cpus = opts_.cpus;
    so.pin_threads = opts_.pin_threads;
    so.max_concurrent_messages = opts_.max_pipelined;
    so.max_message_length = slot_payload_;
    so.max_clients_per_thread = opts_.max_connections_per_thread;
    so.read_timeout_s = opts_.header_timeout_s;
    so.idle_timeout_s = opts_.idle_timeout_s;
    so.max_output_per_thread = opts_.max_output_per_thread;
    if (!opts_.access_log.empty()) access_log_ = std::make_shared<AccessLog>(opts_.access_log);
    so.framing = std::make_shared<HttpFraming>(limits_, slot_payload_, content_, metrics_, access_log_);
    server_ = std::make_unique<offload::Server>(so);
    offload::Server* server = server_.get();
    metrics_->set_server_stats([server] { return server->stats(); });

    offload::OrchestratorOptions oo;
    oo.channel_name = channel_;
    oo.num_gpu_threads = static_cast<std::uint32_t>(opts_.cpus.size());
    oo.max_concurrent_messages = opts_.max_pipelined;
    oo.max_message_length = slot_payload_;
    oo.worker = opts_.worker;
    oo.gpu_pci_addr = opts_.worker.gpu;
    oo.connect_timeout_s = 30;

    std::unique_ptr<worker::Backend> backend;
    if (opts_.worker.backend == worker::BackendKind::Cuda) {
#if defined(FERRY_HAVE_CUDA)
      device_content_ = std::make_unique<DeviceContent>(*content_, opts_.worker.gpu);
      backend = make_http_cuda_backend(opts_.worker, device_content_->view());
#else
      throw Error("this build has no CUDA backend; use BackendKind::Cpu");
#endif
    } else {
      backend = worker::make_cpu_backend(opts_.worker, HttpHandler{content_->view()});
    }
    if (opts_.embedding) opts_.embedding->start();
    server_->start();
    orchestrator_ = std::make_unique<offload::Orchestrator>(oo, std::move(backend));
    orchestrator_->start();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!server_->stats().orchestrator_attached) {
      if (orchestrator_->wait_for(std::chrono::milliseconds(0)))
        throw Error("the workers stopped before serving: " + orchestrator_->first_error());
      if (std::chrono::steady_clock::now() > deadline) throw Error("the workers did not attach within 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!opts_.port_file.empty()) {
      const std::string tmp = opts_.port_file + ".tmp";
      std::ofstream(tmp) << server_->port() << "\n";
      if (std::rename(tmp.c_str(), opts_.port_file.c_str()) != 0)
        throw_errno("writing HttpOptions::port_file " + opts_.port_file);
    }
  }

  int wait() {
    const int s = server_->wait();
    const int o = orchestrator_->wait();
    return s != 0 ? s : o;
  }

  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    const auto s = server_->wait_for(timeout);
    if (!s) return std::nullopt;
    const auto o = orchestrator_->wait_for(std::chrono::milliseconds(5000));
    if (!o) return std::nullopt;
    return *s != 0 ? *s : *o;
  }

  HttpOptions opts_;
  Limits limits_;
  std::uint32_t slot_payload_ = 0;
  std::string channel_;
  std::shared_ptr<const Content> content_;
  std::shared_ptr<Metrics> metrics_;
  std::shared_ptr<AccessLog> access_log_;
#if defined(FERRY_HAVE_CUDA)
  std::unique_ptr<DeviceContent> device_content_;  // outlives the workers that read it
#endif
  std::unique_ptr<offload::Server> server_;
  std::unique_ptr<offload::Orchestrator> orchestrator_;
};

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() = default;
void HttpServer::start() { impl_->start(); }
std::uint16_t HttpServer::port() const noexcept { return impl_->server_ ? impl_->server_->port() : 0; }
void HttpServer::stop() noexcept {
  if (impl_->server_) impl_->server_->stop();
}
int HttpServer::wait() { return impl_->wait(); }
std::optional<int> HttpServer::wait_for(std::chrono::milliseconds timeout) { return impl_->wait_for(timeout); }

HttpStats HttpServer::stats() const {
  HttpStats s;
  if (!impl_->server_) return s;
  const offload::ServerStats st = impl_->server_->stats();
  s.requests = st.requests;
  s.responses = st.responses;
  s.refused = st.protocol_errors;
  s.connections = st.clients;
  return s;
}

std::string HttpServer::first_error() const {
  if (impl_->server_) {
    std::string e = impl_->server_->first_error();
    if (!e.empty()) return e;
  }
  return impl_->orchestrator_ ? impl_->orchestrator_->first_error() : std::string();
}

std::vector<std::string> HttpServer::pages() const {
  std::vector<std::string> out;
  const auto& c = *impl_->content_;
  for (const auto& e : c.entries())
    if (e.route_methods == 0)
      out.emplace_back(reinterpret_cast<const char*>(c.strings().data()) + e.path_offset, e.path_len);
  return out;
}

}  // namespace ferry::http
