// ferry-echo-baseline: the TCP half of `ferry server` with nothing behind it.
//
// Same framing, same socket handling (non-blocking sockets, level-triggered
// epoll, one pinned thread per --cpu, one send per batch of responses), but the
// payload is reversed in place on the TCP thread instead of going through a
// channel to a worker. Ferry's throughput divided by this one's is what the
// offload path costs on top of plain TCP.
//
// An acceptor (the main thread) hands connections round-robin to the epoll
// threads over a pipe each, so N connections spread evenly over the cores (an
// SO_REUSEPORT hash would not).

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/net.h"
#include "ferry/core/status.h"
#include "ferry/core/wire.h"

namespace {

using namespace ferry;

constexpr std::size_t kRecvChunk = std::size_t{64} << 10;

struct Conn {
  int fd = -1;
  std::vector<std::uint8_t> in;   // received bytes; responses are built here in place
  std::size_t in_fill = 0;
  std::vector<std::uint8_t> out;  // responses the socket did not take yet
  std::size_t out_sent = 0;
};

class EchoThread {
 public:
  EchoThread(int cpu, std::size_t max_message_length)
      : cpu_(cpu), max_len_(max_message_length) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw_errno("pipe2");
    pipe_rd_ = p[0];
    pipe_wr_ = p[1];
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) throw_errno("epoll_create1");
    add(pipe_rd_, EPOLLIN, nullptr);
  }

  ~EchoThread() {
    if (thread_.joinable()) {  // still running: an error unwound past the normal stop
      hand_over(-1);
      thread_.join();
    }
    for (auto& [fd, c] : conns_) ::close(fd);
    ::close(ep_);
    ::close(pipe_rd_);
    ::close(pipe_wr_);
  }

  // Starts the thread and waits until it is pinned, so a bad --cpu fails here
  // with its message instead of inside the thread.
  void start() {
    std::promise<std::string> pinned;
    auto result = pinned.get_future();
    thread_ = std::thread([this, &pinned] {
      try {
        if (cpu_ >= 0) net::pin_current_thread(cpu_);
      } catch (const std::exception& e) {
        pinned.set_value(e.what());
        return;
      }
      pinned.set_value("");
      run();
    });
    const std::string err = result.get();
    if (!err.empty()) {
      thread_.join();
      throw Error(err);
    }
  }

  // Called by the acceptor: the fd now belongs to this thread. -1 means stop.
  void hand_over(int fd) {
    if (::write(pipe_wr_, &fd, sizeof(fd)) != sizeof(fd)) {
      std::perror("echo: handing a connection to its thread");
      if (fd >= 0) ::close(fd);
    }
  }

  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void add(int fd, std::uint32_t events, void* ptr) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = ptr;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl add");
  }

  // Back-pressure, as in Ferry's server: while responses wait for the socket we
  // stop reading requests, so a client that does not read cannot grow `out`.
  void watch(Conn& c, bool want_write) {
    epoll_event ev{};
    ev.events = want_write ? EPOLLOUT : EPOLLIN;
    ev.data.ptr = &c;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  void close_conn(Conn& c) {
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    conns_.erase(c.fd);  // destroys c
  }

  void run() {
    epoll_event events[256];
    for (;;) {
      const int n = epoll_wait(ep_, events, 256, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::perror("echo: epoll_wait");
        return;
      }
      for (int i = 0; i < n; ++i) {
        if (events[i].data.ptr == nullptr) {
          if (!accept_handed()) return;
          continue;
        }
        auto& c = *static_cast<Conn*>(events[i].data.ptr);
        if (events[i].events & EPOLLOUT) {
          on_writable(c);
        } else {
          on_readable(c);
        }
      }
    }
  }

  // Takes one fd from the pipe; false on the stop marker.
  bool accept_handed() {
    int fd = -1;
    if (::read(pipe_rd_, &fd, sizeof(fd)) != sizeof(fd) || fd < 0) return false;
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    // Room for one largest frame plus a full read behind it.
    c->in.resize(wire::kHeaderSize + max_len_ + kRecvChunk);
    Conn& ref = *c;
    conns_.emplace(fd, std::move(c));
    add(fd, EPOLLIN, &ref);
    return true;
  }

  void on_readable(Conn& c) {
    const ssize_t r = ::recv(c.fd, c.in.data() + c.in_fill, c.in.size() - c.in_fill, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return close_conn(c);
    if (r < 0) return;
    c.in_fill += std::size_t(r);

    // Reverse every complete request's payload in place: a response is the
    // request frame with its payload reversed (msg_id 4, as DOCA's server sends).
    std::uint8_t* p = c.in.data();
    std::size_t avail = c.in_fill;
    std::size_t done = 0;
    for (;;) {
      std::uint32_t len = 0, frame = 0;
      const wire::FrameCheck chk = wire::check_request(p + done, avail - done, max_len_, &len, &frame);
      if (chk == wire::FrameCheck::NeedMore) break;
      if (chk != wire::FrameCheck::Ok) {
        // Answer what was good, then refuse the bad frame like Ferry does.
        const std::string err = wire::encode_error(wire::to_error_code(chk), "bad request frame");
        (void)::send(c.fd, p, done, MSG_NOSIGNAL);
        (void)::send(c.fd, err.data(), err.size(), MSG_NOSIGNAL);
        return close_conn(c);
      }
      std::uint8_t* payload = p + done + wire::kRequestOverhead;
      std::reverse(payload, payload + len);
      done += frame;
    }
    if (done > 0 && !send_batch(c, p, done)) return;
    // Keep the partial frame at the front.
    if (done < avail && done > 0) std::memmove(p, p + done, avail - done);
    c.in_fill = avail - done;
  }

  // Sends all responses of one read in one send; what the socket does not take
  // goes to `out`. False when the connection was closed.
  bool send_batch(Conn& c, const std::uint8_t* data, std::size_t len) {
    ssize_t s;
    do {
      s = ::send(c.fd, data, len, MSG_NOSIGNAL);
    } while (s < 0 && errno == EINTR);
    if (s < 0 && errno != EAGAIN) {
      close_conn(c);
      return false;
    }
    const std::size_t sent = s < 0 ? 0 : std::size_t(s);
    if (sent < len) {
      c.out.assign(data + sent, data + len);
      c.out_sent = 0;
      watch(c, true);
    }
    return true;
  }

  void on_writable(Conn& c) {
    const ssize_t s =
        ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (s < 0 && errno != EAGAIN && errno != EINTR) return close_conn(c);
    if (s > 0) c.out_sent += std::size_t(s);
    if (c.out_sent == c.out.size()) {
      c.out.clear();
      c.out_sent = 0;
      watch(c, false);
    }
  }

  int cpu_;
  std::size_t max_len_;
  int pipe_rd_ = -1, pipe_wr_ = -1, ep_ = -1;
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
  std::thread thread_;
};

void write_port_file(const std::string& path, std::uint16_t port) {
  // Write then rename, so a script polling for the file never reads half of it.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << port << "\n";
    if (!f) throw Error("cannot write --port-file '" + path + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw_errno("renaming " + tmp);
}

int run(int argc, char** argv) {
  CLI::App app{"ferry-echo-baseline: an epoll echo server with Ferry's framing, for comparison"};
  int port = 0;
  std::string port_file;
  std::string address = "0.0.0.0";
  std::vector<int> cpus;
  std::size_t max_len = 256;
  app.add_option("-p,--port", port, "TCP port; 0 picks a free one")->check(CLI::Range(0, 65535));
  app.add_option("--port-file", port_file, "write the bound port to this file");
  app.add_option("--listen-address", address, "IPv4 address to listen on");
  app.add_option("--cpu", cpus, "one pinned epoll thread per core (repeatable)");
  app.add_option("--max-message-length", max_len,
                 "largest request after the 8-byte header, length prefix included")
      ->check(CLI::Range(std::size_t{4}, std::size_t{64} << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (cpus.empty()) cpus.push_back(-1);  // one unpinned thread

  // Block the stop signals in every thread; the acceptor reads them from a signalfd.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const int sfd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (sfd < 0) throw_errno("signalfd");

  net::raise_fd_limit();
  std::uint16_t bound = 0;
  const int lfd = net::listen_tcp(address, static_cast<std::uint16_t>(port), &bound);

  std::vector<std::unique_ptr<EchoThread>> threads;
  for (int cpu : cpus) threads.push_back(std::make_unique<EchoThread>(cpu, max_len));
  for (auto& t : threads) t->start();

  std::printf("listening on port %u\n", unsigned(bound));
  std::fflush(stdout);
  if (!port_file.empty()) write_port_file(port_file, bound);

  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  ev.data.fd = sfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);

  std::size_t next = 0;
  bool stop = false;
  while (!stop) {
    epoll_event got[2];
    const int n = epoll_wait(ep, got, 2, -1);
    if (n < 0 && errno != EINTR) throw_errno("epoll_wait");
    for (int i = 0; i < n; ++i) {
      if (got[i].data.fd == sfd) {
        stop = true;
        break;
      }
      for (;;) {  // the listener is non-blocking: take every pending connection
        const int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        net::set_nodelay(fd);
        threads[next]->hand_over(fd);
        next = (next + 1) % threads.size();
      }
    }
  }

  ::close(lfd);
  for (auto& t : threads) t->hand_over(-1);
  for (auto& t : threads) t->join();
  ::close(ep);
  ::close(sfd);
  std::fprintf(stderr, "echo: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-echo-baseline: %s\n", e.what());
    return 1;
  }
}
