#include "xfer/agent/session.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/unix_socket.h"
#include "ferry/core/status.h"
#include "xfer/agent/job_results.h"
#include "xfer/agent/owner_fd.h"
#include "xfer/wire/messages.h"

namespace ferry::xfer::agent {
namespace {

// How much one readiness event may read before the loop turns to other
// sessions (epoll is level-triggered: the rest is read on the next turn).
constexpr std::size_t kReadBudget = 8u << 20;

// What a transfer holds in the agent while it runs, beyond its frame: a
// descriptor and a result each, and the result's strings.
constexpr std::size_t kHeldPerDescriptor = sizeof(JobDesc) + sizeof(DescResult) + 64;

std::string mib(std::size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

}  // namespace

// A frame arrives in pieces on a non-blocking socket: its header, then its body.
struct Session::Reader {
  std::uint8_t header[proto::kFrameHeader] = {};
  std::size_t header_got = 0;
  proto::Frame frame;
  std::size_t body_got = 0;
  bool in_body = false;
  Clock::time_point started{};  // when the frame's first byte came

  bool idle() const noexcept { return header_got == 0 && !in_body; }
  void reset() {
    header_got = 0;
    body_got = 0;
    in_body = false;
    frame = proto::Frame{};
  }
  ~Reader() {
    if (frame.fd >= 0) ::close(frame.fd);
  }
};

Session::Session(int fd, std::uint64_t id, const PeerCredentials& peer, bool tcp, AgentContext& ctx)
    : fd_(fd),
      id_(id),
      peer_(peer),
      tcp_(tcp),
      ctx_(ctx),
      name_("session " + std::to_string(id) + " (uid " + std::to_string(peer.uid) + ")"),
      ns_(ctx.shared_namespace ? "" : "u" + std::to_string(peer.uid) + "/"),
      connected_(Clock::now()),
      reader_(std::make_unique<Reader>()) {
  ctx_.metrics.session_opened();
}

Session::~Session() {
  close();
  ctx_.metrics.session_closed();
}

void Session::close() noexcept {
  std::lock_guard lk(out_mu_);
  if (closed_) return;
  closed_ = true;
  ::close(fd_);
  out_.clear();
  out_bytes_ = 0;
}

std::size_t Session::held_bytes() const noexcept {
  return in_flight_bytes_.load(std::memory_order_relaxed) + out_bytes_;
}

void Session::cut_off(const std::string& why) {
  if (cut_off_.empty()) cut_off_ = why;
}

bool Session::post(std::string frame) {
  bool queued = false;
  {
    std::lock_guard lk(out_mu_);
    if (closed_ || !cut_off_.empty()) return false;
    std::size_t sent = 0;
    if (out_.empty()) {  // nothing ahead of it: try the socket now, as a blocking send would
      const ssize_t n = ::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(frame.size())) return true;
      if (n > 0) {
        sent = static_cast<std::size_t>(n);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        cut_off(std::string("its socket failed: ") + std::strerror(errno));
      }
      out_since_ = Clock::now();
    }
    if (cut_off_.empty()) {
      out_bytes_ += frame.size();
      out_.push_back(std::move(frame));
      out_offset_ += sent;  // only non-zero when the queue was empty
      queued = true;
      if (held_bytes() > ctx_.limits.max_bytes)
        cut_off("it holds " + mib(held_bytes()) + " of unread replies and requests in flight, over " +
                "AgentServiceOptions::max_session_mib " + mib(ctx_.limits.max_bytes) +
                " (an application that does not read its replies)");
    }
  }
  ctx_.waker->wake(id_);  // the loop waits for the socket to drain, or closes a cut-off session
  return queued;
}

bool Session::flush(bool* more) {
  std::lock_guard lk(out_mu_);
  *more = false;
  if (closed_) return false;
  if (!cut_off_.empty()) {
    ctx_.cut_off.fetch_add(1, std::memory_order_relaxed);
    log::app().warn("{}: cut off: {}", name_, cut_off_);
    return false;
  }
  while (!out_.empty()) {
    const std::string& f = out_.front();
    const ssize_t n = ::send(fd_, f.data() + out_offset_, f.size() - out_offset_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *more = true;
        return true;
      }
      log::app().info("{}: disconnected while replies were queued ({})", name_, std::strerror(errno));
      return false;
    }
    out_since_ = Clock::now();
    out_offset_ += static_cast<std::size_t>(n);
    if (out_offset_ == f.size()) {
      out_bytes_ -= f.size();
      out_offset_ = 0;
      out_.pop_front();
    }
  }
  return true;
}

bool Session::on_tick(Clock::time_point now) {
  collect_registers(now);
  if (!greeted_ && now - connected_ > ctx_.limits.hello) {
    log::app().warn("{}: no hello within {} ms of connecting; closed", name_, ctx_.limits.hello.count());
    return false;
  }
  if (!reader_->idle() && now - reader_->started > ctx_.limits.stall) {
    log::app().warn("{}: began a frame and sent no more of it for {} ms; closed", name_,
                     ctx_.limits.stall.count());
    return false;
  }
  std::lock_guard lk(out_mu_);
  if (!out_.empty() && now - out_since_ > ctx_.limits.stall) {
    ctx_.cut_off.fetch_add(1, std::memory_order_relaxed);
    log::app().warn("{}: cut off: read none of its {} of queued replies for {} ms", name_, mib(out_bytes_),
                    ctx_.limits.stall.count());
    return false;
  }
  return true;
}

bool Session::on_readable() {
  Reader& r = *reader_;
  std::size_t budget = kReadBudget;
  try {
    while (budget > 0) {
      std::uint8_t* dst;
      std::size_t want;
      if (!r.in_body) {
        dst = r.header + r.header_got;
        want = proto::kFrameHeader - r.header_got;
      } else {
        dst = reinterpret_cast<std::uint8_t*>(r.frame.body.data()) + r.body_got;
        want = r.frame.body.size() - r.body_got;
      }
      // One descriptor per frame: extra ones are closed.
      const long n = unix_socket::receive(fd_, dst, std::min(want, budget), MSG_DONTWAIT, &r.frame.fd);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        log::app().info("{}: connection lost ({})", name_, std::strerror(errno));
        return false;
      }
      if (n == 0) {
        if (!r.idle()) log::app().warn("{}: disconnected in the middle of a frame", name_);
        else log::app().info("{} disconnected", name_);
        return false;
      }
      if (r.idle()) r.started = Clock::now();
      budget -= static_cast<std::size_t>(n);
      if (!r.in_body) {
        r.header_got += static_cast<std::size_t>(n);
        if (r.header_got < proto::kFrameHeader) continue;
        r.frame.body.resize(proto::check_frame_header(r.header, &r.frame.type));
        r.in_body = true;
      } else {
        r.body_got += static_cast<std::size_t>(n);
      }
      if (r.body_got < r.frame.body.size()) continue;
      proto::Frame f = std::move(r.frame);
      r.reset();
      if (!handle(f)) return false;
    }
  } catch (const std::exception& e) {
    ctx_.bad_requests.fetch_add(1, std::memory_order_relaxed);
    log::app().error("{}: {}; closing this session (others go on)", name_, e.what());
    return false;
  }
  return true;
}

bool Session::handle(proto::Frame& f) {
  // Only a register may bring a descriptor; any other is closed at once.
  const int fd = std::exchange(f.fd, -1);
  if (fd >= 0 && (f.type != proto::Type::Register || !greeted_)) ::close(fd);
  if (!greeted_) return on_hello(f);
  switch (f.type) {
    case proto::Type::Register: on_register(f, fd); return true;
    case proto::Type::Transfer: on_transfer(f); return true;
    case proto::Type::Deregister:
    case proto::Type::List:
    case proto::Type::Remove:
    case proto::Type::Exists:
    case proto::Type::Stats: on_call(f); return true;
    default: throw Error(std::string("unexpected ") + proto::to_string(f.type) + " from an application");
  }
}

void Session::reply_error(std::uint64_t call, XferStatus status, const std::string& message) {
  proto::CallReply r;
  r.call = call;
  r.status = status;
  r.text = message;
  post(proto::encode(proto::Type::CallError, r));
}

bool Session::on_hello(const proto::Frame& f) {
  proto::Hello hello;
  if (f.type != proto::Type::Hello || !proto::decode(f.body, &hello)) {
    log::app().error("{}: the peer did not start with a ferry agent hello (not a ferry application?)", name_);
    reply_error(0, XferStatus::ProtocolError, "expected hello");
    return false;
  }
  if (hello.version != proto::kVersion) {
    log::app().error("{}: protocol version {} (this agent speaks {})", name_, hello.version, proto::kVersion);
    reply_error(0, XferStatus::ProtocolError,
                "protocol version " + std::to_string(hello.version) + " is not " + std::to_string(proto::kVersion) +
                    ": update the application's ferry library or the agent");
    return false;
  }
  greeted_ = true;
  name_ = "'" + log::printable(hello.app, 64) + "' (session " + std::to_string(id_) + ", uid " +
          std::to_string(peer_.uid) + ")";
  log::app().info("{} connected", name_);
  proto::HelloOk ok{id_, static_cast<std::uint32_t>(getpid()), ctx_.backends, ctx_.tiers};
  return post(proto::encode(ok));
}

void Session::on_register(const proto::Frame& f, int fd) {
  proto::RegisterMsg msg;
  if (!proto::decode(f.body, &msg)) {
    if (fd >= 0) ::close(fd);
    throw Error("malformed register");
  }
  try {
    if (regions_.size() + pending_registers_.size() >= ctx_.limits.max_regions) {
      if (fd >= 0) ::close(fd);
      fd = -1;
      throw Error(
          "this session has " + std::to_string(regions_.size() + pending_registers_.size()) +
          " regions registered, the agent's limit (AgentServiceOptions::max_regions): deregister some first");
    }
    const bool takes_fd = msg.reach == proto::Reach::Memfd || msg.reach == proto::Reach::SharedFile;
    if (takes_fd && tcp_) {
      if (fd >= 0) ::close(fd);
      fd = take_owner_fd(static_cast<pid_t>(msg.owner_pid), msg.owner_fd, peer_.uid);
    } else if (takes_fd && fd < 0) {
      throw Error("register: shared memory must come with its descriptor (SCM_RIGHTS); the agent opens no paths");
    }
    // Another process's plain memory is only ever the connected application's
    // own: its pid from the kernel (Unix), or named by it and checked to run
    // as the connection's uid (TCP).
    const pid_t owner = tcp_ ? static_cast<pid_t>(msg.owner_pid) : peer_.pid;
    const bool gpu_here = ctx_.gpu_here;
    const uid_t uid = peer_.uid;
    if (msg.reach != proto::Reach::ProcessMemory && msg.reach != proto::Reach::SharedFile) {
      // A sealed memfd is mapped without touching a page, and CUDA IPC is the driver's.
      registered(msg.call, ImportedRegion::open(msg, std::exchange(fd, -1), gpu_here, owner, uid), {});
      return;
    }
    // Probing the application's pages or file may wait on them: off the loop.
    if (pending_registers_.size() >= ctx_.limits.max_pending_registers)
      throw Error("register: " + std::to_string(pending_registers_.size()) +
                  " registrations of this session are still waiting on its memory; wait for their answers");
    auto shared_fd = std::make_shared<int>(std::exchange(fd, -1));  // closed by the open, or by whoever drops it
    auto ticket = ctx_.opener.start(
        [msg, shared_fd, gpu_here, owner, uid] {
          return ImportedRegion::open(msg, std::exchange(*shared_fd, -1), gpu_here, owner, uid);
        },
        [waker = ctx_.waker, id = id_] { waker->wake(id); });
    if (!ticket) {
      if (*shared_fd >= 0) ::close(*shared_fd);
      throw Error("register: the agent is already waiting on " + std::to_string(ctx_.opener.out()) +
                  " registrations whose memory does not answer (its limit); try again later");
    }
    pending_registers_.push_back({msg.call, std::move(ticket), Clock::now() + ctx_.limits.memory_wait});
  } catch (const Error& e) {
    if (fd >= 0) ::close(fd);
    registered(msg.call, nullptr, e.what());
  }
}

void Session::registered(std::uint64_t call, std::shared_ptr<ImportedRegion> region, const std::string& error) {
  if (!region) {
    if (const long long held = warn_throttle_.pass(); held >= 0)
      log::app().warn("{}: registration refused: {}{}", name_, error, log::suppressed_note(held));
    reply_error(call, XferStatus::InvalidDesc, error);
    return;
  }
  const std::uint64_t id = ctx_.next_region.fetch_add(1);
  log::app().debug("{}: registered region {}: {}", name_, id, region->describe());
  regions_.emplace(id, std::move(region));
  post(proto::encode(proto::RegisterOk{call, id}));
}

void Session::collect_registers(Clock::time_point now) {
  std::erase_if(pending_registers_, [&](PendingRegister& p) {
    std::shared_ptr<ImportedRegion> region;
    std::string error;
    {
      std::lock_guard lk(p.ticket->mu);
      if (!p.ticket->done) {
        if (now < p.deadline) return false;
        // The thread goes on waiting, unanswered; whatever it opens is dropped.
        error = "register: the application's memory did not answer within " +
                std::to_string(ctx_.limits.memory_wait.count()) +
                " ms (pages behind a userfaultfd that serves no fault, or a hung FUSE or NFS mapping?)";
      } else {
        region = std::move(p.ticket->region);
        error = std::move(p.ticket->error);
      }
    }
    registered(p.call, std::move(region), error);
    return true;
  });
}

void Session::refuse_transfer(std::uint64_t request, std::size_t count, XferStatus status, const std::string& why) {
  proto::TransferDone done;
  done.request = request;
  done.status = status;
  // One result stands for every descriptor (the client repeats it), so that
  // refusing a request of 100,000 descriptors costs a short frame.
  done.results.assign(count == 0 ? 0 : 1, DescResult{status, 0, "", why});
  ctx_.refused_requests.fetch_add(1, std::memory_order_relaxed);
  ctx_.metrics.transfer_refused(status, count);
  if (const long long held = warn_throttle_.pass(); held >= 0)
    log::app().warn("{}: transfer {} refused: {}{}", name_, request, why, log::suppressed_note(held));
  post(proto::encode(done));
}

void Session::on_transfer(proto::Frame& f) {
  PhaseTimer decode_time(ctx_.mover->phases(), Phase::Decode);
  const Clock::time_point arrived = Clock::now();
  proto::TransferMsg msg;
  if (!proto::decode(f.body, &msg)) throw Error("malformed transfer");
  ctx_.transfers.fetch_add(1, std::memory_order_relaxed);
  ctx_.metrics.transfer_begun(msg.op);

  // What the job will hold until it answers: its keys (qualified by the
  // namespace), a descriptor and a result each, and its reply.
  std::size_t key_bytes = 0;
  for (const auto& d : msg.descs) key_bytes += ns_.size() + d.key.size();
  const std::size_t cost = key_bytes + msg.descs.size() * kHeldPerDescriptor;
  if (cost > ctx_.limits.max_bytes) {
    refuse_transfer(msg.request, msg.descs.size(), XferStatus::TooLarge,
                    "the request would hold " + mib(cost) +
                        " in the agent, over AgentServiceOptions::max_session_mib " +
                        mib(ctx_.limits.max_bytes) + ": split it");
    return;
  }
  const std::size_t held = [&] {
    std::lock_guard lk(out_mu_);
    return held_bytes();
  }();
  if (held + cost > ctx_.limits.max_bytes) {
    refuse_transfer(msg.request, msg.descs.size(), XferStatus::Unavailable,
                    "this session already holds " + mib(held) +
                        " of requests and unread replies in the agent; " + mib(cost) +
                        " more would pass AgentServiceOptions::max_session_mib " +
                        mib(ctx_.limits.max_bytes) + ": wait for transfers in flight to finish");
    return;
  }

  auto job = std::make_shared<Job>();
  job->op = msg.op;
  job->owner_lanes = ctx_.lanes_of(peer_.uid);
  // One buffer holds every qualified key, and the descriptors view it: no
  // allocation per key (a request may carry tens of thousands).
  job->wire.reserve(key_bytes);
  for (const auto& d : msg.descs) job->wire.append(ns_).append(d.key);
  job->descs.reserve(msg.descs.size());
  // Never trust the application's bounds: check each descriptor against what it
  // registered. One bad descriptor fails the request before any byte moves (as
  // NIXL refuses a request with an invalid descriptor).
  std::string invalid;
  std::size_t invalid_index = 0;
  std::size_t key_at = 0;
  auto it = regions_.end();  // consecutive descriptors usually name the same region
  for (std::size_t i = 0; i < msg.descs.size() && invalid.empty(); ++i) {
    const auto& d = msg.descs[i];
    const std::string_view key(job->wire.data() + key_at, ns_.size() + d.key.size());
    key_at += key.size();
    if (it == regions_.end() || it->first != d.region) it = regions_.find(d.region);
    if (it != regions_.end() && it->second->remote() != nullptr && it->second->remote()->gone()) {
      // Its process exited or ran another program: whatever now answers at
      // those addresses is not the memory that was registered.
      invalid = "region " + std::to_string(d.region) + " was dropped: " + it->second->remote()->gone_reason();
      log::app().warn("{}: dropped region {}: {}", name_, d.region, it->second->remote()->gone_reason());
      regions_.erase(it);
      it = regions_.end();
    } else if (it == regions_.end()) {
      invalid = "region " + std::to_string(d.region) + " is not registered";
    } else if (d.len == 0 || d.offset > it->second->len() || d.len > it->second->len() - d.offset) {
      invalid = std::to_string(d.len) + " bytes at offset " + std::to_string(d.offset) + " lie outside region " +
                std::to_string(d.region) + " (" + std::to_string(it->second->len()) + " bytes)";
    } else if (d.key.empty()) {
      invalid = "empty key";
    } else if (d.key.size() > ctx_.limits.max_key) {
      invalid = "a key of " + std::to_string(d.key.size()) + " bytes is longer than this agent's limit of " +
                std::to_string(ctx_.limits.max_key) + " bytes" + ctx_.limits.max_key_why;
    } else {
      job->descs.push_back({it->second, d.offset, d.len, key});
    }
    invalid_index = i;
  }
  if (!invalid.empty()) {
    proto::TransferDone done;
    done.request = msg.request;
    done.status = XferStatus::InvalidDesc;
    done.results.assign(msg.descs.size(), DescResult{XferStatus::Cancelled, 0, "",
                                                     "not run: descriptor " + std::to_string(invalid_index) +
                                                         " is invalid"});
    done.results[invalid_index] = {XferStatus::InvalidDesc, 0, "",
                                   "descriptor " + std::to_string(invalid_index) + ": " + invalid};
    ctx_.metrics.transfer_refused(XferStatus::InvalidDesc, 1);
    if (const long long held = warn_throttle_.pass(); held >= 0)
      log::app().warn("{}: transfer {} refused: descriptor {}: {}{}", name_, msg.request, invalid_index, invalid,
                      log::suppressed_note(held));
    post(proto::encode(done));
    return;
  }
  in_flight_bytes_.fetch_add(cost, std::memory_order_relaxed);
  std::weak_ptr<Session> self = weak_from_this();
  const std::uint64_t request = msg.request;
  DataMover* mover = ctx_.mover;
  const std::vector<std::string>* tier_names = &ctx_.tiers;
  AgentMetrics* metrics = &ctx_.metrics;
  job->on_done = [self, request, mover, cost, tier_names, metrics, arrived, ns = ns_](Job& j) {
    PhaseTimer answer_time(mover->phases(), Phase::Answer);
    metrics->transfer_done(
        j, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - arrived).count());
    describe_results(j, *tier_names, ns);
    proto::TransferDone done;
    done.request = request;
    done.status = XferStatus::Ok;
    for (const auto& r : j.results)
      if (is_error(r.status)) {
        done.status = r.status;
        break;
      }
    done.results = std::move(j.results);
    if (auto s = self.lock()) {
      s->in_flight_bytes_.fetch_sub(cost, std::memory_order_relaxed);
      if (done.status != XferStatus::Ok)
        for (const auto& r : done.results)
          if (is_error(r.status)) {
            if (const long long held = s->warn_throttle_.pass(); held >= 0)
              log::app().warn("{}: transfer {}: {} ({}){}", s->name(), request, log::printable(r.error, 512),
                              to_string(r.status), log::suppressed_note(held));
            break;
          }
      s->post(proto::encode(done));
    }
  };
  job->on_abandoned = [self, request, cost, metrics, count = msg.descs.size()](const std::string& why) {
    metrics->transfer_abandoned(count);
    proto::TransferDone done;
    done.request = request;
    done.status = XferStatus::IoError;
    // One result stands for every descriptor, as in refuse_transfer().
    done.results.assign(count == 0 ? 0 : 1, DescResult{XferStatus::IoError, 0, "", why});
    if (auto s = self.lock()) {
      s->in_flight_bytes_.fetch_sub(cost, std::memory_order_relaxed);
      s->post(proto::encode(done));
    }
  };
  decode_time.stop();
  ctx_.mover->submit(std::move(job));
}

void Session::on_call(const proto::Frame& f) {
  proto::CallMsg m;
  if (!proto::decode(f.type, f.body, &m)) throw Error(std::string("malformed ") + proto::to_string(f.type));
  proto::CallReply r;
  r.call = m.call;
  switch (f.type) {
    case proto::Type::Deregister:
      regions_.erase(m.region);  // jobs in flight keep their own reference
      return;
    case proto::Type::List: {
      // Pages in key order, so that a listing of any size arrives in frames of
      // bounded size: the cursor is the last key of the page before.
      const std::string prefix = ns_ + m.prefix;
      const std::string after = m.after.empty() ? std::string() : ns_ + m.after;
      std::vector<store::TierChain::Listed> found;
      Fault unlisted;  // a tier that cannot be listed (Redis down) is logged and left out
      for (auto& o : ctx_.chain->list(unlisted))
        if (o.key.compare(0, prefix.size(), prefix) == 0 && (after.empty() || o.key > after))
          found.push_back(std::move(o));
      const std::size_t page =
          m.limit == 0 ? ctx_.limits.list_page : std::min<std::size_t>(m.limit, ctx_.limits.list_page);
      const std::size_t n = std::min(page, found.size());
      std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(n), found.end(),
                        [](const auto& a, const auto& b) { return a.key < b.key; });
      for (std::size_t i = 0; i < n; ++i)
        r.objects.push_back({found[i].key.substr(ns_.size()), found[i].meta.size,
                             ctx_.tiers.at(static_cast<std::size_t>(found[i].tier))});
      if (n < found.size()) r.text = r.objects.back().key;
      post(proto::encode(proto::Type::ListReply, r));
      return;
    }
    case proto::Type::Remove:
      r.found.reserve(m.keys.size());
      for (const auto& k : m.keys) {
        Fault fault;  // a copy that stays (Redis down) is logged where it failed
        const bool removed = ctx_.chain->remove(ns_ + k, fault) == XferStatus::Ok;
        r.found.push_back(removed ? 1 : 0);
        r.count += removed;
      }
      post(proto::encode(proto::Type::RemoveReply, r));
      return;
    case proto::Type::Exists:
      // Where any tier holds the key: what an application asks before it pulls
      // a batch (LMCache's lookup), without listing the whole key space.
      r.found.reserve(m.keys.size());
      for (const auto& k : m.keys) {
        const bool there = ctx_.chain->stat(ns_ + k).has_value();
        r.found.push_back(there ? 1 : 0);
        r.count += there;
      }
      post(proto::encode(proto::Type::ExistsReply, r));
      return;
    case proto::Type::Stats:
      r.text = ctx_.stats_json();
      post(proto::encode(proto::Type::StatsReply, r));
      return;
    default: return;
  }
}

}  // namespace ferry::xfer::agent
