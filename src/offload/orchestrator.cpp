#include "ferry/offload/orchestrator.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <optional>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/log.h"
#include "core/metrics_endpoint.h"
#include "core/prometheus.h"
#include "core/service_thread.h"
#include "ferry/core/arena.h"
#include "ferry/core/control_link.h"
#include "ferry/core/peer_policy.h"
#include "ferry/core/status.h"

namespace ferry::offload {
namespace {

using Clock = std::chrono::steady_clock;

// Requests published into the channels but not yet answered: the request
// ring's consumer tail tells how far the workers have read, the response seq
// words how far they have answered. The orchestrator only reads here.
bool requests_waiting(const Arena& arena) {
  for (std::uint32_t i = 0; i < arena.num_channels(); ++i) {
    const Channel ch = arena.channel(i);
    const std::uint32_t tail = std::atomic_ref<std::uint32_t>(ch.requests.layout()->consumer.tail)
                                   .load(std::memory_order_acquire);
    // A request is waiting when the slot at the consumer's tail has been published.
    if (std::atomic_ref<std::uint32_t>(ch.requests.desc(tail)->seq).load(std::memory_order_acquire) == tail + 1)
      return true;
  }
  return false;
}

// Requests published into the channels and not yet taken by a worker: from
// each request ring's consumer tail, the run of published slots.
std::uint64_t requests_queued(const Arena& arena) {
  std::uint64_t n = 0;
  for (std::uint32_t i = 0; i < arena.num_channels(); ++i) {
    const Channel ch = arena.channel(i);
    const std::uint32_t tail =
        std::atomic_ref<std::uint32_t>(ch.requests.layout()->consumer.tail).load(std::memory_order_acquire);
    for (std::uint32_t k = 0; k < ch.requests.capacity(); ++k)
      if (std::atomic_ref<std::uint32_t>(ch.requests.desc(tail + k)->seq).load(std::memory_order_acquire) ==
          tail + k + 1)
        ++n;
      else
        break;
  }
  return n;
}

// Any local user can bind a free abstract socket name, so the peer on the
// channel may be an impostor waiting for our arena (and every client request in
// it): hand the arena only to a server of a uid the policy trusts.
void check_server_peer(const ControlLink& link, const OrchestratorOptions& opts) {
  const PeerCredentials server = unix_peer_credentials(link.fd());
  if (auto why = opts.server_peers.refusal(server))
    throw Error("the server on " + ControlLink::address_of(opts.channel_name) + " (pid " +
                std::to_string(server.pid) + ") is not trusted with the arena: " + *why);
}

// Waits for the server to listen; std::nullopt when asked to stop first.
std::optional<ControlLink> connect_to_server(const OrchestratorOptions& opts, int stop_fd) {
  const auto start = Clock::now();
  bool announced = false;
  for (;;) {
    if (auto link = ControlLink::try_connect(opts.channel_name)) {
      check_server_peer(*link, opts);
      return link;
    }
    if (!announced) {
      log::app().info("waiting for the server on {} ...", ControlLink::address_of(opts.channel_name));
      announced = true;
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (opts.connect_timeout_s > 0 && waited > opts.connect_timeout_s)
      throw Error("no ferry server listens on " + ControlLink::address_of(opts.channel_name) + " after " +
                  std::to_string(static_cast<int>(waited)) +
                  " s (start the server first, with the same "
                  "OrchestratorOptions::channel_name)");
    pollfd p{stop_fd, POLLIN, 0};
    if (poll(&p, 1, 500) > 0) {
      log::app().info("asked to stop while waiting for the server");
      return std::nullopt;
    }
  }
}

}  // namespace

class Orchestrator::Impl {
 public:
  Impl(OrchestratorOptions opts, std::unique_ptr<worker::Backend> backend)
      : opts_(std::move(opts)), backend_(std::move(backend)) {
    if (backend_ == nullptr) throw Error("the orchestrator needs a worker backend");
    if (opts_.num_gpu_threads == 0) throw Error("OrchestratorOptions::num_gpu_threads must be at least 1");
  }
  ~Impl() {
    metrics_.reset();  // it reads backend_ and arena_
    service_.request_stop();
    (void)service_.wait();
    // A stuck backend's teardown would wait for its kernel forever: leave it to
    // the process's exit (the host checks stuck()).
    if (backend_ != nullptr && backend_->stuck()) (void)backend_.release();
    backend_.reset();  // before arena_, which it has registered with the GPU, is unmapped
  }

  void start();
  int run();
  std::string render_metrics() const;

  OrchestratorOptions opts_;
  std::unique_ptr<worker::Backend> backend_;
  Arena arena_;
  ServiceThread service_;
  std::unique_ptr<MetricsEndpoint> metrics_;
  // Why the orchestrator stopped serving, for /metrics (each is also logged).
  std::atomic<std::uint64_t> worker_failures_{0}, hangs_{0}, server_lost_{0};
  std::atomic<bool> attached_{false};
};

std::string Orchestrator::Impl::render_metrics() const {
  prom::TextWriter w;
  w.counter("ferry_orchestrator_requests_total", "Requests the workers answered.", backend_->handled());
  w.gauge("ferry_orchestrator_queue_depth", "Requests in the channels that no worker has taken yet.",
          static_cast<double>(requests_queued(arena_)));
  w.gauge("ferry_orchestrator_workers", "Worker channels served.", arena_.num_channels());
  w.gauge("ferry_orchestrator_server_attached", "1 while attached to a server.",
          attached_.load(std::memory_order_relaxed) ? 1 : 0);
  w.family("ferry_orchestrator_errors_total", "counter",
           "Why serving ended: worker_failed (a worker reported a failure), hung (no progress while requests "
           "waited), server_lost (the server's control link broke).");
  w.sample("ferry_orchestrator_errors_total", {{"kind", "worker_failed"}}, worker_failures_.load());
  w.sample("ferry_orchestrator_errors_total", {{"kind", "hung"}}, hangs_.load());
  w.sample("ferry_orchestrator_errors_total", {{"kind", "server_lost"}}, server_lost_.load());
  return w.take();
}

void Orchestrator::Impl::start() {
  const OrchestratorOptions& opts = opts_;
  ArenaParams params;
  params.num_channels = opts.num_gpu_threads;
  params.max_concurrent_messages =
      opts.ring_slots != 0 ? opts.ring_slots : 8 * opts.max_concurrent_messages;
  if (params.max_concurrent_messages < opts.max_concurrent_messages)
    throw Error("OrchestratorOptions::ring_slots " + std::to_string(opts.ring_slots) +
                " is smaller than OrchestratorOptions::max_concurrent_messages " +
                std::to_string(opts.max_concurrent_messages));
  params.max_message_length = opts.max_message_length;
  params.backend = opts.worker.backend == worker::BackendKind::Cuda ? ArenaBackend::Cuda : ArenaBackend::Cpu;
  arena_ = Arena::create(params, "ferry-arena-" + opts.channel_name);
  log::app().info("arena: {} channel(s) of {} slots x {} bytes, {} KiB in all", arena_.num_channels(),
                  arena_.header()->ring_capacity, arena_.header()->slot_size, arena_.size() / 1024);
  backend_->prepare(arena_);
  if (opts.metrics_port) {
    metrics_ = std::make_unique<MetricsEndpoint>(opts.metrics_address, *opts.metrics_port,
                                                 [this] { return render_metrics(); });
    log::app().info("metrics on http://{}:{}/metrics", opts.metrics_address, metrics_->port());
  }
  service_.start([this] { return run(); });
}

int Orchestrator::Impl::run() {
  const OrchestratorOptions& opts = opts_;
  Arena& arena = arena_;
  worker::Backend* backend = backend_.get();
  auto link_opt = connect_to_server(opts, service_.stop_fd());
  if (!link_opt) return 0;
  ControlLink link = std::move(*link_opt);
  try {
    link.send(wire::MsgId::ExchangeConsumerIdRequest, static_cast<std::uint32_t>(getpid()), arena.fd());
  } catch (const Error& send_error) {
    // A server that refuses us (say, another orchestrator is attached) may have
    // answered and closed before our request went out: its reason beats EPIPE.
    std::optional<ControlMessage> refusal;
    try {
      refusal = link.recv(1000);
    } catch (const Error&) {
    }
    if (refusal && refusal->id == wire::MsgId::FerryError)
      throw Error("the server refused this orchestrator: " + refusal->text);
    throw;
  }
  auto reply = link.recv(10'000);
  if (!reply) throw Error("the server did not answer exchange_consumer_id_request within 10 s");
  if (reply->id == wire::MsgId::FerryError)
    throw Error("the server refused this orchestrator: " + reply->text);
  if (reply->id != wire::MsgId::ExchangeConsumerIdResponse)
    throw Error(std::string("the server answered ") + wire::to_string(reply->id) +
                " instead of exchange_consumer_id_response");
  log::app().info("attached to server (pid {}); starting {}", reply->value, backend->describe());
  backend->start();
  attached_.store(true, std::memory_order_relaxed);
  if (!opts.ready_file.empty()) {
    const std::string tmp = opts.ready_file + ".tmp";
    std::ofstream(tmp) << getpid() << "\n";
    if (std::rename(tmp.c_str(), opts.ready_file.c_str()) != 0)
      throw_errno("writing OrchestratorOptions::ready_file " + opts.ready_file);
  }

  int exit_code = 0;
  std::uint64_t last_handled = backend->handled();
  auto last_progress = Clock::now();
  for (;;) {
    pollfd fds[2] = {{service_.stop_fd(), POLLIN, 0}, {link.fd(), POLLIN, 0}};
    // The reference host polls its stop flag every 100 ms; so does this loop.
    if (poll(fds, 2, 100) < 0 && errno != EINTR) throw_errno("poll");

    if (fds[0].revents & POLLIN) {
      log::app().info("asked to stop: asking the server to shut down");
      try {
        link.send(wire::MsgId::StartShutdown);
        const auto deadline = Clock::now() + std::chrono::duration<double>(opts.shutdown_timeout_s);
        for (;;) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
          if (left <= 0) {
            log::app().warn("the server did not answer start_shutdown within {} s", opts.shutdown_timeout_s);
            exit_code = 1;
            break;
          }
          auto m = link.recv(static_cast<int>(left));
          if (m && m->id == wire::MsgId::ShutdownComplete) break;
        }
      } catch (const Error& e) {
        log::app().warn("server went away during shutdown: {}", e.what());
      }
      break;
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      try {
        auto m = link.recv(0);
        if (m && m->id == wire::MsgId::StartShutdown) {
          log::app().info("server asked to shut down");
          backend->stop();
          link.send(wire::MsgId::ShutdownComplete);
          break;
        }
        if (m && m->id == wire::MsgId::FerryError) {
          log::app().error("server reported: {}", m->text);
        } else if (m) {
          log::app().warn("unexpected control message {} from the server", wire::to_string(m->id));
        }
      } catch (const Error& e) {
        log::app().error("server went away ({}); stopping the workers", e.what());
        server_lost_.fetch_add(1, std::memory_order_relaxed);
        exit_code = 1;
        break;
      }
    }

    const std::string failure = backend->failure();
    if (!failure.empty()) {
      log::app().error("worker failed: {}; shutting down so the server fails its clients' requests", failure);
      worker_failures_.fetch_add(1, std::memory_order_relaxed);
      exit_code = 1;
      break;
    }
    const std::uint64_t handled = backend->handled();
    if (handled != last_handled || !requests_waiting(arena)) {
      last_handled = handled;
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > std::chrono::duration<double>(opts.hang_timeout_s)) {
      log::app().error("workers made no progress for {} s while requests wait: treating them as hung",
                       opts.hang_timeout_s);
      hangs_.fetch_add(1, std::memory_order_relaxed);
      exit_code = 1;
      break;
    }
  }
  backend->stop();
  attached_.store(false, std::memory_order_relaxed);
  // Closing the link (by returning) tells a live server that its workers are gone.
  log::app().info("orchestrator stopped after {} message(s)", backend->handled());
  if (backend->stuck()) {
    log::app().error("workers are stuck ({})", backend->failure());
    return exit_code != 0 ? exit_code : 1;
  }
  return exit_code;
}

Orchestrator::Orchestrator(OrchestratorOptions options, std::unique_ptr<worker::Backend> backend)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(backend))) {}
Orchestrator::~Orchestrator() = default;
void Orchestrator::start() { impl_->start(); }
void Orchestrator::stop() noexcept { impl_->service_.request_stop(); }
int Orchestrator::wait() { return impl_->service_.wait(); }
std::optional<int> Orchestrator::wait_for(std::chrono::milliseconds timeout) {
  return impl_->service_.wait_for(timeout);
}
std::uint64_t Orchestrator::handled() const { return impl_->backend_->handled(); }
std::uint16_t Orchestrator::metrics_port() const noexcept {
  return impl_->metrics_ ? impl_->metrics_->port() : 0;
}
bool Orchestrator::stuck() const { return impl_->backend_->stuck(); }
std::string Orchestrator::first_error() const { return impl_->service_.first_error(); }

}  // namespace ferry::offload
