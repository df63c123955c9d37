#include "xfer/agent/session_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/wire/messages.h"

namespace ferry::xfer::agent {
namespace {

// epoll tags beside session ids (which count up from 1).
constexpr std::uint64_t kListenTag = ~0ull;
constexpr std::uint64_t kStopTag = ~0ull - 1;
constexpr std::uint64_t kWakeTag = ~0ull - 2;

void add(int epoll_fd, int fd, std::uint32_t events, std::uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl add");
}

log::Throttle& refusal_throttle() {
  static log::Throttle t;
  return t;
}

}  // namespace

SessionLoop::SessionLoop(AgentContext& ctx, int listen_fd, bool tcp, const LoopOptions& options)
    : ctx_(ctx), listen_fd_(listen_fd), tcp_(tcp), options_(options) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw_errno("epoll_create1");
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw_errno("eventfd");
  add(epoll_fd_, listen_fd_, EPOLLIN, kListenTag);
  add(epoll_fd_, wake_fd_, EPOLLIN, kWakeTag);
  ctx_.waker->attach([this](std::uint64_t id) {
    {
      std::lock_guard lk(wake_mu_);
      woken_.push_back(id);
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  });
}

SessionLoop::~SessionLoop() {
  ctx_.waker->detach();
  for (auto& [id, s] : sessions_) s->close();
  sessions_.clear();
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void SessionLoop::run(int stop_fd) {
  add(epoll_fd_, stop_fd, EPOLLIN, kStopTag);
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  epoll_event events[64];
  for (;;) {
    const auto now = Clock::now();
    int timeout = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now).count());
    if (!accepting_) timeout = std::min(timeout, accept_pause_.ms_left(now));
    const int n = epoll_wait(epoll_fd_, events, 64, std::max(timeout, 0));
    if (n < 0 && errno != EINTR) throw_errno("agent epoll_wait");
    for (int i = 0; i < n; ++i) {
      const std::uint64_t tag = events[i].data.u64;
      if (tag == kStopTag) {
        for (auto& [id, s] : sessions_) s->close();
        sessions_.clear();
        return;
      }
      if (tag == kListenTag) accept_all();
      else if (tag == kWakeTag) on_wake();
      else on_session(tag, events[i].events);
    }
    if (!accepting_ && !accept_pause_.paused(Clock::now())) {
      accepting_ = true;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenTag;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
    if (Clock::now() >= next_tick) {
      tick();
      next_tick = Clock::now() + std::chrono::seconds(1);
    }
  }
}

void SessionLoop::accept_all() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      admit(fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    // Out of descriptors (or memory): pause the listener (AcceptPause says why).
    const int err = errno;
    const auto pause = accept_pause_.on_failure(Clock::now());
    accepting_ = false;
    epoll_event ev{};
    ev.data.u64 = kListenTag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    static log::Throttle throttle;
    if (const long long held = throttle.pass(); held >= 0)
      log::app().error("cannot accept applications: {}; not accepting for {} ms, serving the {} connected{}",
                       std::strerror(err), pause.count(), sessions_.size(), log::suppressed_note(held));
    return;
  }
}

void SessionLoop::refuse(int fd, const std::string& why) {
  if (const long long held = refusal_throttle().pass(); held >= 0)
    log::app().warn("refused an application: {}{}", why, log::suppressed_note(held));
  proto::CallReply r;
  r.status = XferStatus::Unavailable;
  r.text = why;
  const std::string frame = proto::encode(proto::Type::CallError, r);
  (void)!::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

void SessionLoop::admit(int fd) {
  PeerCredentials peer;
  try {
    if (tcp_) {
      const auto uid = local_tcp_peer_uid(fd);
      if (!uid) {
        refuse(fd, "peer " + std::string("is not on the agent's host: the TCP endpoint serves local users only, "
                                         "whose uid the kernel can vouch for"));
        return;
      }
      peer.uid = *uid;
    } else {
      peer = unix_peer_credentials(fd);
    }
  } catch (const Error& e) {
    refuse(fd, std::string("cannot tell who the peer is: ") + e.what());
    return;
  }
  if (auto why = options_.peers.refusal(peer)) {
    refuse(fd, *why);
    return;
  }
  if (sessions_.size() >= options_.max_sessions) {
    refuse(fd, "the agent serves " + std::to_string(sessions_.size()) +
                   " sessions, its AgentServiceOptions::max_sessions: try later");
    return;
  }
  const std::uint64_t id = next_session_++;
  auto s = std::make_shared<Session>(fd, id, peer, tcp_, ctx_);
  try {
    add(epoll_fd_, fd, EPOLLIN | EPOLLRDHUP, id);
  } catch (const Error& e) {
    log::app().error("cannot watch a new session: {}", e.what());
    return;  // s closes the socket
  }
  sessions_.emplace(id, std::move(s));
  accept_pause_.on_success();
}

void SessionLoop::want_write(Session& s, bool on) {
  bool& watching = writing_[s.id()];
  if (watching == on) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
  ev.data.u64 = s.id();
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, s.fd(), &ev);
  watching = on;
}

void SessionLoop::on_wake() {
  std::uint64_t count;
  [[maybe_unused]] auto n = ::read(wake_fd_, &count, sizeof(count));
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard lk(wake_mu_);
    ids.swap(woken_);
  }
  for (std::uint64_t id : ids) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) continue;
    it->second->collect_registers(Clock::now());
    bool more = false;
    if (!it->second->flush(&more)) close_session(id);
    else want_write(*it->second, more);
  }
}

void SessionLoop::on_session(std::uint64_t id, std::uint32_t events) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  Session& s = *it->second;
  if (events & EPOLLOUT) {
    bool more = false;
    if (!s.flush(&more)) return close_session(id);
    want_write(s, more);
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    if (!s.on_readable()) return close_session(id);
    // Replies posted while handling (call answers) went out at once or wait
    // for the socket; a cut-off session closes here.
    bool more = false;
    if (!s.flush(&more)) return close_session(id);
    want_write(s, more);
  }
}

void SessionLoop::close_session(std::uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd(), nullptr);
  it->second->close();
  sessions_.erase(it);
  writing_.erase(id);
}

void SessionLoop::tick() {
  const auto now = Clock::now();
  std::vector<std::uint64_t> stalled;
  for (auto& [id, s] : sessions_)
    if (!s->on_tick(now)) stalled.push_back(id);
  for (std::uint64_t id : stalled) close_session(id);
}

}  // namespace ferry::xfer::agent
