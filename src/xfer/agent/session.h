#pragma once
// One application connected to the agent: its registrations, its transfers, and
// its replies. Sessions are served by one event loop (session_loop.h): the loop
// thread reads and handles requests; transfers run on the shared DataMover and
// answer through post(), from whichever copy thread finishes them. post() never
// blocks: a reply the socket cannot take now waits in the session's own queue,
// so one application that stops reading holds up nobody else, and it is cut off
// once its queue outgrows the session's limits (docs/security.md).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"
#include "ferry/core/peer_policy.h"
#include "ferry/xfer/agent.h"
#include "xfer/agent/agent_metrics.h"
#include "xfer/agent/mover.h"
#include "xfer/agent/region.h"
#include "xfer/agent/region_opener.h"
#include "xfer/store/tier_chain.h"
#include "xfer/wire/protocol.h"

namespace ferry::xfer::agent {

using Clock = std::chrono::steady_clock;

// What one session may hold and how long it may keep the agent waiting.
struct SessionLimits {
  // Requests in flight plus replies the application has not read yet.
  std::size_t max_bytes = 256u << 20;
  std::size_t max_regions = 1024;
  // A frame begun but not finished, or replies not read, for this long: cut off.
  std::chrono::milliseconds stall{30000};
  std::chrono::milliseconds hello{10000};  // from connect to the hello frame
  std::size_t list_page = 10000;           // objects per ListReply at most
  // The longest key an application may use, the same for every uid: what
  // every tier can store, less the longest namespace prefix the agent adds
  // ("u4294967295/"). The wire allows proto::kMaxKey.
  std::size_t max_key = proto::kMaxKey;
  std::string max_key_why;  // which tier sets max_key, for the refusal
  // How long a registration may wait on the application's memory or file
  // (region_opener.h), and how many of one session's may wait at once.
  std::chrono::milliseconds memory_wait{10000};
  std::size_t max_pending_registers = 4;
};

// What every session shares.
struct AgentContext {
  DataMover* mover = nullptr;
  store::TierChain* chain = nullptr;
  bool gpu_here = false;
  // One key space for every uid the agent lets in, instead of one per uid.
  bool shared_namespace = false;
  SessionLimits limits;
  std::vector<BackendInfo> backends;
  std::vector<std::string> tiers;
  std::atomic<std::uint64_t> next_region{1};
  std::atomic<std::uint64_t> transfers{0}, bad_requests{0}, refused_requests{0}, cut_off{0};
  AgentMetrics metrics;
  std::function<std::string()> stats_json;
  // Asks the loop to look at a session from another thread (flush or close
  // it, or take a registration that finished opening).
  std::shared_ptr<LoopWaker> waker = std::make_shared<LoopWaker>();
  // Opens regions that may wait on the application's memory, off the loop.
  RegionOpener opener{32};
  // Copy lanes busy with each uid's own memory (Job::owner_lanes).
  std::shared_ptr<std::atomic<int>> lanes_of(uid_t uid) {
    std::lock_guard lk(owners_mu);
    auto& lanes = owner_lanes[uid];
    if (!lanes) lanes = std::make_shared<std::atomic<int>>(0);
    return lanes;
  }
  std::mutex owners_mu;
  std::map<uid_t, std::shared_ptr<std::atomic<int>>> owner_lanes;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // Takes over `fd` (non-blocking). `tcp`: memory arrives by owner pid and fd.
  Session(int fd, std::uint64_t id, const PeerCredentials& peer, bool tcp, AgentContext& ctx);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::uint64_t id() const noexcept { return id_; }
  int fd() const noexcept { return fd_; }
  // "'app' (session 3, uid 1000)": set at hello, read by copy threads afterwards.
  const std::string& name() const noexcept { return name_; }

  // Loop thread. Reads what the socket holds and handles each whole frame.
  // False when the session must close (the reason is logged).
  bool on_readable();
  // Loop thread. Writes queued replies without blocking. False when the session
  // must close; *more is set while bytes remain (wait until writable).
  bool flush(bool* more);
  // Loop thread, about once a second. False once the session has stalled
  // beyond its limits (logged).
  bool on_tick(Clock::time_point now);
  // Loop thread. Answers the registrations that finished opening off the
  // loop, and refuses those whose wait passed its deadline.
  void collect_registers(Clock::time_point now);
  // Any thread. Queues one frame for the application and sends what the socket
  // takes at once. False when the session is closed or cut off (frame dropped).
  bool post(std::string frame);
  // Loop thread. Closes the socket; later posts are dropped, and transfers in
  // flight finish without an answer.
  void close() noexcept;

 private:
  struct Reader;  // the frame being received
  bool handle(proto::Frame& f);
  bool on_hello(const proto::Frame& f);
  void on_register(const proto::Frame& f, int fd);
  // A region opened (or not): answers the register call `call`.
  void registered(std::uint64_t call, std::shared_ptr<ImportedRegion> region, const std::string& error);
  void on_transfer(proto::Frame& f);  // takes f.body over
  void on_call(const proto::Frame& f);
  void reply_error(std::uint64_t call, XferStatus status, const std::string& message);
  void refuse_transfer(std::uint64_t request, std::size_t count, XferStatus status, const std::string& why);
  // Marks the session for closing from any thread; the loop closes it.
  void cut_off(const std::string& why);
  std::size_t held_bytes() const noexcept;

  int fd_;
  const std::uint64_t id_;
  const PeerCredentials peer_;
  const bool tcp_;
  AgentContext& ctx_;
  std::string name_;
  std::string ns_;  // this uid's key prefix ("u1000/"), empty with a shared namespace
  bool greeted_ = false;
  Clock::time_point connected_;
  std::unique_ptr<Reader> reader_;

  // Replies: written by any thread under out_mu_; the socket is closed under it too.
  mutable std::mutex out_mu_;
  std::deque<std::string> out_;
  std::size_t out_offset_ = 0;  // bytes of out_.front() already sent
  std::size_t out_bytes_ = 0;   // queued, including the sent part of the front
  Clock::time_point out_since_{};  // last time the queue made progress (or began)
  bool closed_ = false;
  std::string cut_off_;  // why the session is to be closed, once set

  std::atomic<std::size_t> in_flight_bytes_{0};
  // A session that keeps sending failing requests must not flood the log.
  log::Throttle warn_throttle_;
  std::map<std::uint64_t, std::shared_ptr<ImportedRegion>> regions_;  // loop thread only
  struct PendingRegister {
    std::uint64_t call;
    std::shared_ptr<RegionOpener::Ticket> ticket;
    Clock::time_point deadline;
  };
  std::vector<PendingRegister> pending_registers_;  // loop thread only
};

}  // namespace ferry::xfer::agent
