// The application's side of the agent protocol (ferry/xfer/agent.h). One socket
// to the agent; a reader thread receives replies and completions, so post() never
// blocks on the agent and completions arrive without polling.

#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "ferry/core/status.h"
#include "ferry/xfer/agent.h"
#include "xfer/wire/messages.h"

namespace ferry::xfer {
namespace {

// A set-up call (register, list ...) that gets no answer in this time means the
// agent is wedged: say so instead of hanging the application.
constexpr auto kCallTimeout = std::chrono::seconds(60);

struct RequestState {
  XferOp op = XferOp::Write;
  std::size_t count = 0;  // descriptors
  // The transfer message, encoded once by create_xfer_req (NIXL's prep): a post,
  // and every re-post of the same request, only sends it. Shared, so that a
  // post sends it outside the lock while a release may drop the request.
  std::shared_ptr<const std::string> frame;
  std::string notif_msg;
  bool posted = false;
  XferStatus status = XferStatus::InProgress;
  std::vector<DescResult> results;
};

std::string fmt_hex(std::uint64_t v) {
  std::ostringstream o;
  o << std::hex << v;
  return o.str();
}

struct HostBuffer {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  int memfd = -1;
};

}  // namespace

struct Agent::Impl {
  proto::Endpoint endpoint;
  proto::FrameSocket sock;
  std::mutex send_mu;  // one frame at a time on the socket
  // One registration at a time: the agent answers a bounded number of a
  // session's registrations at once and refuses the rest, so callers on
  // several threads (a NIXL agent's, say) queue here instead of failing.
  std::mutex register_mu;
  std::thread reader;

  std::mutex mu;
  std::condition_variable cv;
  bool dead = false;
  std::string dead_reason;
  std::uint64_t next_call = 1;
  std::uint64_t next_request = 1;
  std::map<std::uint64_t, proto::Frame> replies;
  std::unordered_map<XferReq, RequestState> requests;
  std::vector<MemRegion> regions;
  std::vector<HostBuffer> host_buffers;
  std::deque<Notification> notifs;
  int event_fd = -1;

  std::vector<BackendInfo> backends;
  std::vector<std::string> tiers;
  std::uint32_t agent_pid = 0;

  void read_loop();
  void fail_all(const std::string& reason);
  proto::Frame call(std::uint64_t call_id, const std::string& frame, int pass_fd = -1);
  std::uint64_t new_call_id() {
    std::lock_guard lk(mu);
    return next_call++;
  }
  MemRegion finish_register(proto::RegisterMsg& msg, int pass_fd, std::uint64_t addr);
  const MemRegion* find_region(std::uint64_t addr, std::uint64_t len) const;
};

void Agent::Impl::fail_all(const std::string& reason) {
  std::lock_guard lk(mu);
  dead = true;
  dead_reason = reason;
  for (auto& [id, r] : requests) {
    if (r.posted && r.status == XferStatus::InProgress) {
      r.status = XferStatus::Unavailable;
      r.results.assign(r.count, DescResult{XferStatus::Unavailable, 0, "", "the agent went away: " + reason});
      notifs.push_back({id, r.notif_msg, r.status});
    }
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd, &one, sizeof(one));
  cv.notify_all();
}

void Agent::Impl::read_loop() {
  try {
    for (;;) {
      auto f = sock.recv();
      if (!f) {
        fail_all("the agent closed the connection");
        return;
      }
      if (f->fd >= 0) ::close(f->fd);  // the agent never sends descriptors
      if (f->type == proto::Type::TransferDone) {
        proto::TransferDone done;
        if (!proto::decode(f->body, &done)) throw Error("malformed transfer_done from the agent");
        std::lock_guard lk(mu);
        auto it = requests.find(done.request);
        if (it == requests.end()) continue;  // released while in flight
        it->second.status = done.status;
        it->second.results = std::move(done.results);
        // A request refused as a whole comes back with one result for all.
        if (it->second.results.size() == 1 && it->second.count > 1)
          it->second.results.assign(it->second.count, it->second.results[0]);
        it->second.results.resize(it->second.count);
        notifs.push_back({done.request, it->second.notif_msg, done.status});
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(event_fd, &one, sizeof(one));
        cv.notify_all();
        continue;
      }
      // Every other frame answers a call: its first field is the call id.
      proto::Decoder d(f->body);
      const std::uint64_t call_id = d.u64();
      if (d.failed()) throw Error(std::string("malformed ") + proto::to_string(f->type) + " from the agent");
      std::lock_guard lk(mu);
      replies.emplace(call_id, std::move(*f));
      cv.notify_all();
    }
  } catch (const std::exception& e) {
    fail_all(e.what());
  }
}

proto::Frame Agent::Impl::call(std::uint64_t call_id, const std::string& frame, int pass_fd) {
  {
    std::lock_guard lk(mu);
    if (dead) throw Error("the ferry agent at " + endpoint.to_string() + " is gone: " + dead_reason);
  }
  {
    std::lock_guard lk(send_mu);
    if (!sock.send(frame, pass_fd)) throw Error("the ferry agent at " + endpoint.to_string() + " went away");
  }
  std::unique_lock lk(mu);
  if (!cv.wait_for(lk, kCallTimeout, [&] { return dead || replies.count(call_id) != 0; }))
    throw Error("the ferry agent did not answer within 60 s");
  auto it = replies.find(call_id);
  if (it == replies.end()) throw Error("the ferry agent at " + endpoint.to_string() + " is gone: " + dead_reason);
  proto::Frame f = std::move(it->second);
  replies.erase(it);
  if (f.type == proto::Type::CallError) {
    proto::CallReply err;
    if (!proto::decode(f.type, f.body, &err)) throw Error("malformed call_error from the agent");
    throw Error("ferry agent: " + err.text);
  }
  return f;
}

Agent::Agent(const AgentConfig& config) : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = proto::Endpoint::parse(config.endpoint);
  impl_->sock = proto::connect_to(impl_->endpoint, config.connect_timeout_ms);
  impl_->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl_->event_fd < 0) throw_errno("eventfd");
  // The handshake runs before the reader thread exists, so it reads directly.
  // A refused peer may find the socket closed before its hello goes out; the
  // agent's reason is waiting to be read all the same.
  (void)impl_->sock.send(proto::encode(proto::Hello{proto::kVersion, config.name}));
  auto f = impl_->sock.recv();
  if (!f) throw Error("the ferry agent closed the connection during the handshake");
  if (f->type == proto::Type::CallError) {
    proto::CallReply err;
    throw Error("ferry agent refused the connection: " +
                (proto::decode(f->type, f->body, &err) ? err.text : std::string("(malformed reason)")));
  }
  proto::HelloOk ok;
  if (f->type != proto::Type::HelloOk || !proto::decode(f->body, &ok))
    throw Error("the peer at " + config.endpoint + " does not speak the ferry agent protocol");
  impl_->backends = std::move(ok.backends);
  impl_->tiers = std::move(ok.tiers);
  impl_->agent_pid = ok.agent_pid;
  impl_->reader = std::thread([this] { impl_->read_loop(); });
}

Agent::~Agent() {
  impl_->sock.shutdown();
  if (impl_->reader.joinable()) impl_->reader.join();
  if (impl_->event_fd >= 0) ::close(impl_->event_fd);
}

const std::vector<BackendInfo>& Agent::backends() const { return impl_->backends; }
const std::vector<std::string>& Agent::tiers() const { return impl_->tiers; }

MemRegion Agent::Impl::finish_register(proto::RegisterMsg& msg, int pass_fd, std::uint64_t addr) {
  std::lock_guard one_at_a_time(register_mu);
  msg.call = new_call_id();
  proto::Frame f = call(msg.call, proto::encode(msg), pass_fd);
  proto::RegisterOk ok;
  if (f.type != proto::Type::RegisterOk || !proto::decode(f.body, &ok))
    throw Error("unexpected reply to register from the agent");
  MemRegion r{ok.region, msg.type, addr, msg.len, msg.dev_id};
  std::lock_guard lk(mu);
  regions.push_back(r);
  return r;
}

MemRegion Agent::register_memory(const Buffer& buffer) {
  if (buffer.data() == nullptr) throw Error("register_memory: an empty Buffer");
  if (buffer.on_gpu()) return register_memory(buffer.type(), buffer.data(), buffer.size(), buffer.device());
  {
    std::lock_guard lk(impl_->mu);
    impl_->host_buffers.push_back(
        {reinterpret_cast<std::uint64_t>(buffer.data()), buffer.size(), buffer.memfd()});
  }
  return register_memory(buffer.type(), buffer.data(), buffer.size(), buffer.device());
}

MemRegion Agent::register_memory(MemType type, const void* addr, std::uint64_t len, std::uint32_t dev_id) {
  if (type != MemType::Dram && type != MemType::Vram)
    throw Error(std::string("register_memory: ") + to_string(type) +
                " is storage: name objects by key in create_xfer_req instead");
  if (addr == nullptr || len == 0) throw Error("register_memory: empty range");
  const auto a = reinterpret_cast<std::uint64_t>(addr);
  proto::RegisterMsg msg;
  msg.type = type;
  msg.dev_id = dev_id;
  msg.len = len;
  if (type == MemType::Vram && vram_is_gpu()) {
    const gpu::IpcExport e = gpu::export_ipc(addr);
    if (len > e.alloc_size - e.offset)
      throw Error("register_memory: " + std::to_string(len) + " bytes from this address run past its allocation");
    msg.reach = proto::Reach::CudaIpc;
    msg.offset = e.offset;
    msg.dev_id = static_cast<std::uint32_t>(e.device);
    std::memcpy(msg.ipc_handle, e.handle, sizeof(msg.ipc_handle));
    return impl_->finish_register(msg, -1, a);
  }
  // Host memory (Dram, or Vram emulated): the agent maps the Buffer's memfd.
  HostBuffer hb;
  {
    std::lock_guard lk(impl_->mu);
    for (const auto& b : impl_->host_buffers)
      if (a >= b.addr && len <= b.len && a - b.addr <= b.len - len) hb = b;
  }
  // Memory Ferry did not allocate (a NumPy array, a framework's pinned pool):
  // the agent reaches it in this process by cross-memory attach, which the
  // kernel allows once this process names the agent as its ptracer (Yama's
  // ptrace_scope 1; without Yama, the same uid suffices).
  if (hb.memfd < 0) {
    msg.reach = proto::Reach::ProcessMemory;
    msg.offset = a;
    if (impl_->endpoint.tcp) msg.owner_pid = static_cast<std::uint32_t>(getpid());
    if (impl_->agent_pid != 0) (void)prctl(PR_SET_PTRACER, static_cast<unsigned long>(impl_->agent_pid), 0, 0, 0);
    return impl_->finish_register(msg, -1, a);
  }
  msg.reach = proto::Reach::Memfd;
  msg.offset = a - hb.addr;
  if (impl_->endpoint.tcp) {
    // No descriptor passing over TCP: the agent takes the memfd from this
    // process (pidfd_getfd) once it has checked that we run as the uid that
    // owns the connection. Yama's ptrace_scope 1 lets only a process we name do that.
    msg.owner_pid = static_cast<std::uint32_t>(getpid());
    msg.owner_fd = hb.memfd;
    if (impl_->agent_pid != 0) (void)prctl(PR_SET_PTRACER, static_cast<unsigned long>(impl_->agent_pid), 0, 0, 0);
    return impl_->finish_register(msg, -1, a);
  }
  return impl_->finish_register(msg, hb.memfd, a);
}

MemRegion Agent::register_shared_file(const void* addr, std::uint64_t len, int fd, std::uint64_t file_offset) {
  if (addr == nullptr || len == 0) throw Error("register_shared_file: empty range");
  if (fd < 0) throw Error("register_shared_file: no file descriptor");
  proto::RegisterMsg msg;
  msg.type = MemType::Dram;
  msg.len = len;
  msg.reach = proto::Reach::SharedFile;
  msg.offset = file_offset;
  const auto a = reinterpret_cast<std::uint64_t>(addr);
  msg.addr = a;  // pulls write here by cross-memory attach, where allowed
  if (impl_->agent_pid != 0) (void)prctl(PR_SET_PTRACER, static_cast<unsigned long>(impl_->agent_pid), 0, 0, 0);
  if (impl_->endpoint.tcp) {
    // As for a memfd over TCP: the agent takes the descriptor from this process.
    msg.owner_pid = static_cast<std::uint32_t>(getpid());
    msg.owner_fd = fd;
    return impl_->finish_register(msg, -1, a);
  }
  return impl_->finish_register(msg, fd, a);
}

void Agent::deregister_memory(const MemRegion& region) {
  proto::CallMsg m;
  m.region = region.id;
  {
    std::lock_guard lk(impl_->mu);
    std::erase_if(impl_->regions, [&](const MemRegion& r) { return r.id == region.id; });
  }
  std::lock_guard lk(impl_->send_mu);
  (void)impl_->sock.send(proto::encode(proto::Type::Deregister, m));  // no reply; a dead agent forgot it anyway
}

const MemRegion* Agent::Impl::find_region(std::uint64_t addr, std::uint64_t len) const {
  for (const auto& r : regions)
    if (addr >= r.addr && len <= r.len && addr - r.addr <= r.len - len) return &r;
  return nullptr;
}

XferReq Agent::create_xfer_req(XferOp op, std::span<const MemDesc> local, std::span<const std::string> keys,
                               std::string notif_msg) {
  if (local.size() != keys.size())
    throw Error("create_xfer_req: " + std::to_string(local.size()) + " memory descriptors but " +
                std::to_string(keys.size()) + " keys");
  if (local.empty()) throw Error("create_xfer_req: no descriptors");
  RequestState st;
  st.op = op;
  st.count = local.size();
  st.notif_msg = std::move(notif_msg);
  proto::TransferMsg m;
  m.op = op;
  m.descs.reserve(local.size());
  std::unique_lock lk(impl_->mu);  // the regions and the request ids
  for (std::size_t i = 0; i < local.size(); ++i) {
    const MemDesc& d = local[i];
    const MemRegion* r = impl_->find_region(d.addr, d.len);
    if (r == nullptr)
      throw Error("create_xfer_req: descriptor " + std::to_string(i) + " (" + std::to_string(d.len) +
                  " bytes at 0x" + fmt_hex(d.addr) + ") lies outside every registered region");
    if (d.len == 0) throw Error("create_xfer_req: descriptor " + std::to_string(i) + " is empty");
    if (keys[i].empty() || keys[i].size() > proto::kMaxKey)
      throw Error("create_xfer_req: key " + std::to_string(i) + " must be 1 to " + std::to_string(proto::kMaxKey) +
                  " bytes");
    m.descs.push_back({r->id, d.addr - r->addr, d.len, keys[i]});
  }
  const XferReq id = impl_->next_request++;
  lk.unlock();  // encoding thousands of descriptors must not hold up the reader's completions
  m.request = id;
  st.frame = std::make_shared<const std::string>(proto::encode(m));
  lk.lock();
  impl_->requests.emplace(id, std::move(st));
  return id;
}

XferStatus Agent::post(XferReq req) {
  std::shared_ptr<const std::string> frame;
  {
    std::lock_guard lk(impl_->mu);
    auto it = impl_->requests.find(req);
    if (it == impl_->requests.end()) return XferStatus::InvalidDesc;
    RequestState& st = it->second;
    if (st.posted && st.status == XferStatus::InProgress) return XferStatus::InProgress;  // NIXL: no double post
    if (impl_->dead) return XferStatus::Unavailable;
    st.posted = true;
    st.status = XferStatus::InProgress;
    st.results.clear();
    frame = st.frame;
  }
  std::lock_guard lk(impl_->send_mu);
  if (!impl_->sock.send(*frame)) {
    // The reader thread sees the closed socket and fails every posted request,
    // this one included, with the agent's reason.
    return XferStatus::Unavailable;
  }
  return XferStatus::InProgress;
}

XferStatus Agent::status(XferReq req) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->requests.find(req);
  if (it == impl_->requests.end()) return XferStatus::InvalidDesc;
  return it->second.status;
}

XferStatus Agent::wait(XferReq req, int timeout_ms) {
  std::unique_lock lk(impl_->mu);
  const auto done = [&] {
    auto it = impl_->requests.find(req);
    return it == impl_->requests.end() || it->second.status != XferStatus::InProgress;
  };
  if (timeout_ms < 0)
    impl_->cv.wait(lk, done);
  else
    impl_->cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), done);
  auto it = impl_->requests.find(req);
  return it == impl_->requests.end() ? XferStatus::InvalidDesc : it->second.status;
}

std::vector<DescResult> Agent::results(XferReq req) {
  std::lock_guard lk(impl_->mu);
  auto it = impl_->requests.find(req);
  if (it == impl_->requests.end()) return {};
  return it->second.results;
}

void Agent::release(XferReq req) {
  std::lock_guard lk(impl_->mu);
  impl_->requests.erase(req);
}

int Agent::notify_fd() const { return impl_->event_fd; }

std::vector<Notification> Agent::get_notifs() {
  std::uint64_t count = 0;
  [[maybe_unused]] auto n = ::read(impl_->event_fd, &count, sizeof(count));  // EAGAIN when nothing new
  std::lock_guard lk(impl_->mu);
  std::vector<Notification> out(impl_->notifs.begin(), impl_->notifs.end());
  impl_->notifs.clear();
  return out;
}

ObjectPage Agent::list_page(const std::string& prefix, const std::string& after, std::uint32_t limit) {
  proto::CallMsg m;
  m.call = impl_->new_call_id();
  m.prefix = prefix;
  m.after = after;
  m.limit = limit;
  proto::Frame f = impl_->call(m.call, proto::encode(proto::Type::List, m));
  proto::CallReply r;
  if (f.type != proto::Type::ListReply || !proto::decode(f.type, f.body, &r))
    throw Error("unexpected reply to list from the agent");
  return {std::move(r.objects), std::move(r.text)};
}

std::vector<ObjectInfo> Agent::list(const std::string& prefix) {
  std::vector<ObjectInfo> all;
  std::string after;
  do {
    ObjectPage page = list_page(prefix, after);
    if (page.objects.empty()) break;
    all.insert(all.end(), std::make_move_iterator(page.objects.begin()), std::make_move_iterator(page.objects.end()));
    after = std::move(page.next);
  } while (!after.empty());
  return all;
}

std::vector<bool> Agent::per_key_call(std::uint32_t ask, std::uint32_t answer, const char* what,
                                      std::span<const std::string> keys) {
  proto::CallMsg m;
  m.call = impl_->new_call_id();
  m.keys.assign(keys.begin(), keys.end());
  proto::Frame f = impl_->call(m.call, proto::encode(static_cast<proto::Type>(ask), m));
  proto::CallReply r;
  if (f.type != static_cast<proto::Type>(answer) || !proto::decode(f.type, f.body, &r) ||
      r.found.size() != keys.size())
    throw Error(std::string("unexpected reply to ") + what + " from the agent");
  return std::vector<bool>(r.found.begin(), r.found.end());
}

std::vector<bool> Agent::remove_each(std::span<const std::string> keys) {
  return per_key_call(static_cast<std::uint32_t>(proto::Type::Remove), static_cast<std::uint32_t>(proto::Type::RemoveReply),
                      "remove", keys);
}

std::size_t Agent::remove(std::span<const std::string> keys) {
  const std::vector<bool> removed = remove_each(keys);
  return static_cast<std::size_t>(std::count(removed.begin(), removed.end(), true));
}

std::vector<bool> Agent::exists(std::span<const std::string> keys) {
  return per_key_call(static_cast<std::uint32_t>(proto::Type::Exists), static_cast<std::uint32_t>(proto::Type::ExistsReply),
                      "exists", keys);
}

std::string Agent::stats_json() {
  proto::CallMsg m;
  m.call = impl_->new_call_id();
  proto::Frame f = impl_->call(m.call, proto::encode(proto::Type::Stats, m));
  proto::CallReply r;
  if (f.type != proto::Type::StatsReply || !proto::decode(f.type, f.body, &r))
    throw Error("unexpected reply to stats from the agent");
  return r.text;
}

}  // namespace ferry::xfer
