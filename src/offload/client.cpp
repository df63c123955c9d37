// ferry client: the client of DOCA's "DPU GPU Remote Offload Application Guide", as a closed-loop
// load generator with latency percentiles.
//
// Each thread owns one blocking TCP connection and keeps up to `window` requests
// in flight. The hot loop is: one recv of up to 64 KiB, validate every complete
// response in it, then send as many new requests in one send() from a buffer of
// pre-built request frames. No allocation, no lock and no exception per request.

#include "ferry/offload/client.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/latency_histogram.h"
#include "core/net.h"
#include "ferry/core/status.h"
#include "ferry/core/wire.h"

namespace ferry::offload {
namespace {

constexpr std::size_t kMaxMessageBytes = std::size_t{64} << 20;  // 64 MiB
constexpr std::size_t kRecvChunk = std::size_t{64} << 10;        // bytes asked of one recv
constexpr std::size_t kSendBufferTarget = std::size_t{4} << 20;  // pre-built request frames
constexpr std::size_t kMaxErrorFrame = std::size_t{64} << 10;    // a ferry_error larger is garbage
constexpr int kStopCheckMs = 100;  // how long a blocking call may sleep before checking `abort`

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Bytes as a short printable string for error messages: at most `limit` bytes,
// non-printable ones as \xNN, "..." when cut.
std::string printable(const std::uint8_t* p, std::size_t n, std::size_t limit = 48) {
  std::string out;
  const std::size_t shown = std::min(n, limit);
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\x%02x", c);
      out += esc;
    }
  }
  if (shown < n) out += "... (" + std::to_string(n) + " bytes)";
  return out;
}

// What every thread shares, read-only once the run starts.
struct Plan {
  std::string ip;
  std::uint16_t port = 0;
  std::uint64_t iterations = 0;  // per thread
  std::uint32_t window = 0;
  std::uint32_t frame_size = 0;  // one request frame: 12 + message
  std::vector<std::uint8_t> frames;  // `frames_in_buffer` request frames back to back
  std::uint32_t frames_in_buffer = 0;
  std::vector<std::uint8_t> expected;  // the whole expected response frame
  std::size_t recv_capacity = 0;
  double connect_timeout_s = 0;
};

// Written by one client thread, read by the progress reporter: one cache line
// each so that threads do not share lines they write.
struct alignas(64) ProgressCounter {
  std::atomic<std::uint64_t> done{0};
};

struct ThreadResult {
  bool ok = false;
  bool aborted = false;  // stopped because another thread failed
  std::string error;
  std::uint64_t responses = 0;
  std::uint64_t first_send_ns = 0;
  std::uint64_t last_recv_ns = 0;
  LatencyHistogram latency;
};

struct Shared {
  std::atomic<bool> abort{false};
  std::atomic<bool> waiting_logged{false};
  std::latch connected;
  explicit Shared(std::ptrdiff_t threads) : connected(threads) {}
};

// Connects, retrying every 500 ms while refused, until the plan's timeout.
// Returns the fd, or -1 with *error set (or *aborted, when another thread failed).
int connect_with_retry(const Plan& plan, Shared& shared, std::string* error, bool* aborted) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(plan.connect_timeout_s);
  for (;;) {
    const int fd = net::connect_tcp(plan.ip, plan.port);
    if (fd >= 0) return fd;
    if (shared.abort.load(std::memory_order_relaxed)) {
      *aborted = true;
      return -1;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%g", plan.connect_timeout_s);
      *error = "could not connect to " + plan.ip + ":" + std::to_string(plan.port) +
               ": connection refused for " + secs + " s";
      return -1;
    }
    // One line for the whole client, not one per thread.
    if (!shared.waiting_logged.exchange(true))
      log::app().info("waiting for server at {}:{}", plan.ip, plan.port);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// One connection's closed loop. Fills `res`; never throws.
class Connection {
 public:
  Connection(const Plan& plan, Shared& shared, ProgressCounter& progress, ThreadResult& res)
      : plan_(plan), shared_(shared), progress_(progress), res_(res),
        sent_at_(plan.window, 0), in_(plan.recv_capacity) {}

  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }

  void run() {
    bool arrived = false;
    try {
      std::string err;
      fd_ = connect_with_retry(plan_, shared_, &err, &res_.aborted);
      if (fd_ < 0) {
        if (!res_.aborted) fail(err);
      } else {
        // recv wakes up every kStopCheckMs so a thread blocked on a silent server
        // still notices that another thread failed.
        timeval tv{0, kStopCheckMs * 1000};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      }
      // Start together: the run's wall time begins when every connection is up.
      arrived = true;
      shared_.connected.arrive_and_wait();
      if (fd_ < 0) return;
      if (shared_.abort.load(std::memory_order_relaxed)) {
        res_.aborted = true;
        return;
      }
      loop();
    } catch (const std::exception& e) {
      // Raise `abort` before releasing the others so they do not start a run
      // that is already failed.
      fail(e.what());
      if (!arrived) shared_.connected.count_down();
    }
  }

 private:
  void fail(const std::string& why) {
    res_.ok = false;
    res_.error = why;
    shared_.abort.store(true, std::memory_order_relaxed);
  }

  // Hands k more requests to the send stream, stamping them with `now`.
  void queue(std::uint64_t k, std::uint64_t now) noexcept {
    for (std::uint64_t i = 0; i < k; ++i) sent_at_[(queued_ + i) % plan_.window] = now;
    queued_ += k;
    send_pending_ += k * plan_.frame_size;
  }

  // Writes as much of the pending request stream as the socket takes without
  // blocking. The stream is the request frame repeated, so its byte at offset x
  // is frames[x % frame_size + ...]: we send from the pre-built buffer at the
  // current offset within a frame. Returns false on a dead connection.
  bool flush_sends(bool* would_block) {
    *would_block = false;
    const std::uint64_t buffer_bytes = std::uint64_t(plan_.frames_in_buffer) * plan_.frame_size;
    while (send_pending_ > 0) {
      const std::uint64_t offset = stream_sent_ % plan_.frame_size;
      const std::uint64_t len = std::min(send_pending_, buffer_bytes - offset);
      const ssize_t r = ::send(fd_, plan_.frames.data() + offset, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        stream_sent_ += std::uint64_t(r);
        send_pending_ -= std::uint64_t(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        *would_block = true;
        return true;
      }
      fail(std::string("send: ") + (r == 0 ? "connection closed" : std::strerror(errno)) +
           " after " + std::to_string(res_.responses) + " of " + std::to_string(plan_.iterations) +
           " responses");
      return false;
    }
    return true;
  }

  void loop() {
    const std::uint64_t total = plan_.iterations;
    res_.first_send_ns = now_ns();
    queue(std::min<std::uint64_t>(plan_.window, total), res_.first_send_ns);

    while (res_.responses < total) {
      if (shared_.abort.load(std::memory_order_relaxed)) {
        res_.aborted = true;
        return;
      }
      bool would_block = false;
      if (!flush_sends(&would_block)) return;

      int recv_flags = 0;
      if (would_block) {
        // The socket is full: the server is not reading, most likely because
        // its own sends to us are blocked. Read while waiting to write.
        pollfd p{fd_, POLLIN | POLLOUT, 0};
        const int pr = ::poll(&p, 1, kStopCheckMs);
        if (pr < 0 && errno != EINTR) return fail(std::string("poll: ") + std::strerror(errno));
        if (pr <= 0 || !(p.revents & (POLLIN | POLLERR | POLLHUP))) continue;
        recv_flags = MSG_DONTWAIT;
      }

      // parse() leaves less than one frame behind, so there is always at least
      // kRecvChunk of room.
      const ssize_t r = ::recv(fd_, in_.data() + in_fill_, in_.size() - in_fill_, recv_flags);
      if (r == 0)
        return fail("server closed the connection after " + std::to_string(res_.responses) +
                    " of " + std::to_string(total) + " responses");
      if (r < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return fail(std::string("recv: ") + std::strerror(errno) + " after " +
                    std::to_string(res_.responses) + " of " + std::to_string(total) + " responses");
      }
      in_fill_ += std::size_t(r);

      std::uint64_t k = 0;
      if (!parse(&k)) return;
      if (k == 0) continue;
      // One clock read per batch: every response in it arrived by this recv.
      const std::uint64_t now = now_ns();
      for (std::uint64_t i = 0; i < k; ++i)
        res_.latency.record(now - sent_at_[(res_.responses + i) % plan_.window]);
      res_.responses += k;
      res_.last_recv_ns = now;
      progress_.done.store(res_.responses, std::memory_order_relaxed);
      queue(std::min(k, total - queued_), now);
    }
    res_.ok = true;
  }

  // Validates every complete frame in the input buffer; *k receives how many
  // were good responses. Keeps a trailing partial frame. False on any error.
  bool parse(std::uint64_t* k) {
    const std::uint8_t* p = in_.data();
    std::size_t avail = in_fill_;
    const std::size_t expected_size = plan_.expected.size();
    const std::uint64_t outstanding = queued_ - res_.responses;
    while (avail >= wire::kHeaderSize) {
      const wire::Header h = wire::decode_header(p);
      if (h.msg_id == static_cast<std::uint32_t>(wire::MsgId::FerryError)) {
        if (h.wire_size < wire::kRequestOverhead || h.wire_size > kMaxErrorFrame) {
          fail("malformed ferry_error frame (wire_size " + std::to_string(h.wire_size) + ")");
          return false;
        }
        if (avail < h.wire_size) break;
        const std::uint32_t code = wire::load_be32(p + wire::kHeaderSize);
        std::string name = wire::to_string(static_cast<wire::ErrorCode>(code));
        if (name == "unknown") name = "unknown(" + std::to_string(code) + ")";
        fail("server error " + name + ": " +
             std::string(reinterpret_cast<const char*>(p + wire::kRequestOverhead),
                         h.wire_size - wire::kRequestOverhead));
        return false;
      }
      // DOCA's server answers with id 4 and defines 5: accept both.
      if (h.msg_id != static_cast<std::uint32_t>(wire::MsgId::ClientRequest) &&
          h.msg_id != static_cast<std::uint32_t>(wire::MsgId::ClientResponse)) {
        fail("unexpected msg_id " + std::to_string(h.msg_id) + " (" +
             wire::to_string(static_cast<wire::MsgId>(h.msg_id)) + ") in response " +
             std::to_string(res_.responses + *k));
        return false;
      }
      if (h.wire_size != expected_size) {
        fail("response " + std::to_string(res_.responses + *k) + ": expected " +
             std::to_string(expected_size - wire::kRequestOverhead) + " payload bytes (wire_size " +
             std::to_string(expected_size) + "), received wire_size " +
             std::to_string(h.wire_size));
        return false;
      }
      if (avail < expected_size) break;
      if (*k >= outstanding) {
        fail("received a response to a request that was never sent (response " +
             std::to_string(res_.responses + *k) + ")");
        return false;
      }
      // Length prefix and payload must be the expected bytes exactly.
      if (std::memcmp(p + wire::kHeaderSize, plan_.expected.data() + wire::kHeaderSize,
                      expected_size - wire::kHeaderSize) != 0) {
        const std::uint32_t len = wire::load_be32(p + wire::kHeaderSize);
        const std::size_t n = expected_size - wire::kRequestOverhead;
        fail("response " + std::to_string(res_.responses + *k) + " does not match: expected " +
             std::to_string(n) + " bytes \"" +
             printable(plan_.expected.data() + wire::kRequestOverhead, n) + "\", received " +
             std::to_string(len) + " bytes \"" + printable(p + wire::kRequestOverhead, n) + "\"");
        return false;
      }
      ++*k;
      p += expected_size;
      avail -= expected_size;
    }
    // Keep the partial frame at the front; with small frames this moves a few bytes.
    if (avail > 0 && p != in_.data()) std::memmove(in_.data(), p, avail);
    in_fill_ = avail;
    return true;
  }

  const Plan& plan_;
  Shared& shared_;
  ProgressCounter& progress_;
  ThreadResult& res_;
  int fd_ = -1;
  std::vector<std::uint64_t> sent_at_;  // FIFO ring of send times, indexed by request number % window
  std::uint64_t queued_ = 0;            // requests handed to the send stream
  std::uint64_t send_pending_ = 0;      // bytes of those not yet written
  std::uint64_t stream_sent_ = 0;       // bytes written so far
  std::vector<std::uint8_t> in_;
  std::size_t in_fill_ = 0;
};

void validate(const ClientOptions& o) {
  if (o.thread_count < 1) throw Error("ClientOptions::thread_count must be at least 1");
  if (o.max_concurrent_messages < 1) throw Error("ClientOptions::max_concurrent_messages must be at least 1");
  if (o.iteration_count < 1) throw Error("ClientOptions::iteration_count must be at least 1");
  if (o.server_port == 0) throw Error("ClientOptions::server_port is required (a port from 1 to 65535)");
  if (o.message.size() > kMaxMessageBytes)
    throw Error("ClientOptions::message is " + std::to_string(o.message.size()) +
                " bytes; the client sends at most 64 MiB");
  if (o.expected_given && o.expected_response.size() > kMaxMessageBytes)
    throw Error("ClientOptions::expected_response is " + std::to_string(o.expected_response.size()) +
                " bytes; at most 64 MiB");
  in_addr a{};
  const std::string ip = o.server_ip == "localhost" ? "127.0.0.1" : o.server_ip;
  if (inet_pton(AF_INET, ip.c_str(), &a) != 1)
    throw Error("ClientOptions::server_ip '" + o.server_ip + "' is not an IPv4 address");
  if (o.connect_timeout_s < 0) throw Error("ClientOptions::connect_timeout_s must not be negative");
}

Plan make_plan(const ClientOptions& o) {
  Plan plan;
  plan.ip = o.server_ip;
  plan.port = o.server_port;
  plan.iterations = o.iteration_count;
  plan.window = o.max_concurrent_messages;
  plan.connect_timeout_s = o.connect_timeout_s;

  const auto len = static_cast<std::uint32_t>(o.message.size());
  plan.frame_size = static_cast<std::uint32_t>(wire::kRequestOverhead + len);
  // Enough frames for a whole window where that stays small (so a batch is one
  // send), at least one frame; larger batches are sent from it in turns.
  const std::uint64_t fit = std::max<std::uint64_t>(1, kSendBufferTarget / plan.frame_size);
  plan.frames_in_buffer =
      static_cast<std::uint32_t>(std::min<std::uint64_t>({plan.window, fit, plan.iterations}));
  plan.frames.resize(std::size_t(plan.frames_in_buffer) * plan.frame_size);
  for (std::uint32_t i = 0; i < plan.frames_in_buffer; ++i) {
    std::uint8_t* f = plan.frames.data() + std::size_t(i) * plan.frame_size;
    wire::encode_data_prefix(f, len, wire::MsgId::ClientRequest);
    std::memcpy(f + wire::kRequestOverhead, o.message.data(), len);
  }

  std::string expect = o.expected_given ? o.expected_response : o.message;
  if (!o.expected_given) std::reverse(expect.begin(), expect.end());
  plan.expected.resize(wire::kRequestOverhead + expect.size());
  wire::encode_data_prefix(plan.expected.data(), static_cast<std::uint32_t>(expect.size()),
                           wire::MsgId::ClientRequest);
  std::memcpy(plan.expected.data() + wire::kRequestOverhead, expect.data(), expect.size());

  // Room for at least one whole response (or error frame) plus a recv chunk.
  plan.recv_capacity = std::max(plan.expected.size(), kMaxErrorFrame) + kRecvChunk;
  return plan;
}

// Prints "[client] 12.3% 1234567 ops 456.7 kop/s" every interval until `done`;
// nothing for runs shorter than one interval.
class ProgressReporter {
 public:
  ProgressReporter(double interval_s, std::uint64_t total, const std::vector<ProgressCounter>& c)
      : interval_(interval_s), total_(total), counters_(c) {
    if (interval_s > 0) thread_ = std::thread([this] { run(); });
  }
  ~ProgressReporter() { stop(); }

  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::uint64_t last_ops = 0;
    auto last_t = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      if (cv_.wait_for(lk, interval_, [this] { return done_; })) return;
      std::uint64_t ops = 0;
      for (const auto& c : counters_) ops += c.done.load(std::memory_order_relaxed);
      const auto t = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(t - last_t).count();
      std::fprintf(stderr, "[client] %.1f%% %llu ops %.1f kop/s\n",
                   100.0 * double(ops) / double(total_), static_cast<unsigned long long>(ops),
                   dt > 0 ? double(ops - last_ops) / dt / 1e3 : 0.0);
      last_ops = ops;
      last_t = t;
    }
  }

  std::chrono::duration<double> interval_;
  std::uint64_t total_;
  const std::vector<ProgressCounter>& counters_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

ClientReport run_client(const ClientOptions& opts) {
  validate(opts);
  const Plan plan = make_plan(opts);
  const std::uint32_t n = opts.thread_count;

  Shared shared(n);
  std::vector<ProgressCounter> progress(n);
  std::vector<std::unique_ptr<ThreadResult>> results;
  for (std::uint32_t i = 0; i < n; ++i) results.push_back(std::make_unique<ThreadResult>());

  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      Connection c(plan, shared, progress[i], *results[i]);
      c.run();
    });
  }
  {
    // The run starts when every connection is up; waiting for the server is not
    // part of it, so progress lines start counting from here.
    shared.connected.wait();
    ProgressReporter reporter(opts.progress_interval_s, std::uint64_t(n) * plan.iterations,
                              progress);
    for (auto& t : threads) t.join();
  }

  ClientReport report;
  report.threads = n;
  report.window = plan.window;
  report.message_bytes = opts.message.size();
  for (std::uint32_t i = 0; i < n; ++i) {
    const ThreadResult& r = *results[i];
    if (!r.ok && !r.aborted) report.failures.push_back("client thread " + std::to_string(i) + " failed: " + r.error);
  }
  // A thread that only stopped because another failed can leave no cause of its
  // own; the run still failed.
  if (report.failures.empty() &&
      std::any_of(results.begin(), results.end(), [](const auto& r) { return !r->ok; }))
    report.failures.push_back("a client thread stopped without a cause");
  if (!report.ok()) return report;

  LatencyHistogram latency;
  std::uint64_t start = ~std::uint64_t{0};
  std::uint64_t end = 0;
  for (const auto& r : results) {
    latency.merge(r->latency);
    start = std::min(start, r->first_send_ns);
    end = std::max(end, r->last_recv_ns);
    report.operations += r->responses;
  }
  report.duration_s = end > start ? double(end - start) / 1e9 : 0.0;
  report.tx_bytes = report.operations * opts.message.size();
  report.rx_bytes = report.operations * (plan.expected.size() - wire::kRequestOverhead);
  const double us = 1e3;
  report.latency_us = {double(latency.percentile_ns(50)) / us, double(latency.percentile_ns(99)) / us,
                       double(latency.percentile_ns(99.9)) / us, double(latency.max_ns()) / us,
                       latency.mean_ns() / us};
  return report;
}

}  // namespace ferry::offload
