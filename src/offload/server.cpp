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

#include "core/log.h"
#include "ferry/core/arena.h"
#include "ferry/core/control_link.h"
#include "ferry/core/net.h"
#include "ferry/core/status.h"
#include "offload/server_thread.h"
#include "ferry/core/signal_fd.h"

namespace ferry::offload {
namespace {

using Clock = std::chrono::steady_clock;

class Server {
 public:
  explicit Server(const ServerOptions& opts) : opts_(opts) {}
  int run();

 private:
  void validate() const;
  void accept_clients();
  void on_control_connect();
  // Handles one message from the orchestrator; false once the link is finished.
  bool on_control_message(const ControlMessage& m);
  void attach(int arena_fd);
  void detach(const char* why);
  void drain();
  ServerThread* least_loaded();

  ServerOptions opts_;
  std::vector<std::unique_ptr<ServerThread>> threads_;
  int tcp_fd_ = -1;
  int control_listen_fd_ = -1;
  ControlLink link_;
  Clock::time_point link_since_{};  // when the current control peer connected
  Arena arena_;
  std::uint64_t generation_ = 0;
  bool ever_attached_ = false;
  bool stopping_ = false;
};

void Server::validate() const {
  if (opts_.cpus.empty())
    throw Error("--cpu is required: give one core per data-path thread (e.g. --cpu 0 --cpu 1)");
  const unsigned ncpu = std::thread::hardware_concurrency();
  for (int cpu : opts_.cpus)
    if (cpu < 0 || (ncpu != 0 && static_cast<unsigned>(cpu) >= ncpu))
      throw Error("--cpu " + std::to_string(cpu) + " is not a core of this machine (0.." +
                  std::to_string(ncpu - 1) + ")");
  (void)Arena::slot_size_for(opts_.max_message_length);
  (void)Arena::ring_capacity_for(opts_.max_concurrent_messages);
  if (opts_.max_clients_per_thread == 0) throw Error("--max-clients-per-thread must be at least 1");
}

ServerThread* Server::least_loaded() {
  ServerThread* best = nullptr;
  for (auto& t : threads_)
    if (t->clients() < opts_.max_clients_per_thread && (best == nullptr || t->clients() < best->clients()))
      best = t.get();
  return best;
}

void Server::accept_clients() {
  for (;;) {
    const int fd = accept4(tcp_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE) {
        log::app().error("cannot accept more clients: out of file descriptors ({})", std::strerror(errno));
        return;
      }
      log::app().warn("accept failed: {}", std::strerror(errno));
      return;
    }
    net::set_nodelay(fd);
    ServerThread* t = least_loaded();
    if (t == nullptr) {
      const std::string peer = net::peer_name(fd);
      log::app().warn("rejecting client {}: every data-path thread serves --max-clients-per-thread {} clients",
                      peer, opts_.max_clients_per_thread);
      const std::string err = wire::encode_error(wire::ErrorCode::ServerFull,
                                                 "server is full: every data-path thread is at its client limit");
      (void)!send(fd, err.data(), err.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    t->adopt(fd);
  }
}

void Server::attach(int arena_fd) {
  Arena arena = Arena::attach(arena_fd);
  const ArenaHeader* h = arena.header();
  std::string mismatch;
  if (h->num_channels != opts_.cpus.size())
    mismatch = "the orchestrator runs " + std::to_string(h->num_channels) +
               " worker(s) (--num-gpu-threads) but the server has " + std::to_string(opts_.cpus.size()) +
               " data-path thread(s) (--cpu); they must be equal";
  else if (h->max_message_length != opts_.max_message_length)
    mismatch = "--max-message-length differs: orchestrator " + std::to_string(h->max_message_length) +
               ", server " + std::to_string(opts_.max_message_length);
  else if (h->ring_capacity < opts_.max_concurrent_messages)
    mismatch = "the orchestrator's rings hold " + std::to_string(h->ring_capacity) +
               " messages, fewer than the server's --max-concurrent-messages " +
               std::to_string(opts_.max_concurrent_messages);
  if (!mismatch.empty()) throw Error(mismatch);

  arena_ = std::move(arena);
  ++generation_;
  for (std::uint32_t i = 0; i < threads_.size(); ++i) {
    const Channel ch = arena_.channel(i);
    threads_[i]->bind(&ch, generation_);
  }
  ever_attached_ = true;
  log::app().info("orchestrator (pid {}) attached: {} channel(s), {} slots of {} bytes each way",
                  h->creator_pid, h->num_channels, h->ring_capacity, h->slot_size);
}

void Server::detach(const char* why) {
  link_.close();
  if (!arena_.valid()) {  // a peer that never attached: nothing to fail
    log::app().warn("{}; dropped that control peer", why);
    return;
  }
  log::app().error("{}; clients with requests in flight get no_workers errors; waiting for an orchestrator on {}",
                   why, ControlLink::address_of(opts_.channel_name));
  ++generation_;
  for (auto& t : threads_) t->bind(nullptr, generation_);
  arena_ = Arena();  // every thread has let go of it (bind() waited)
}

void Server::on_control_connect() {
  ControlLink incoming = ControlLink::accept(control_listen_fd_);
  if (link_.valid()) {
    log::app().warn("a second orchestrator tried to attach; refusing it");
    try {
      incoming.send_error(wire::ErrorCode::ProtocolError,
                          "another orchestrator is already attached to this server");
    } catch (const Error&) {
    }
    return;
  }
  link_ = std::move(incoming);
  link_since_ = Clock::now();
}

bool Server::on_control_message(const ControlMessage& m) {
  switch (m.id) {
    case wire::MsgId::ExchangeConsumerIdRequest:
      if (arena_.valid()) {  // re-attaching on a live link would unmap memory the threads use
        if (m.fd >= 0) ::close(m.fd);
        link_.send_error(wire::ErrorCode::ProtocolError, "this orchestrator is already attached");
        return false;
      }
      if (m.fd < 0) {
        link_.send_error(wire::ErrorCode::ProtocolError, "exchange_consumer_id_request came without the arena fd");
        return false;
      }
      try {
        attach(m.fd);
      } catch (const Error& e) {
        log::app().error("refusing orchestrator: {}", e.what());
        link_.send_error(wire::ErrorCode::ConfigMismatch, e.what());
        return false;
      }
      link_.send(wire::MsgId::ExchangeConsumerIdResponse, static_cast<std::uint32_t>(getpid()));
      return true;
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

void Server::drain() {
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

int Server::run() {
  validate();
  net::raise_fd_limit();
  SignalFd signals;  // blocks SIGINT/SIGTERM in every thread created after it

  control_listen_fd_ = ControlLink::listen(opts_.channel_name);
  std::uint16_t port = 0;
  tcp_fd_ = net::listen_tcp(opts_.listen_address, opts_.port, &port);

  for (std::uint32_t i = 0; i < opts_.cpus.size(); ++i) {
    ServerThreadConfig cfg;
    cfg.index = i;
    cfg.cpu = opts_.pin_threads ? opts_.cpus[i] : -1;
    cfg.max_concurrent_messages = opts_.max_concurrent_messages;
    cfg.max_message_length = opts_.max_message_length;
    cfg.max_clients = opts_.max_clients_per_thread;
    threads_.push_back(std::make_unique<ServerThread>(cfg));
    threads_.back()->start();
  }
  log::app().info("listening on {}:{} with {} data-path thread(s); waiting for an orchestrator on {}",
                  opts_.listen_address, port, threads_.size(), ControlLink::address_of(opts_.channel_name));
  if (!opts_.port_file.empty()) {
    const std::string tmp = opts_.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    if (std::rename(tmp.c_str(), opts_.port_file.c_str()) != 0)
      throw_errno("writing --port-file " + opts_.port_file);
  }

  int exit_code = 0;
  while (!stopping_) {
    pollfd fds[4];
    int n = 0;
    fds[n++] = {signals.fd(), POLLIN, 0};
    fds[n++] = {control_listen_fd_, POLLIN, 0};
    const int link_at = link_.valid() ? n : -1;
    if (link_.valid()) fds[n++] = {link_.fd(), POLLIN, 0};
    // Before the first orchestrator attaches, clients wait in the listen backlog
    // (the reference start order is server, orchestrator, clients).
    const int tcp_at = (ever_attached_ && tcp_fd_ >= 0) ? n : -1;
    if (tcp_at >= 0) fds[n++] = {tcp_fd_, POLLIN, 0};
    if (poll(fds, n, 200) < 0) {
      if (errno == EINTR) continue;
      throw_errno("poll");
    }
    if (fds[0].revents & POLLIN) {
      log::app().info("{} received: shutting down", signals.read_name());
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
    if (fds[1].revents & POLLIN) on_control_connect();
    if (link_at >= 0 && (fds[link_at].revents & (POLLIN | POLLHUP | POLLERR))) {
      try {
        auto m = link_.recv(0);
        if (m && !on_control_message(*m)) detach("orchestrator refused");
      } catch (const Error& e) {
        detach((std::string("orchestrator link lost: ") + e.what()).c_str());
      }
    }
    if (tcp_at >= 0 && (fds[tcp_at].revents & POLLIN)) accept_clients();
    if (link_.valid() && !arena_.valid() && Clock::now() - link_since_ > std::chrono::seconds(10)) {
      log::app().warn("a peer on {} sent no exchange_consumer_id_request within 10 s; dropping it",
                      ControlLink::address_of(opts_.channel_name));
      link_.close();
    }
  }

  for (auto& t : threads_) t->stop();
  std::uint64_t requests = 0, responses = 0, errors = 0, dropped = 0;
  for (auto& t : threads_) {
    requests += t->stats().requests.load();
    responses += t->stats().responses.load();
    errors += t->stats().protocol_errors.load();
    dropped += t->stats().dropped_responses.load();
  }
  log::app().info("server stopped: {} requests, {} responses, {} protocol errors, {} responses dropped for "
                  "departed clients", requests, responses, errors, dropped);
  threads_.clear();
  if (tcp_fd_ >= 0) ::close(tcp_fd_);
  ::close(control_listen_fd_);
  return exit_code;
}

}  // namespace

int run_server(const ServerOptions& opts) { return Server(opts).run(); }

}  // namespace ferry::offload
