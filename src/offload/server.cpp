#include "ferry/offload/server.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "core/accept_pause.h"
#include "core/log.h"
#include "core/metrics_endpoint.h"
#include "core/net.h"
#include "core/service_thread.h"
#include "ferry/core/arena.h"
#include "ferry/core/control_link.h"
#include "ferry/core/peer_policy.h"
#include "ferry/core/status.h"
#include "offload/server_metrics.h"
#include "offload/server_thread.h"

namespace ferry::offload {
namespace {

using Clock = std::chrono::steady_clock;

// A control peer has this long after connecting to send its arena.
constexpr auto kAttachDeadline = std::chrono::seconds(10);
// Control peers connected and not yet attached: a few orchestrators may race to
// attach, and a silent peer must not keep the real one out.
constexpr std::size_t kMaxPendingPeers = 8;

// A control peer that connected and has not yet sent its arena.
struct PendingPeer {
  ControlLink link;
  PeerCredentials cred;
  Clock::time_point since;
};

}  // namespace

class Server::Impl {
 public:
  explicit Impl(ServerOptions opts) : opts_(std::move(opts)) {
    validate();
    if (!opts_.framing) opts_.framing = make_doca_wire_framing(opts_.max_message_length);
  }
  ~Impl();
  void start();
  ServerStats stats() const;

  ServiceThread service_;
  std::uint16_t port_ = 0;
  std::unique_ptr<MetricsEndpoint> metrics_;  // after threads_ is filled; gone before it empties

 private:
  int run();
  void validate() const;
  void accept_clients();
  void on_control_connect();
  void refuse_control_peer(ControlLink& peer, wire::ErrorCode code, const std::string& why);
  // Reads one message from a pending peer; true once it is done with (attached or dropped).
  bool on_pending_message(PendingPeer& p);
  // Handles one message from the attached orchestrator; false once the link is finished.
  bool on_control_message(const ControlMessage& m);
  void attach(int arena_fd);
  void detach(const std::string& why, const std::string& clients_told);
  void check_request_timeout();
  void drain();
  ServerThread* least_loaded();

  ServerOptions opts_;
  std::vector<std::unique_ptr<ServerThread>> threads_;
  int tcp_fd_ = -1;
  int control_listen_fd_ = -1;
  ControlLink link_;  // the attached orchestrator's
  std::vector<PendingPeer> pending_;
  AcceptPause tcp_pause_;
  AcceptPause control_pause_;
  log::Throttle accept_throttle_;
  log::Throttle control_throttle_;
  Arena arena_;
  std::uint64_t generation_ = 0;
  bool ever_attached_ = false;
  std::atomic<bool> attached_{false};  // arena_ is valid; for stats() on other threads
  std::atomic<std::uint64_t> refused_full_{0};  // clients turned away at accept: every thread full
  bool stopping_ = false;
};

void Server::Impl::validate() const {
  if (opts_.cpus.empty())
    throw Error("ServerOptions::cpus is required: give one core per data-path thread (e.g. {0, 1})");
  const unsigned ncpu = std::thread::hardware_concurrency();
  for (int cpu : opts_.cpus)
    if (cpu < 0 || (ncpu != 0 && static_cast<unsigned>(cpu) >= ncpu))
      throw Error("ServerOptions::cpus: " + std::to_string(cpu) + " is not a core of this machine (0.." +
                  std::to_string(ncpu - 1) + ")");
  (void)Arena::slot_size_for(opts_.max_message_length);
  (void)Arena::ring_capacity_for(opts_.max_concurrent_messages);
  if (opts_.max_clients_per_thread == 0)
    throw Error("ServerOptions::max_clients_per_thread must be at least 1");
  if (opts_.request_timeout_s < 0)
    throw Error("ServerOptions::request_timeout_s must be 0 (off) or more seconds");
  if (opts_.read_timeout_s < 0 || opts_.idle_timeout_s < 0)
    throw Error(
        "ServerOptions::read_timeout_s and ServerOptions::idle_timeout_s must be 0 (off) or more seconds");
}

ServerThread* Server::Impl::least_loaded() {
  ServerThread* best = nullptr;
  for (auto& t : threads_)
    if (t->clients() < opts_.max_clients_per_thread && (best == nullptr || t->clients() < best->clients()))
      best = t.get();
  return best;
}

void Server::Impl::accept_clients() {
  for (;;) {
    const int fd = accept4(tcp_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == ECONNABORTED) continue;
      // Out of descriptors or memory: stop accepting for a while, keep serving.
      const int err = errno;
      const auto pause = tcp_pause_.on_failure(Clock::now());
      if (const long long held = accept_throttle_.pass(); held >= 0)
        log::app().error("cannot accept clients: {}; not accepting for {} ms, serving the connected ones{}",
                         std::strerror(err), pause.count(), log::suppressed_note(held));
      return;
    }
    tcp_pause_.on_success();
    net::set_nodelay(fd);
    ServerThread* t = least_loaded();
    if (t == nullptr) {
      const std::string peer = net::peer_name(fd);
      if (const long long held = accept_throttle_.pass(); held >= 0)
        log::app().warn(
            "rejecting client {}: every data-path thread serves ServerOptions::max_clients_per_thread {} "
            "clients{}",
            peer, opts_.max_clients_per_thread, log::suppressed_note(held));
      const std::string err = opts_.framing->failure_reply(
          Framing::Failure::ServerFull, "server is full: every data-path thread is at its client limit");
      (void)!send(fd, err.data(), err.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      refused_full_.fetch_add(1, std::memory_order_relaxed);
      ::close(fd);
      continue;
    }
    t->adopt(fd);
  }
}

void Server::Impl::attach(int arena_fd) {
  Arena arena = Arena::attach(arena_fd);
  const ArenaHeader* h = arena.header();
  std::string mismatch;
  if (h->num_channels != opts_.cpus.size())
    mismatch = "the orchestrator runs " + std::to_string(h->num_channels) +
               " worker(s) (OrchestratorOptions::num_gpu_threads) but the server has " +
               std::to_string(opts_.cpus.size()) +
               " data-path thread(s) (ServerOptions::cpus); they must be equal";
  else if (h->max_message_length != opts_.max_message_length)
    mismatch = "the orchestrator's OrchestratorOptions::max_message_length " +
               std::to_string(h->max_message_length) +
               " differs from the server's ServerOptions::max_message_length " +
               std::to_string(opts_.max_message_length);
  else if (h->ring_capacity < opts_.max_concurrent_messages)
    mismatch = "the orchestrator's rings hold " + std::to_string(h->ring_capacity) +
               " messages, fewer than ServerOptions::max_concurrent_messages " +
               std::to_string(opts_.max_concurrent_messages);
  if (!mismatch.empty()) throw Error(mismatch);

  arena_ = std::move(arena);
  attached_.store(true, std::memory_order_relaxed);
  ++generation_;
  for (std::uint32_t i = 0; i < threads_.size(); ++i) {
    const Channel ch = arena_.channel(i);
    threads_[i]->bind(&ch, generation_);
  }
  ever_attached_ = true;
  log::app().info("orchestrator (pid {}) attached: {} channel(s), {} slots of {} bytes each way",
                  h->creator_pid, h->num_channels, h->ring_capacity, h->slot_size);
}

void Server::Impl::detach(const std::string& why, const std::string& clients_told) {
  link_.close();
  log::app().error("{}; clients with requests in flight get no_workers errors; waiting for an orchestrator on {}",
                   why, ControlLink::address_of(opts_.channel_name));
  ++generation_;
  for (auto& t : threads_) t->bind(nullptr, generation_, clients_told);
  arena_ = Arena();  // every thread has let go of it (bind() waited)
  attached_.store(false, std::memory_order_relaxed);
}

// A frozen or deadlocked orchestrator (stopped, swapping, stuck in a syscall)
// keeps its link open, so only the lack of responses tells: detach it, as if it
// had died, so that its clients get an error instead of waiting forever.
void Server::Impl::check_request_timeout() {
  if (!arena_.valid() || opts_.request_timeout_s <= 0) return;
  const auto now = Clock::now();
  const auto limit = std::chrono::duration<double>(opts_.request_timeout_s);
  for (auto& t : threads_) {
    if (t->in_flight() == 0 || t->unanswered_for(now) <= limit) continue;
    const std::string seconds = fmt::format("{:g} s", opts_.request_timeout_s);
    detach(fmt::format("the orchestrator answered none of the {} request(s) waiting in channel {} for {} "
                       "(ServerOptions::request_timeout_s): treating it as hung",
                       t->in_flight(), t->index(), seconds),
           "the orchestrator answered no request for " + seconds + " (ServerOptions::request_timeout_s)");
    return;
  }
}

void Server::Impl::refuse_control_peer(ControlLink& peer, wire::ErrorCode code, const std::string& why) {
  if (const long long held = control_throttle_.pass(); held >= 0)
    log::app().warn("refused a control peer on {}: {}{}", ControlLink::address_of(opts_.channel_name), why,
                    log::suppressed_note(held));
  try {
    peer.send_error(code, why);
  } catch (const Error&) {  // it left already
  }
  peer.close();
}

void Server::Impl::on_control_connect() {
  ControlLink incoming;
  PeerCredentials cred;
  try {
    incoming = ControlLink::accept(control_listen_fd_);
    cred = unix_peer_credentials(incoming.fd());
  } catch (const Error& e) {
    // Out of descriptors, or a peer gone before we asked who it was.
    const auto pause = control_pause_.on_failure(Clock::now());
    if (const long long held = control_throttle_.pass(); held >= 0)
      log::app().error("cannot accept a control peer: {}; not accepting for {} ms{}", e.what(), pause.count(),
                       log::suppressed_note(held));
    return;
  }
  control_pause_.on_success();
  if (auto why = opts_.control_peers.refusal(cred)) {
    refuse_control_peer(incoming, wire::ErrorCode::NotAllowed,
                        "pid " + std::to_string(cred.pid) + " may not attach as the orchestrator: " + *why);
    return;
  }
  if (arena_.valid()) {
    refuse_control_peer(incoming, wire::ErrorCode::ProtocolError,
                        "another orchestrator is already attached to this server");
    return;
  }
  if (pending_.size() >= kMaxPendingPeers) {
    refuse_control_peer(incoming, wire::ErrorCode::ProtocolError,
                        std::to_string(kMaxPendingPeers) + " control peers are connecting already; try again");
    return;
  }
  pending_.push_back({std::move(incoming), cred, Clock::now()});
}

bool Server::Impl::on_pending_message(PendingPeer& p) {
  std::optional<ControlMessage> m;
  try {
    m = p.link.recv(0);
  } catch (const Error& e) {
    log::app().info("a control peer (pid {}) left before attaching: {}", p.cred.pid, e.what());
    return true;
  }
  if (!m) return false;
  if (m->id != wire::MsgId::ExchangeConsumerIdRequest || m->fd < 0) {
    if (m->fd >= 0) ::close(m->fd);
    refuse_control_peer(p.link, wire::ErrorCode::ProtocolError,
                        std::string("expected exchange_consumer_id_request with the arena fd, got ") +
                            wire::to_string(m->id) + (m->fd < 0 ? " without a descriptor" : ""));
    return true;
  }
  if (arena_.valid()) {  // another peer attached first
    ::close(m->fd);
    refuse_control_peer(p.link, wire::ErrorCode::ProtocolError,
                        "another orchestrator is already attached to this server");
    return true;
  }
  try {
    attach(m->fd);
  } catch (const Error& e) {
    refuse_control_peer(p.link, wire::ErrorCode::ConfigMismatch, e.what());
    return true;
  }
  try {
    p.link.send(wire::MsgId::ExchangeConsumerIdResponse, static_cast<std::uint32_t>(getpid()));
  } catch (const Error& e) {
    link_ = std::move(p.link);
    detach(std::string("the orchestrator left while attaching: ") + e.what(),
           "the orchestrator went away with requests in flight");
    return true;
  }
  link_ = std::move(p.link);
  return true;
}

bool Server::Impl::on_control_message(const ControlMessage& m) {
  switch (m.id) {
    case wire::MsgId::ExchangeConsumerIdRequest:
      // Re-attaching on a live link would unmap memory the threads use.
      if (m.fd >= 0) ::close(m.fd);
      link_.send_error(wire::ErrorCode::ProtocolError, "this orchestrator is already attached");
      return false;
    case wire::MsgId::StartShutdown:
      log::app().info("orchestrator asked to shut down");
      stopping_ = true;
      drain();
      for (auto& t : threads_) t->stop();
      link_.send(wire::MsgId::ShutdownComplete);
      return true;
    default:
      if (m.fd >= 0) ::close(m.fd);
      log::app().warn("unexpected control message {} from the orchestrator", wire::to_string(m.id));
      return true;
  }
}

void Server::Impl::drain() {
  if (tcp_fd_ >= 0) {
    ::close(tcp_fd_);
    tcp_fd_ = -1;
  }
  for (auto& t : threads_) t->begin_drain();
  // Drain for part of the shutdown timeout only: the orchestrator waits the same
  // timeout for shutdown_complete, which is sent after this.
  const auto deadline = Clock::now() + std::chrono::duration<double>(0.6 * opts_.shutdown_timeout_s);
  for (;;) {
    std::uint32_t in_flight = 0;
    for (auto& t : threads_) in_flight += t->in_flight();
    if (in_flight == 0 || !arena_.valid()) break;
    if (Clock::now() > deadline) {
      log::app().warn("shutdown: {} request(s) still in flight after {} s; closing anyway", in_flight,
                      opts_.shutdown_timeout_s);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the last responses flush
}

void Server::Impl::start() {
  control_listen_fd_ = ControlLink::listen(opts_.channel_name);
  std::uint16_t port = 0;
  tcp_fd_ = net::listen_tcp(opts_.listen_address, opts_.port, &port);
  port_ = port;

  for (std::uint32_t i = 0; i < opts_.cpus.size(); ++i) {
    ServerThreadConfig cfg;
    cfg.index = i;
    cfg.cpu = opts_.pin_threads ? opts_.cpus[i] : -1;
    cfg.max_concurrent_messages = opts_.max_concurrent_messages;
    cfg.framing = opts_.framing;
    cfg.max_clients = opts_.max_clients_per_thread;
    cfg.read_timeout = std::chrono::duration<double>(opts_.read_timeout_s);
    cfg.idle_timeout = std::chrono::duration<double>(opts_.idle_timeout_s);
    cfg.max_held_output = static_cast<std::size_t>(opts_.max_output_per_thread);
    threads_.push_back(std::make_unique<ServerThread>(cfg));
    threads_.back()->start();
  }
  log::app().info("listening on {}:{} with {} data-path thread(s); waiting for an orchestrator on {}",
                  opts_.listen_address, port, threads_.size(), ControlLink::address_of(opts_.channel_name));
  if (!opts_.port_file.empty()) {
    const std::string tmp = opts_.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    if (std::rename(tmp.c_str(), opts_.port_file.c_str()) != 0)
      throw_errno("writing ServerOptions::port_file " + opts_.port_file);
  }
  if (opts_.metrics_port) {
    metrics_ = std::make_unique<MetricsEndpoint>(opts_.metrics_address, *opts_.metrics_port,
                                                 [this] { return render_server_metrics(stats()); });
    log::app().info("metrics on http://{}:{}/metrics", opts_.metrics_address, metrics_->port());
  }
  service_.start([this] { return run(); });
}

Server::Impl::~Impl() {
  metrics_.reset();
  service_.request_stop();
  (void)service_.wait();
  for (auto& t : threads_) t->stop();
  if (tcp_fd_ >= 0) ::close(tcp_fd_);
  if (control_listen_fd_ >= 0) ::close(control_listen_fd_);
}

ServerStats Server::Impl::stats() const {
  ServerStats st;
  for (const auto& t : threads_) {
    st.requests += t->stats().requests.load(std::memory_order_relaxed);
    st.responses += t->stats().responses.load(std::memory_order_relaxed);
    st.protocol_errors += t->stats().protocol_errors.load(std::memory_order_relaxed);
    st.request_bytes += t->stats().request_bytes.load(std::memory_order_relaxed);
    st.response_bytes += t->stats().response_bytes.load(std::memory_order_relaxed);
    for (std::size_t k = 0; k < st.refused.size(); ++k)
      st.refused[k] += t->stats().refused[k].load(std::memory_order_relaxed);
    st.in_flight += t->in_flight();
    st.dropped_responses += t->stats().dropped_responses.load(std::memory_order_relaxed);
    st.clients += t->clients();
    t->stats().read.add_to(st.read);
    t->stats().queue.add_to(st.queue);
    t->stats().handle.add_to(st.handle);
    t->stats().write.add_to(st.write);
  }
  const std::uint64_t full = refused_full_.load(std::memory_order_relaxed);
  st.refused[refusal_index(Framing::Failure::ServerFull)] += full;
  st.orchestrator_attached = attached_.load(std::memory_order_relaxed);
  return st;
}

int Server::Impl::run() {
  int exit_code = 0;
  std::vector<pollfd> fds;
  while (!stopping_) {
    const auto now = Clock::now();
    fds.clear();
    fds.push_back({service_.stop_fd(), POLLIN, 0});
    const int control_at = control_pause_.paused(now) ? -1 : static_cast<int>(fds.size());
    if (control_at >= 0) fds.push_back({control_listen_fd_, POLLIN, 0});
    const int link_at = link_.valid() ? static_cast<int>(fds.size()) : -1;
    if (link_.valid()) fds.push_back({link_.fd(), POLLIN, 0});
    // Before the first orchestrator attaches, clients wait in the listen backlog
    // (the reference start order is server, orchestrator, clients).
    const int tcp_at = (ever_attached_ && tcp_fd_ >= 0 && !tcp_pause_.paused(now)) ? static_cast<int>(fds.size()) : -1;
    if (tcp_at >= 0) fds.push_back({tcp_fd_, POLLIN, 0});
    const std::size_t pending_at = fds.size();
    for (const auto& p : pending_) fds.push_back({p.link.fd(), POLLIN, 0});
    int timeout_ms = 200;
    if (tcp_pause_.paused(now)) timeout_ms = std::min(timeout_ms, tcp_pause_.ms_left(now));
    if (control_pause_.paused(now)) timeout_ms = std::min(timeout_ms, control_pause_.ms_left(now));
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      throw_errno("poll");
    }
    if (fds[0].revents & POLLIN) {
      log::app().debug("asked to stop: shutting down");
      stopping_ = true;
      drain();
      if (link_.valid()) {
        try {
          link_.send(wire::MsgId::StartShutdown);
          const auto deadline = Clock::now() + std::chrono::duration<double>(opts_.shutdown_timeout_s);
          for (;;) {
            const int left = static_cast<int>(
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
            if (left <= 0) {
              log::app().warn("orchestrator did not answer start_shutdown within {} s", opts_.shutdown_timeout_s);
              exit_code = 1;
              break;
            }
            auto reply = link_.recv(left);
            if (reply && reply->id == wire::MsgId::ShutdownComplete) break;
            if (reply && reply->fd >= 0) ::close(reply->fd);
          }
        } catch (const Error& e) {
          log::app().warn("orchestrator went away during shutdown: {}", e.what());
        }
      }
      break;
    }
    if (link_at >= 0 && (fds[link_at].revents & (POLLIN | POLLHUP | POLLERR))) {
      const std::string lost = "the orchestrator went away with requests in flight";
      try {
        auto m = link_.recv(0);
        if (m && !on_control_message(*m)) detach("orchestrator refused", lost);
      } catch (const Error& e) {
        detach(std::string("orchestrator link lost: ") + e.what(), lost);
      }
    }
    // Pending peers before new ones, so that pending_ still matches fds here.
    std::vector<bool> done(pending_.size(), false);
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      if (fds[pending_at + i].revents & (POLLIN | POLLHUP | POLLERR)) done[i] = on_pending_message(pending_[i]);
      if (!done[i] && Clock::now() - pending_[i].since > kAttachDeadline) {
        refuse_control_peer(pending_[i].link, wire::ErrorCode::ProtocolError,
                            "pid " + std::to_string(pending_[i].cred.pid) +
                                " sent no exchange_consumer_id_request within 10 s");
        done[i] = true;
      }
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i)
      if (!done[i]) pending_[kept++] = std::move(pending_[i]);
    pending_.resize(kept);
    if (control_at >= 0 && (fds[control_at].revents & POLLIN)) on_control_connect();
    if (tcp_at >= 0 && (fds[tcp_at].revents & POLLIN)) accept_clients();
    check_request_timeout();
  }

  for (auto& t : threads_) t->stop();
  const ServerStats st = stats();
  log::app().info("server stopped: {} requests, {} responses, {} protocol errors, {} responses dropped for "
                  "departed clients", st.requests, st.responses, st.protocol_errors, st.dropped_responses);
  if (tcp_fd_ >= 0) ::close(tcp_fd_);
  tcp_fd_ = -1;
  return exit_code;
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Server::~Server() = default;
void Server::start() { impl_->start(); }
std::uint16_t Server::port() const noexcept { return impl_->port_; }
std::uint16_t Server::metrics_port() const noexcept {
  return impl_->metrics_ ? impl_->metrics_->port() : 0;
}
void Server::stop() noexcept { impl_->service_.request_stop(); }
int Server::wait() { return impl_->service_.wait(); }
std::optional<int> Server::wait_for(std::chrono::milliseconds timeout) { return impl_->service_.wait_for(timeout); }
ServerStats Server::stats() const { return impl_->stats(); }

std::uint64_t StageLatency::count() const {
  std::uint64_t n = 0;
  for (auto c : counts) n += c;
  return n;
}
std::string Server::first_error() const { return impl_->service_.first_error(); }

}  // namespace ferry::offload
