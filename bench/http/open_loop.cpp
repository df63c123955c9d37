// ferry-open-loop: an open-loop HTTP/1.1 load generator. Requests leave at a
// fixed rate whatever the server does (wrk waits for each response before the
// next: closed-loop, so a slow server slows its own load and hides its queue).
// Each request's latency counts from when it was due, not when it left, so a
// client that falls behind does not hide the delay (no coordinated omission).
//
//   ferry-open-loop --port 8080 --path '/inference?d=hello' --rates 5000,20000,50000 --seconds 5
//
// Connections are keep-alive and pipelined: request k goes to connection
// k mod C at t0 + k/rate. Prints a table per rate and writes JSON.
//
// --closed is the closed loop instead, for the latency of a lone request:
// each connection has one request in flight and sends the next when the
// answer is in (after --think-us), for --seconds; latency counts from the send.
//
//   ferry-open-loop --port 8080 --closed -t 1 -c 1 --seconds 5

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/latency_histogram.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  std::string out;
  std::size_t out_sent = 0;
  std::string in;
  std::deque<Clock::time_point> due;  // requests sent, oldest first
  Clock::time_point next_at{};        // closed loop: when the next request may leave
};

// What drive() offers: a fixed rate (open loop), or one request in flight per
// connection (closed loop, rate unused).
struct Load {
  double rate = 0;
  bool closed = false;
  std::chrono::nanoseconds think{0};
};

struct Result {
  ferry::LatencyHistogram latency;
  std::uint64_t ok = 0, busy = 0, other = 0, sent = 0, errors = 0;
};

int connect_to(const std::string& host, std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) throw std::runtime_error("bad --host " + host);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS)
    throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// One whole response at the front of in: its size, or 0 if not all there yet.
std::size_t response_size(std::string_view in, int* status) {
  const std::size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  if (in.size() < 12) return 0;
  *status = std::atoi(in.data() + 9);  // "HTTP/1.1 200": the head's end follows, so digits stop there
  std::size_t length = 0;
  for (std::size_t p = 0; p < head_end;) {
    const std::size_t eol = in.find("\r\n", p);
    if (eol - p > 15 && strncasecmp(in.data() + p, "content-length:", 15) == 0)
      length = std::strtoull(in.data() + p + 15, nullptr, 10);
    p = eol + 2;
  }
  const std::size_t total = head_end + 4 + length;
  return in.size() >= total ? total : 0;
}

// One thread's share: load.rate (its part of the total) requests a second
// over its connections, or with load.closed one in flight on each.
void drive(const std::string& host, std::uint16_t port, const std::string& request, Load load, double seconds,
           int connections, Clock::time_point start, Result& r) {
  const double rate = load.closed ? 1.0 : load.rate;
  std::vector<Connection> conns(connections);
  const int ep = epoll_create1(0);
  for (int i = 0; i < connections; ++i) {
    conns[i].fd = connect_to(host, port);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
  }
  const auto interval = std::chrono::duration<double>(1.0 / rate);
  const auto total = load.closed ? 0 : static_cast<std::uint64_t>(rate * seconds);
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto drain_until = start + std::chrono::duration<double>(seconds + 10);
  for (auto& c : conns) c.next_at = start;
  std::uint64_t next = 0, outstanding = 0;
  epoll_event events[64];
  while (next < total || outstanding > 0 || (load.closed && Clock::now() < end)) {
    const auto now = Clock::now();
    if (now > drain_until) {
      r.errors += outstanding;  // never answered
      break;
    }
    if (load.closed && now < end) {
      for (auto& c : conns) {
        if (!c.due.empty() || now < c.next_at) continue;
        c.out += request;
        c.due.push_back(now);  // latency from the send: nothing was due before it
        ++outstanding;
        ++r.sent;
      }
    }
    while (next < total) {
      const auto due = start + std::chrono::duration_cast<Clock::duration>(interval * double(next));
      if (due > now) break;
      Connection& c = conns[next % connections];
      c.out += request;
      c.due.push_back(due);
      ++next;
      ++outstanding;
      ++r.sent;
    }
    for (auto& c : conns) {
      while (c.out_sent < c.out.size()) {
        const ssize_t n = send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        c.out_sent += static_cast<std::size_t>(n);
      }
      if (c.out_sent == c.out.size()) {
        c.out.clear();
        c.out_sent = 0;
      }
    }
    const int n = epoll_wait(ep, events, 64, 0);  // spins: sends must leave on time
    for (int e = 0; e < n; ++e) {
      Connection& c = conns[events[e].data.u32];
      char buf[65536];
      const ssize_t got = recv(c.fd, buf, sizeof(buf), 0);
      if (got <= 0) {
        if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          r.errors += c.due.size();
          outstanding -= c.due.size();
          c.due.clear();
          epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
          close(c.fd);
          c.fd = connect_to(host, port);  // the rest go on a fresh connection
          c.in.clear();
          c.out.clear();
          c.out_sent = 0;
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u32 = events[e].data.u32;
          epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
        }
        continue;
      }
      c.in.append(buf, static_cast<std::size_t>(got));
      const auto at = Clock::now();
      int status = 0;
      std::size_t size;
      std::size_t consumed = 0;
      while (!c.due.empty() && (size = response_size(std::string_view(c.in).substr(consumed), &status)) > 0) {
        r.latency.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(at - c.due.front()).count()));
        c.due.pop_front();
        --outstanding;
        c.next_at = at + load.think;
        if (status == 200) ++r.ok;
        else if (status == 429) ++r.busy;
        else ++r.other;
        consumed += size;
      }
      c.in.erase(0, consumed);
    }
  }
  for (auto& c : conns) close(c.fd);
  close(ep);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("ferry-open-loop: requests at fixed rates, latency from when each was due");
  std::string host = "127.0.0.1", path = "/inference?d=hello+world", json_path, body, method = "GET";
  std::uint16_t port = 8080;
  std::vector<double> rates;
  double seconds = 5;
  int connections = 64, threads = 2;
  bool closed = false;
  double think_us = 0;
  app.add_option("--host", host, "Server IPv4 address")->capture_default_str();
  app.add_option("-p,--port", port, "Server port")->required();
  app.add_option("--path", path, "Request target")->capture_default_str();
  app.add_option("--body", body, "A POST body (JSON); sets the method to POST");
  auto* rates_opt = app.add_option("--rates", rates, "Requests per second to offer, one run each (comma-separated)")
                        ->delimiter(',');
  app.add_flag("--closed", closed,
               "Closed loop instead of --rates: one request in flight per connection, the next sent when the "
               "answer is in; with -t 1 -c 1, the latency of a lone request")
      ->excludes(rates_opt);
  app.add_option("--think-us", think_us, "--closed: microseconds between an answer and the next request")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seconds", seconds, "Length of each run")->capture_default_str();
  app.add_option("-c,--connections", connections, "Keep-alive connections per thread")->capture_default_str();
  app.add_option("-t,--threads", threads, "Client threads (each spins on a core)")->capture_default_str();
  app.add_option("--json", json_path, "Write the rows here as JSON");
  CLI11_PARSE(app, argc, argv);
  if (rates.empty() && !closed) {
    std::fprintf(stderr, "ferry-open-loop: give --rates, or --closed for the closed loop\n");
    return 2;
  }
  if (closed) rates = {0};  // one run; its row's offered_rps is 0
  if (!body.empty()) method = "POST";
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\n";
  if (!body.empty())
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n" + body;

  nlohmann::json rows = nlohmann::json::array();
  std::printf("%12s %12s %9s %9s %9s %9s %9s %10s %8s %7s\n", "offered/s", "answered/s", "p50 ms", "p90 ms",
              "p99 ms", "p99.9 ms", "max ms", "200", "429", "errors");
  for (double rate : rates) {
    std::vector<Result> results(threads);
    std::vector<std::thread> ts;
    const auto start = Clock::now() + std::chrono::milliseconds(50);
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        try {
          const Load load{rate / threads, closed,
                          std::chrono::nanoseconds(static_cast<std::int64_t>(think_us * 1e3))};
          drive(host, port, request, load, seconds, connections, start, results[t]);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "ferry-open-loop: %s\n", e.what());
          results[t].errors += 1;
        }
      });
    for (auto& t : ts) t.join();
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    Result all;
    for (auto& r : results) {
      all.latency.merge(r.latency);
      all.ok += r.ok;
      all.busy += r.busy;
      all.other += r.other;
      all.sent += r.sent;
      all.errors += r.errors;
    }
    const auto ms = [&](double q) { return static_cast<double>(all.latency.percentile_ns(q)) / 1e6; };
    const double answered = static_cast<double>(all.ok + all.busy + all.other) / std::max(took, seconds);
    std::printf("%12.0f %12.0f %9.3f %9.3f %9.3f %9.3f %9.3f %10llu %8llu %7llu\n", rate, answered, ms(50), ms(90),
                ms(99), ms(99.9), static_cast<double>(all.latency.max_ns()) / 1e6,
                static_cast<unsigned long long>(all.ok), static_cast<unsigned long long>(all.busy),
                static_cast<unsigned long long>(all.errors + all.other));
    rows.push_back({{"offered_rps", rate},
                    {"answered_rps", answered},
                    {"p50_ms", ms(50)},
                    {"p90_ms", ms(90)},
                    {"p99_ms", ms(99)},
                    {"p999_ms", ms(99.9)},
                    {"max_ms", static_cast<double>(all.latency.max_ns()) / 1e6},
                    {"ok", all.ok},
                    {"busy_429", all.busy},
                    {"other_status", all.other},
                    {"errors", all.errors},
                    {"seconds", seconds},
                    {"closed_loop", closed},
                    {"connections", connections * threads}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << rows.dump(2) << "\n";
  return 0;
}
