#pragma once
// The agent's front door: one thread and one epoll set serve every session.
// It accepts a peer only if the kernel vouches for its uid (SO_PEERCRED on the
// Unix endpoint, the socket table for loopback TCP) and the policy lets that uid
// in, and only while fewer than max_sessions are connected; anyone else gets a
// call_error naming the reason and is closed. Nothing on this thread blocks:
// replies that the socket cannot take wait in their session's queue. Out of file
// descriptors, it stops accepting for a while instead of spinning, and keeps
// serving the sessions it has.

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/accept_pause.h"
#include "ferry/core/peer_policy.h"
#include "xfer/agent/session.h"

namespace ferry::xfer::agent {

struct LoopOptions {
  PeerPolicy peers;
  std::size_t max_sessions = 256;
};

class SessionLoop {
 public:
  // Serves applications on `listen_fd` (taken over; `tcp` says which kind). Sets
  // ctx.wake. Throws ferry::Error when epoll or an eventfd cannot be made.
  SessionLoop(AgentContext& ctx, int listen_fd, bool tcp, const LoopOptions& options);
  ~SessionLoop();
  SessionLoop(const SessionLoop&) = delete;
  SessionLoop& operator=(const SessionLoop&) = delete;

  // Serves until `stop_fd` becomes readable (a signalfd), then closes every
  // session. Throws ferry::Error only if epoll itself fails.
  void run(int stop_fd);
  std::size_t sessions() const noexcept { return sessions_.size(); }

 private:
  void accept_all();
  void admit(int fd);
  void refuse(int fd, const std::string& why);
  void on_wake();
  void on_session(std::uint64_t id, std::uint32_t events);
  void close_session(std::uint64_t id);
  void want_write(Session& s, bool on);
  void tick();

  AgentContext& ctx_;
  const int listen_fd_;
  const bool tcp_;
  LoopOptions options_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::unordered_map<std::uint64_t, std::shared_ptr<Session>> sessions_;
  std::unordered_map<std::uint64_t, bool> writing_;  // sessions watched for EPOLLOUT
  std::uint64_t next_session_ = 1;
  // Out of descriptors: the listener is off while accept_pause_ says so.
  bool accepting_ = true;
  AcceptPause accept_pause_;

  std::mutex wake_mu_;
  std::vector<std::uint64_t> woken_;  // sessions another thread asked the loop to look at
};

}  // namespace ferry::xfer::agent
