#include "offload/server_thread.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <utility>

#include "core/log.h"
#include "ferry/core/detail/backoff.h"
#include "core/net.h"
#include "ferry/core/status.h"

namespace ferry::offload {
namespace {

constexpr std::uint32_t kWakeMarker = 0xffffffffu;
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr auto kClosingTime = std::chrono::seconds(10);
constexpr std::uint32_t kPrefetchAhead = 4;
// A drained output buffer keeps this much committed (the heads of a few
// pipelined responses) and gives the rest of what it touched back.
constexpr std::size_t kKeptOutputBytes = 16 * 1024;
constexpr int kMaxIov = 16;  // pieces one sendmsg() gathers

// Sends n pieces without blocking. One piece (nothing by reference) goes by
// send(2), which spares the kernel the gathering list sendmsg(2) copies in and checks.
ssize_t send_pieces(int fd, iovec* iov, int n) noexcept {
  if (n == 1) return send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = static_cast<std::size_t>(n);
  return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

const std::size_t kPageBytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

std::size_t round_to_page(std::size_t n) { return (n + kPageBytes - 1) / kPageBytes * kPageBytes; }

// A connection's output buffer: address space reserved when the connection
// opens; the kernel commits a page only once it is written, and release()
// hands pages back once what they held is sent.
class OutputPages {
 public:
  OutputPages() = default;
  // data() is null when the kernel refuses the address space.
  explicit OutputPages(std::size_t capacity) : size_(round_to_page(capacity)) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(p);
  }
  ~OutputPages() { reset(); }
  OutputPages(OutputPages&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
  OutputPages& operator=(OutputPages&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = o.size_;
    }
    return *this;
  }
  std::uint8_t* data() const noexcept { return data_; }
  // [from, to), both multiples of the page size, reads as zeros afterwards.
  void release(std::size_t from, std::size_t to) noexcept {
    if (data_ != nullptr && to > from) (void)madvise(data_ + from, to - from, MADV_DONTNEED);
  }
  void reset() noexcept {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = nullptr;
  }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

std::int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::uint64_t make_cookie(std::uint32_t slot, std::uint32_t generation) {
  return (std::uint64_t(slot) << 32) | generation;
}

}  // namespace

struct ServerThread::Connection {
  int fd = -1;
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  std::uint32_t registered = 0;  // epoll events currently registered
  std::uint32_t in_flight = 0;
  bool open = false;
  bool paused = false;     // no credit: reading stopped until a response frees one
  bool dirty = false;      // has unsent output queued (listed in dirty_)
  bool closing = false;    // an error is queued or the last response said so: flush, then close
  bool discarding = false; // a response closed the connection: drop the ones after it
  bool lingering = false;  // write side shut: discard input until EOF or the deadline
  std::chrono::steady_clock::time_point close_deadline{};  // a closing client that never reads
  std::chrono::steady_clock::time_point linger_deadline{};
  std::chrono::steady_clock::time_point last_activity{};  // bytes read or written
  std::chrono::steady_clock::time_point partial_since{};  // input holds part of a request since then
  // When each request in flight was posted, by request number modulo the
  // window; responses come back in order, so answered counts the front.
  std::vector<std::int64_t> posted_at;
  std::uint64_t posted = 0;
  std::uint64_t answered = 0;
  std::int64_t unsent_since = 0;  // ns: output has waited to be sent since then; 0 while none
  std::string pending_error;  // sent once every in-flight response is out
  // Responses behind a deferred one (Framing::Deferred), in order: an entry
  // with a pending response waits for it; the others are ready to send. While
  // this is not empty every response goes through it, after `out`.
  struct Queued {
    std::shared_ptr<PendingResponse> pending;  // null once ready
    std::string bytes;
    ByteView body;  // sent after bytes, by reference (Framing::Written::body)
    std::size_t sent = 0;  // of bytes, then of body
  };
  std::deque<Queued> queue;
  std::size_t queued_bytes = 0;  // of the queue's entries' bytes, counted in held_output_
  std::vector<std::string> kept;  // what the framing kept of each request, by request number modulo the window
  std::string peer;
  std::unique_ptr<std::uint8_t[]> in;
  std::size_t in_len = 0;
  // The output: responses' copied bytes in out[out_head, out_tail), and the
  // bodies they send by reference, each after the copied bytes before its
  // `at`. A reference's `rest` is the connection's cursor into the framing's
  // memory (a page every connection shares).
  OutputPages out;
  std::size_t out_head = 0;
  std::size_t out_tail = 0;
  std::size_t out_touched = 0;  // bytes of out written since it was last given back, in pages
  struct Reference {
    std::size_t at = 0;
    ByteView rest;
  };
  std::vector<Reference> refs;  // a ring: one reference per response, so at most the window
  std::uint32_t ref_head = 0;
  std::uint32_t ref_count = 0;
  bool write_blocked = false;  // the socket took less than it was offered: read nothing until it drains

  std::size_t out_used() const { return out_tail - out_head; }
  Reference& ref(std::uint32_t i) { return refs[(ref_head + i) % refs.size()]; }
  const Reference& ref(std::uint32_t i) const { return refs[(ref_head + i) % refs.size()]; }

  // Room for n more output bytes at out_tail, compacting first if needed; null
  // when even a compacted buffer cannot take them (the caller then closes).
  std::uint8_t* reserve(std::size_t n, std::size_t capacity) {
    if (out_tail + n > capacity && out_head > 0) {
      std::memmove(out.data(), out.data() + out_head, out_used());
      for (std::uint32_t i = 0; i < ref_count; ++i) ref(i).at -= out_head;
      out_tail -= out_head;
      out_head = 0;
    }
    return out_tail + n <= capacity ? out.data() + out_tail : nullptr;
  }

  // Appends a body sent by reference after the copied bytes so far; false when
  // the ring is full (the credit rule makes that unreachable).
  bool add_reference(ByteView body) {
    if (body.size == 0) return true;
    if (ref_count == refs.size()) return false;
    refs[(ref_head + ref_count) % refs.size()] = {out_tail, body};
    ++ref_count;
    return true;
  }
};

struct ServerThread::Command {
  enum class Kind { Adopt, Bind, Drain };
  explicit Command(Kind k) : kind(k) {}
  Kind kind;
  int fd = -1;
  bool has_channel = false;
  Channel channel{};
  std::uint64_t generation = 0;
  std::string why;  // Bind: what unbinding tells the clients with requests in flight
};

void StageCounters::add(std::int64_t ns) noexcept {
  const double us = static_cast<double>(ns < 0 ? 0 : ns) / 1e3;
  std::size_t b = 0;
  while (us > StageLatency::kBoundsUs[b]) ++b;  // the last bound is beyond any value
  // One writer: a load and a store, no read-modify-write.
  counts_[b].store(counts_[b].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  sum_ns_.store(sum_ns_.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(ns < 0 ? 0 : ns),
                std::memory_order_relaxed);
}

void StageCounters::add_to(StageLatency& out) const noexcept {
  for (std::size_t b = 0; b < counts_.size(); ++b) out.counts[b] += counts_[b].load(std::memory_order_relaxed);
  out.sum_us += static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e3;
}

ServerThread::ServerThread(const ServerThreadConfig& config) : config_(config), framing_(*config.framing) {
  max_response_ = framing_.max_response_bytes();
  reply_slack_ = framing_.max_reply_bytes();
  // Keep a connection's output buffer near 1 MiB even for large messages; the
  // window shrinks instead (documented in README "Limits").
  const auto by_memory = static_cast<std::uint32_t>(std::max<std::size_t>(1, (std::size_t{1} << 20) / max_response_));
  conn_window_ = std::min(config.max_concurrent_messages, by_memory);
  out_capacity_ = std::size_t(conn_window_) * max_response_ + reply_slack_;
  in_capacity_ = std::max<std::size_t>(16 * 1024, 2 * framing_.max_request_bytes());
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw_errno("epoll_create1");
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw_errno("eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = kWakeMarker;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) throw_errno("epoll_ctl wake fd");
  mailbox_ = std::make_shared<DeferredMailbox>(wake_fd_);
}

ServerThread::~ServerThread() {
  stop();
  for (auto& c : connections_)
    if (c && c->open) ::close(c->fd);
  {
    std::lock_guard lock(commands_mutex_);
    for (auto& cmd : commands_)
      if (cmd.kind == Command::Kind::Adopt) ::close(cmd.fd);
  }
  mailbox_->close();  // completions from other threads stop touching wake_fd_
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void ServerThread::start() {
  running_.store(true);
  thread_ = std::thread([this] { run(); });
}

void ServerThread::stop() {
  if (!thread_.joinable()) return;
  running_.store(false);
  wake();
  thread_.join();
  for (auto& c : connections_)
    if (c && c->open) close_connection(*c, nullptr);
}

void ServerThread::wake() {
  const std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void ServerThread::post(const Command& cmd) {
  {
    std::lock_guard lock(commands_mutex_);
    commands_.push_back(cmd);
  }
  // Pairs with run()'s acquire before process_commands().
  has_commands_.store(true, std::memory_order_release);
  wake();
}

void ServerThread::adopt(int fd) {
  stats_.clients.fetch_add(1, std::memory_order_relaxed);  // counted now so the acceptor balances
  Command cmd(Command::Kind::Adopt);
  cmd.fd = fd;
  post(cmd);
}

void ServerThread::bind(const Channel* channel, std::uint64_t generation, const std::string& why) {
  Command cmd(Command::Kind::Bind);
  cmd.has_channel = channel != nullptr;
  if (channel != nullptr) cmd.channel = *channel;
  cmd.generation = generation;
  cmd.why = why;
  post(cmd);
  // Wait for the thread to switch: the caller may unmap the old arena after this.
  while (running_.load() && bound_generation_.load(std::memory_order_acquire) != generation)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void ServerThread::begin_drain() { post(Command(Command::Kind::Drain)); }

void ServerThread::process_commands() {
  std::vector<Command> cmds;
  {
    std::lock_guard lock(commands_mutex_);
    cmds.swap(commands_);
    has_commands_.store(false, std::memory_order_relaxed);
  }
  for (auto& cmd : cmds) {
    switch (cmd.kind) {
      case Command::Kind::Adopt:
        open_connection(cmd.fd);
        break;
      case Command::Kind::Bind:
        if (bound_) fail_in_flight(cmd.why);
        bound_ = cmd.has_channel;
        if (bound_) {
          requests_ = RingProducer(cmd.channel.requests);
          responses_ = RingConsumer(cmd.channel.responses);
        } else {
          requests_ = RingProducer();
          responses_ = RingConsumer();
        }
        channel_in_flight_ = 0;
        stats_.in_flight.store(0, std::memory_order_relaxed);
        note_unanswered_since({});
        // Pairs with bind()'s acquire: the old channel is no longer touched.
        bound_generation_.store(cmd.generation, std::memory_order_release);
        break;
      case Command::Kind::Drain:
        draining_ = true;
        for (auto& c : connections_)
          if (c && c->open) update_interest(*c);
        break;
    }
  }
}

std::uint32_t ServerThread::open_connection(int fd) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(connections_.size());
    connections_.push_back(std::make_unique<Connection>());
  }
  Connection& c = *connections_[slot];
  const std::uint32_t generation = c.generation + 1;
  c = Connection{};
  c.fd = fd;
  c.slot = slot;
  c.generation = generation;
  c.open = true;
  c.peer = net::peer_name(fd);
  c.last_activity = now_;
  // Default-initialised (not zeroed): the kernel commits pages only as they are used.
  c.in.reset(new std::uint8_t[in_capacity_]);
  c.out = OutputPages(out_capacity_);
  c.posted_at.assign(conn_window_, 0);
  c.kept.resize(conn_window_);
  c.refs.assign(conn_window_, {});
  if (c.out.data() == nullptr) {
    log::app().error("thread {}: no memory for client {}'s output buffer: {}", config_.index, c.peer,
                     std::strerror(errno));
    close_connection(c, nullptr);
    return slot;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = slot;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    log::app().error("thread {}: cannot watch client {}: {}", config_.index, c.peer, std::strerror(errno));
    close_connection(c, nullptr);
    return slot;
  }
  c.registered = EPOLLIN;
  log::app().debug("thread {}: client {} connected", config_.index, c.peer);
  if (draining_) update_interest(c);
  return slot;
}

void ServerThread::run() {
  if (config_.cpu >= 0) {
    try {
      net::pin_current_thread(config_.cpu);
    } catch (const Error& e) {
      log::sdk().warn("data-path thread {}: {}; running unpinned", config_.index, e.what());
    }
  }
  epoll_event events[256];
  // While requests are in flight the thread polls the response ring; the backoff
  // gives the core away when the workers are slow rather than spin against them.
  Backoff backoff(1000, 100, 20'000);
  auto last_linger_check = std::chrono::steady_clock::now();
  now_ = last_linger_check;
  while (running_.load(std::memory_order_relaxed)) {
    if (has_commands_.load(std::memory_order_acquire)) process_commands();
    // Polls rather than sleeps in epoll while responses are due from the
    // channel. Deferred ones wake the loop through the eventfd instead:
    // polling for them too saved a wake-up per request when idle but cost
    // throughput under load (docs/bench/inference.md).
    const bool polling = bound_ && channel_in_flight_ > 0;
    const int n = epoll_wait(epoll_fd_, events, 256, polling ? 0 : 50);
    now_ = std::chrono::steady_clock::now();  // what this round reads and posts is stamped with it
    bool progress = n > 0;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u32 == kWakeMarker) {
        std::uint64_t v;
        (void)!read(wake_fd_, &v, sizeof(v));
        continue;
      }
      handle_event(events[i].data.u32, events[i].events);
    }
    if (mailbox_->has_mail()) {
      take_deferred();
      progress = true;
    }
    std::uint32_t drained = 0;
    if (bound_ && channel_in_flight_ > 0) {
      drained = drain_responses();
      progress |= drained > 0;
    }
    flush_dirty();
    if (!paused_.empty()) resume_paused();

    if (now_ - last_linger_check > std::chrono::milliseconds(100)) {
      last_linger_check = now_;
      check_deadlines(now_);
    }
    if (progress) {
      backoff.reset();
    } else if (polling) {
      backoff.idle();
    }
  }
}

void ServerThread::handle_event(std::uint32_t slot, std::uint32_t events) {
  if (slot >= connections_.size()) return;
  Connection& c = *connections_[slot];
  if (!c.open) return;
  if (events & EPOLLERR) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    log::app().info("thread {}: client {} socket error: {}", config_.index, c.peer, std::strerror(err));
    close_connection(c, nullptr);
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP)) read_from(c);
  if (c.open && (events & EPOLLOUT)) flush(c);
}

void ServerThread::read_from(Connection& c) {
  while (c.open) {
    if (c.lingering) {
      // Discard what the client still sends after an error, so that closing does
      // not reset the connection before it has read the error response.
      std::uint8_t sink[4096];
      const ssize_t r = recv(c.fd, sink, sizeof(sink), 0);
      if (r > 0) continue;
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
      close_connection(c, nullptr);
      return;
    }
    if (c.closing || c.paused || c.write_blocked || draining_ || c.in_len == in_capacity_) return;
    const std::size_t room = in_capacity_ - c.in_len;
    const ssize_t r = recv(c.fd, c.in.get() + c.in_len, room, 0);
    if (r > 0) {
      if (c.in_len == 0) c.partial_since = now_;
      c.in_len += static_cast<std::size_t>(r);
      c.last_activity = now_;
      parse_requests(c);
      // Less than asked for: the socket was drained. Epoll is level-triggered,
      // so bytes that arrive later are reported again; another recv now would
      // mostly return EAGAIN, one system call a request for nothing.
      if (static_cast<std::size_t>(r) < room) return;
      continue;
    }
    if (r == 0) {
      if (c.in_len > 0)
        log::app().warn("thread {}: client {} disconnected mid-message ({} bytes of an incomplete request)",
                        config_.index, c.peer, c.in_len);
      if (c.in_flight == 0 && !has_output(c) && c.queue.empty()) {
        close_connection(c, nullptr);
        return;
      }
      // The client has only stopped sending (a half-close, as `nc -N` does):
      // its answers still go out, then the connection closes. A client that is
      // gone altogether makes the sends fail, which closes it then.
      log::app().debug("thread {}: client {} finished sending with {} request(s) in flight", config_.index, c.peer,
                       c.in_flight);
      c.closing = true;
      c.close_deadline = now_ + kClosingTime;
      c.in_len = 0;
      mark_dirty(c);
      update_interest(c);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    log::app().info("thread {}: client {} read error: {}", config_.index, c.peer, std::strerror(errno));
    close_connection(c, nullptr);
    return;
  }
}

bool ServerThread::can_post(const Connection& c) const {
  // A client that does not read its answers is sent no more until it has.
  if (c.write_blocked) return false;
  // Room for every in-flight response plus this one is reserved up front, so a
  // client that stops reading stalls only itself (its output buffer is bounded).
  // A reference names one response, so the window counts the unsent ones too.
  if (c.in_flight + c.ref_count + c.queue.size() >= conn_window_ ||
      channel_in_flight_ >= requests_.ring().capacity() ||
      c.out_used() + std::size_t(c.in_flight + 1) * max_response_ + reply_slack_ > out_capacity_)
    return false;
  // The thread's bound counts the room reserved for every response in flight.
  // A connection that owes nothing may always post one request: clients that
  // read their answers are served whatever the others hold.
  const bool owes_nothing = c.in_flight == 0 && !has_output(c) && c.queue.empty();
  return config_.max_held_output == 0 || owes_nothing ||
         held_output_ + std::size_t(channel_in_flight_ + 1) * max_response_ <= config_.max_held_output;
}

bool ServerThread::stream_pending(const Connection& c) { return c.out_used() > 0 || c.ref_count > 0; }

void ServerThread::note_written(Connection& c) {
  const std::size_t touched = round_to_page(c.out_tail);
  if (touched <= c.out_touched) return;
  held_output_ += touched - c.out_touched;
  c.out_touched = touched;
}

void ServerThread::rewind_output(Connection& c) {
  // Every reference left stands at out_head (none lies before it), so all move with it.
  for (std::uint32_t i = 0; i < c.ref_count; ++i) c.ref(i).at = 0;
  c.out_head = c.out_tail = 0;
  const std::size_t kept = round_to_page(kKeptOutputBytes);
  if (c.out_touched <= kept) return;
  c.out.release(kept, c.out_touched);
  held_output_ -= c.out_touched - kept;
  c.out_touched = kept;
}

void ServerThread::parse_requests(Connection& c) {
  std::size_t pos = 0;
  while (!c.closing && !draining_) {  // draining: requests already in flight finish, no new ones
    const std::uint8_t* p = c.in.get() + pos;
    const Framing::Scan scan = framing_.scan(p, c.in_len - pos);
    if (scan.result == Framing::Scan::Result::NeedMore) break;
    if (scan.result == Framing::Scan::Result::Reject) {
      Framing::Rejection r = framing_.reject(p, c.in_len - pos);
      stats_.refused[0].fetch_add(1, std::memory_order_relaxed);
      refuse(c, std::move(r.reply), r.why);
      pos = c.in_len;
      break;
    }
    if (!bound_) {
      refuse(c, Framing::Failure::NoWorkers, "no orchestrator is attached to the server");
      pos = c.in_len;
      break;
    }
    if (!can_post(c)) {
      pause(c);
      break;
    }
    const Status s = requests_.try_push({p + scan.payload_offset, scan.payload_size},
                                        make_cookie(c.slot, c.generation));
    if (s == Status::TooLarge) {  // the orchestrator's slots are smaller than the flags promised
      refuse(c, Framing::Failure::SlotTooSmall, "request does not fit the arena's slot size");
      pos = c.in_len;
      break;
    }
    if (s != Status::Ok) {  // the credit rule makes this unreachable; pause rather than fail
      pause(c);
      break;
    }
    ++c.in_flight;
    std::string& kept = c.kept[c.posted % conn_window_];
    if (scan.kept_size > 0) {
      kept.assign(reinterpret_cast<const char*>(p + scan.kept_offset), scan.kept_size);
    } else {
      kept.clear();
    }
    const std::int64_t now_ns = ns_of(now_);
    stats_.read.add(now_ns - ns_of(c.partial_since));
    c.posted_at[c.posted++ % conn_window_] = now_ns;
    if (channel_in_flight_++ == 0) note_unanswered_since(std::chrono::steady_clock::now());
    stats_.requests.fetch_add(1, std::memory_order_relaxed);
    stats_.request_bytes.fetch_add(scan.frame_bytes, std::memory_order_relaxed);
    pos += scan.frame_bytes;
  }
  if (pos > 0) {
    std::memmove(c.in.get(), c.in.get() + pos, c.in_len - pos);
    c.in_len -= pos;
    c.partial_since = now_;  // what is left begins the next request
  }
  // Always refreshed: a refusal can zero pos after requests were posted, and
  // Server::drain() waits on this count.
  stats_.in_flight.store(channel_in_flight_, std::memory_order_relaxed);
}

void ServerThread::pause(Connection& c) {
  if (c.paused) return;
  c.paused = true;
  paused_.push_back(c.slot);
  update_interest(c);
}

// Sends what the round queued. (Holding a connection's responses back to batch
// sends was tried and measured: it cost single-connection throughput and did
// not reliably help eight connections, so every round flushes.)
void ServerThread::flush_dirty() {
  for (std::uint32_t slot : dirty_) {
    Connection& c = *connections_[slot];
    c.dirty = false;
    if (c.open) flush(c);
  }
  dirty_.clear();
}

std::uint32_t ServerThread::drain_responses() {
  SlotMessage msg;
  std::uint32_t drained = 0;
  std::int64_t now_ns = 0;  // read once a round, when the first response is there
  while (responses_.try_peek(&msg)) {
    // The worker wrote these lines on another core (or the GPU by DMA): start
    // fetching the slots a few responses ahead while this one is copied out.
    const std::uint32_t ahead = responses_.next_index() + kPrefetchAhead;
    __builtin_prefetch(responses_.ring().desc(ahead));
    __builtin_prefetch(responses_.ring().data(ahead));
    const auto slot = static_cast<std::uint32_t>(msg.cookie >> 32);
    const auto generation = static_cast<std::uint32_t>(msg.cookie);
    Connection* c = slot < connections_.size() ? connections_[slot].get() : nullptr;
    if (now_ns == 0) now_ns = ns_of(std::chrono::steady_clock::now());
    if (c != nullptr && c->open && c->generation == generation && c->in_flight > 0 && c->discarding) {
      // Answered after a response that closed the connection: never sent.
      --c->in_flight;
      ++c->answered;
      stats_.dropped_responses.fetch_add(1, std::memory_order_relaxed);
      if (c->in_flight == 0) mark_dirty(*c);  // the flush that follows shuts it down
    } else if (c != nullptr && c->open && c->generation == generation && c->in_flight > 0) {
      --c->in_flight;
      // A response that waits behind a deferred one is written aside, then queued.
      const bool behind = !c->queue.empty();
      if (behind && scratch_.size() < max_response_) scratch_.resize(max_response_);
      // can_post() reserved room for this response when its request was posted.
      if (std::uint8_t* dst = behind ? scratch_.data() : c->reserve(max_response_, out_capacity_)) {
        // The framing may defer the response (an inference): it then waits in the queue.
        struct QueueDeferrer final : Framing::Deferrer {
          ServerThread* thread;
          Connection* conn;
          std::shared_ptr<Framing::Deferred> defer() override {
            auto p = std::make_shared<PendingResponse>(thread->mailbox_, conn->slot, conn->generation);
            conn->queue.push_back({p, {}, {}, 0});
            return p;
          }
        } deferrer;
        deferrer.thread = this;
        deferrer.conn = c;
        const std::size_t k = c->answered++ % conn_window_;
        const std::string& kept = c->kept[k];
        const Framing::Client client{c->peer, {reinterpret_cast<const std::uint8_t*>(kept.data()), kept.size()},
                                     c->posted_at[k], &deferrer};
        const Framing::Written w = framing_.write_response(msg.payload, dst, client);
        stats_.response_bytes.fetch_add(w.bytes + w.body.size, std::memory_order_relaxed);
        const std::int64_t in_channel = now_ns - c->posted_at[k];
        if (w.worker_ns != 0) {
          stats_.queue.add(in_channel - std::int64_t(w.worker_ns));
          stats_.handle.add(w.worker_ns);
        } else {
          stats_.queue.add(in_channel);
        }
        bool overrun = false;
        if (w.deferred) {
          // Its queue entry was made by defer(); it is sent once complete.
        } else if (behind) {
          enqueue_ready(*c, std::string(reinterpret_cast<const char*>(dst), w.bytes), w.body, w.close_after);
        } else {
          if (!stream_pending(*c)) c->unsent_since = now_ns;
          c->out_tail += w.bytes;
          note_written(*c);
          overrun = !c->add_reference(w.body);
          if (w.close_after) close_after_output(*c);
        }
        if (overrun) {
          log::app().error("thread {}: client {}: more responses than its window (a server bug); closing it",
                           config_.index, c->peer);
          close_connection(*c, nullptr);
        } else {
          if (c->in_flight == 0) queue_pending_error(*c);
          mark_dirty(*c);
        }
      } else {
        log::app().error("thread {}: client {}: output buffer overrun (a server bug); closing it", config_.index,
                         c->peer);
        close_connection(*c, nullptr);
      }
    } else {
      stats_.dropped_responses.fetch_add(1, std::memory_order_relaxed);
    }
    responses_.advance();
    --channel_in_flight_;
    ++drained;
  }
  if (drained > 0) {
    responses_.release();
    requests_.observe_consumed(responses_.next_index());  // response k frees request slot k
    note_unanswered_since(channel_in_flight_ > 0 ? std::chrono::steady_clock::now()
                                                 : std::chrono::steady_clock::time_point{});
    stats_.responses.fetch_add(drained, std::memory_order_relaxed);
    stats_.in_flight.store(channel_in_flight_, std::memory_order_relaxed);
  }
  return drained;
}

void ServerThread::resume_paused() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < paused_.size(); ++i) {
    Connection& c = *connections_[paused_[i]];
    if (!c.open || !c.paused) continue;
    if (!bound_ || can_post(c)) {
      c.paused = false;
      parse_requests(c);  // requests already buffered go first
      if (c.paused) continue;  // parse_requests re-queued it
      update_interest(c);
    } else {
      paused_[kept++] = paused_[i];
    }
  }
  paused_.resize(kept);
}

ssize_t ServerThread::send_stream(Connection& c) {
  // The copied bytes up to each reference, then the reference's rest, in order.
  iovec iov[kMaxIov];
  int n = 0;
  std::size_t pos = c.out_head;
  std::uint32_t i = 0;
  for (; i < c.ref_count && n + 2 <= kMaxIov; ++i) {
    const Connection::Reference& r = c.ref(i);
    if (r.at > pos) iov[n++] = {c.out.data() + pos, r.at - pos};
    pos = r.at;
    iov[n++] = {const_cast<std::uint8_t*>(r.rest.data), r.rest.size};
  }
  if (i == c.ref_count && c.out_tail > pos && n < kMaxIov) iov[n++] = {c.out.data() + pos, c.out_tail - pos};
  const ssize_t r = send_pieces(c.fd, iov, n);
  if (r <= 0) return r;
  // Consumes what went, piece by piece in the same order.
  for (std::size_t sent = static_cast<std::size_t>(r); sent > 0;) {
    Connection::Reference* front = c.ref_count > 0 ? &c.ref(0) : nullptr;
    if (front != nullptr && front->at == c.out_head) {
      const std::size_t k = std::min(sent, front->rest.size);
      front->rest.data += k;
      front->rest.size -= k;
      sent -= k;
      if (front->rest.size == 0) {
        c.ref_head = static_cast<std::uint32_t>((c.ref_head + 1) % c.refs.size());
        --c.ref_count;
      }
    } else {
      const std::size_t k = std::min(sent, (front != nullptr ? front->at : c.out_tail) - c.out_head);
      c.out_head += k;
      sent -= k;
    }
  }
  return r;
}

ssize_t ServerThread::send_queued(Connection& c) {
  Connection::Queued& q = c.queue.front();
  iovec iov[2];
  int n = 0;
  if (q.sent < q.bytes.size()) iov[n++] = {q.bytes.data() + q.sent, q.bytes.size() - q.sent};
  const std::size_t body_sent = q.sent > q.bytes.size() ? q.sent - q.bytes.size() : 0;
  if (body_sent < q.body.size) iov[n++] = {const_cast<std::uint8_t*>(q.body.data) + body_sent, q.body.size - body_sent};
  const ssize_t r = send_pieces(c.fd, iov, n);
  if (r <= 0) return r;
  q.sent += static_cast<std::size_t>(r);
  if (q.sent == q.bytes.size() + q.body.size) {
    held_output_ -= q.bytes.size();
    c.queued_bytes -= q.bytes.size();
    c.queue.pop_front();
  }
  return r;
}

void ServerThread::flush(Connection& c) {
  // First `out` with its references, then the queue's ready entries from its front.
  const bool was_blocked = c.write_blocked;
  c.write_blocked = false;
  while (has_output(c)) {
    const ssize_t r = stream_pending(c) ? send_stream(c) : send_queued(c);
    if (r > 0) {
      c.last_activity = now_;
      // A closing connection that is still being read is not stuck: a large
      // last response may take longer than the deadline to go out.
      if (c.closing) c.close_deadline = now_ + kClosingTime;
      if (c.out_used() == 0 && c.out_tail != 0) rewind_output(c);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c.write_blocked = true;
      break;
    }
    log::app().info("thread {}: client {} went away before reading its responses: {}", config_.index,
                    c.peer, r < 0 ? std::strerror(errno) : "closed");
    close_connection(c, nullptr);
    return;
  }
  // Reading resumes: a request begun before it stopped gets the read timeout afresh.
  if (was_blocked && !c.write_blocked && c.in_len > 0) c.partial_since = now_;
  if (!stream_pending(c)) {
    if (c.unsent_since != 0) {
      stats_.write.add(ns_of(std::chrono::steady_clock::now()) - c.unsent_since);
      c.unsent_since = 0;
    }
    rewind_output(c);
    if (c.closing && c.in_flight == 0 && c.queue.empty() && c.pending_error.empty() && !c.lingering) {
      shutdown(c.fd, SHUT_WR);
      c.lingering = true;
      c.linger_deadline = std::chrono::steady_clock::now() + kLingerTime;
    }
  }
  update_interest(c);
}

void ServerThread::update_interest(Connection& c) {
  if (!c.open) return;
  std::uint32_t want = 0;
  if (c.lingering || (!c.closing && !c.paused && !c.write_blocked && !draining_)) want |= EPOLLIN;
  if (has_output(c)) want |= EPOLLOUT;
  if (want == c.registered) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u32 = c.slot;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.registered = want;
}

void ServerThread::refuse(Connection& c, Framing::Failure failure, const std::string& why) {
  stats_.refused[refusal_index(failure)].fetch_add(1, std::memory_order_relaxed);
  refuse(c, framing_.failure_reply(failure, why), why);
}

void ServerThread::refuse(Connection& c, std::string reply, const std::string& why) {
  stats_.protocol_errors.fetch_add(1, std::memory_order_relaxed);
  if (const long long held = warn_throttle_.pass(); held >= 0)
    log::app().warn("thread {}: client {}: {}; answering and closing{}", config_.index, c.peer, why,
                    log::suppressed_note(held));
  c.closing = true;
  c.close_deadline = std::chrono::steady_clock::now() + kClosingTime;
  c.in_len = 0;
  c.pending_error = std::move(reply);
  if (c.in_flight == 0) queue_pending_error(c);
  mark_dirty(c);
  update_interest(c);
}

void ServerThread::close_after_output(Connection& c) {
  c.closing = true;
  c.discarding = true;
  c.pending_error.clear();  // nothing may follow a response that ends the connection
  c.close_deadline = std::chrono::steady_clock::now() + kClosingTime;
  c.in_len = 0;
  update_interest(c);
}

void ServerThread::queue_pending_error(Connection& c) {
  if (c.pending_error.empty()) return;
  // The slack kept beyond the responses' reservation holds one reply; a longer
  // one is cut rather than overrun the buffer.
  const std::size_t n = std::min(c.pending_error.size(), reply_slack_);
  if (!c.queue.empty()) {  // after the responses that wait behind a deferred one
    c.pending_error.resize(n);
    enqueue_ready(c, std::move(c.pending_error), {}, false);
  } else if (std::uint8_t* dst = c.reserve(n, out_capacity_)) {
    std::memcpy(dst, c.pending_error.data(), n);
    c.out_tail += n;
    note_written(c);
  }
  c.pending_error.clear();
}

void ServerThread::mark_dirty(Connection& c) {
  if (c.dirty) return;
  c.dirty = true;
  dirty_.push_back(c.slot);
}

void ServerThread::check_deadlines(std::chrono::steady_clock::time_point now) {
  const bool reads = config_.read_timeout.count() > 0;
  const bool idles = config_.idle_timeout.count() > 0;
  for (auto& cp : connections_) {
    if (!cp || !cp->open) continue;
    Connection& c = *cp;
    if (c.lingering) {
      if (now > c.linger_deadline) close_connection(c, nullptr);
    } else if (c.closing) {
      if (now > c.close_deadline) close_connection(c, "its error response was not read within 10 s");
    } else if (reads && c.in_len > 0 && !c.paused && !c.write_blocked &&
               now - c.partial_since > config_.read_timeout) {
      // Paused connections are excluded: their request is whole, waiting for
      // credit. So are those the server stops reading while their output waits.
      refuse(c, Framing::Failure::ReadTimeout, "request not complete within the read timeout");
    } else if (idles && c.in_len == 0 && c.in_flight == 0 && c.queue.empty() && !stream_pending(c) &&
               now - c.last_activity > config_.idle_timeout) {
      log::app().debug("thread {}: closing idle client {}", config_.index, c.peer);
      close_connection(c, nullptr);
    } else if (idles && has_output(c) && now - c.last_activity > config_.idle_timeout) {
      // Responses waiting for a client that reads none of them, as long as an idle one would be kept.
      close_connection(c, "it read none of its responses within the idle timeout");
    }
  }
}

void ServerThread::note_unanswered_since(std::chrono::steady_clock::time_point t) {
  // Read by the server's control thread to time out a frozen orchestrator; a
  // relaxed store suffices, the value is only compared against a clock.
  stats_.unanswered_since_ns.store(t.time_since_epoch().count(), std::memory_order_relaxed);
}

std::chrono::nanoseconds ServerThread::unanswered_for(std::chrono::steady_clock::time_point now) const {
  const std::int64_t since = stats_.unanswered_since_ns.load(std::memory_order_relaxed);
  if (since == 0) return std::chrono::nanoseconds(0);
  return now - std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since));
}

void ServerThread::fail_in_flight(const std::string& why) {
  for (auto& cp : connections_) {
    if (!cp || !cp->open || cp->in_flight == 0) continue;
    Connection& c = *cp;
    const std::uint32_t lost = c.in_flight;
    c.in_flight = 0;  // their responses will never come
    c.answered = c.posted;
    if (c.discarding) {  // they would have been dropped anyway
      mark_dirty(c);
      continue;
    }
    refuse(c, Framing::Failure::WorkersLost, why + " (" + std::to_string(lost) + " of this client's requests)");
  }
  channel_in_flight_ = 0;
  note_unanswered_since({});
}

void ServerThread::close_connection(Connection& c, const char* why) {
  if (!c.open) return;
  if (why != nullptr) log::app().info("thread {}: closing client {}: {}", config_.index, c.peer, why);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  c.open = false;
  c.fd = -1;
  c.in.reset();
  c.out.reset();
  held_output_ -= c.out_touched + c.queued_bytes;
  c.out_touched = c.queued_bytes = 0;
  for (auto& q : c.queue)
    if (q.pending) q.pending->abandon();  // its work may be skipped
  c.queue.clear();
  c.kept.clear();
  c.refs.clear();
  c.ref_count = 0;
  c.write_blocked = false;
  c.in_len = c.out_head = c.out_tail = 0;
  // Responses still in the channel for this connection carry the old generation
  // and are dropped when they arrive; the slot may be reused at once.
  free_slots_.push_back(c.slot);
  stats_.clients.fetch_sub(1, std::memory_order_relaxed);
}

bool ServerThread::has_output(const Connection& c) const {
  return stream_pending(c) || (!c.queue.empty() && !c.queue.front().pending);
}

void ServerThread::enqueue_ready(Connection& c, std::string bytes, ByteView body, bool close_after) {
  held_output_ += bytes.size();
  c.queued_bytes += bytes.size();
  c.queue.push_back({nullptr, std::move(bytes), body, 0});
  if (close_after) close_after_output(c);
}

void ServerThread::take_deferred() {
  for (DeferredMailbox::Done& done : mailbox_->take()) {
    const PendingResponse& p = *done.pending;
    Connection* c = p.slot() < connections_.size() ? connections_[p.slot()].get() : nullptr;
    if (c == nullptr || !c->open || c->generation != p.generation()) continue;  // the client went away
    auto it = std::find_if(c->queue.begin(), c->queue.end(),
                           [&](const Connection::Queued& q) { return q.pending == done.pending; });
    if (it == c->queue.end()) continue;  // dropped after a response that closed the connection
    Framing::Response r;
    try {
      r = done.build();
    } catch (const std::exception& e) {
      log::app().error("thread {}: client {}: building a deferred response failed: {}; closing it", config_.index,
                       c->peer, e.what());
      close_connection(*c, nullptr);
      continue;
    }
    it->pending.reset();
    it->bytes = std::move(r.bytes);
    held_output_ += it->bytes.size();
    c->queued_bytes += it->bytes.size();
    if (r.close_after) {
      // Nothing after it is sent: drop what waits behind it.
      for (auto later = std::next(it); later != c->queue.end(); ++later) {
        if (later->pending) later->pending->abandon();
        held_output_ -= later->bytes.size();
        c->queued_bytes -= later->bytes.size();
      }
      c->queue.erase(std::next(it), c->queue.end());
      close_after_output(*c);
    }
    mark_dirty(*c);
  }
}

}  // namespace ferry::offload
