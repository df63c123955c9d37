#include "xfer/nixl/dma_proxy_engine.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>
#include <vector>

#include "core/log.h"
#include "ferry/core/status.h"

namespace ferry::xfer::nixl {
namespace {

// How long deregistration and release wait for the agent to finish with
// memory that a transfer still uses. A transfer's memory must stay valid
// until then: the agent would otherwise write into memory the application
// has given back.
constexpr auto kDrainTimeout = std::chrono::seconds(30);

spdlog::logger& logger() { return log::app(); }

std::size_t parse_count(const std::string& name, const std::string& text) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v > 65536)
    throw Error(std::string(kBackendName) + ": " + name + "=\"" + log::printable(text) +
                "\": expected a whole number from 1 to 65536");
  return v;
}

}  // namespace

nixl_b_params_t default_options() {
  const EngineOptions d;
  return {{"endpoint", d.endpoint},
          {"queue_depth", std::to_string(d.queue_depth)},
          {"checksum", d.checksum},
          {"connect_timeout_ms", std::to_string(d.connect_timeout_ms)}};
}

EngineOptions parse_options(const nixl_b_params_t& params) {
  EngineOptions o;
  for (const auto& [name, value] : params) {
    if (name == "endpoint") {
      if (value.rfind("unix:", 0) != 0 && value.rfind("tcp:", 0) != 0)
        throw Error(std::string(kBackendName) + ": endpoint=\"" + log::printable(value) +
                    "\": expected unix:NAME or tcp:HOST:PORT, as `ferry agent --endpoint` takes");
      o.endpoint = value;
    } else if (name == "queue_depth") {
      o.queue_depth = parse_count(name, value);
    } else if (name == "connect_timeout_ms") {
      o.connect_timeout_ms = static_cast<int>(parse_count(name, value));
    } else if (name == "checksum") {
      // The agent keeps an XXH3 checksum with every object and verifies it on
      // every read; no setting turns that off, so none is pretended.
      if (value != "xxh3")
        throw Error(std::string(kBackendName) + ": checksum=\"" + log::printable(value) +
                    "\": the agent stores and verifies every object with xxh3, the only value");
      o.checksum = value;
    } else {
      throw Error(std::string(kBackendName) + ": unknown option \"" + log::printable(name) +
                  "\"; it takes endpoint, queue_depth, checksum and connect_timeout_ms");
    }
  }
  return o;
}

nixl_status_t to_nixl(XferStatus status) noexcept {
  switch (status) {
    case XferStatus::Ok: return NIXL_SUCCESS;
    case XferStatus::InProgress: return NIXL_IN_PROG;
    // A missing object is NIXL_ERR_BACKEND, as NIXL's own OBJ backend answers
    // one: code written for OBJ (LMCache's NIXL storage backend) counts that
    // as a miss, and would fail on NIXL_ERR_NOT_FOUND. The log names the key.
    case XferStatus::NotFound: return NIXL_ERR_BACKEND;
    case XferStatus::InvalidDesc: return NIXL_ERR_INVALID_PARAM;
    case XferStatus::ChecksumMismatch: return NIXL_ERR_MISMATCH;
    case XferStatus::TooLarge: return NIXL_ERR_MISMATCH;
    case XferStatus::Cancelled: return NIXL_ERR_CANCELED;
    // Not NIXL_ERR_REMOTE_DISCONNECT: NIXL takes that as a peer agent to
    // forget, and the agent here is this process's own backend.
    case XferStatus::Unavailable:
    case XferStatus::NoSpace:
    case XferStatus::IoError:
    case XferStatus::ProtocolError: return NIXL_ERR_BACKEND;
    case XferStatus::Internal: return NIXL_ERR_UNKNOWN;
  }
  return NIXL_ERR_UNKNOWN;
}

// A registration: memory the agent reaches, or an object named by its key.
// Prepared requests point at it, so it lives until NIXL has deregistered it
// and the last request that points at it is released (all under mu_).
class DmaProxyEngine::Region final : public nixlBackendMD {
 public:
  explicit Region(MemRegion memory) : nixlBackendMD(true), memory_(memory), object_(false) {}
  Region(std::string key, std::uint64_t dev_id) : nixlBackendMD(true), key_(std::move(key)), dev_id_(dev_id) {}

  bool is_object() const noexcept { return object_; }
  const MemRegion& memory() const noexcept { return memory_; }
  const std::string& key() const noexcept { return key_; }
  std::uint64_t dev_id() const noexcept { return dev_id_; }

  std::size_t in_use = 0;   // posted transfers over it, until the agent has finished them
  std::size_t holders = 0;  // prepared requests that point at it
  bool dropped = false;     // deregistered by NIXL

 private:
  MemRegion memory_{};
  std::string key_;
  std::uint64_t dev_id_ = 0;
  bool object_ = true;
};

struct DmaProxyEngine::Request final : nixlBackendReqH {
  enum class State { Idle, Waiting, AtAgent, Finished };
  XferReq id = 0;
  XferOp op = XferOp::Write;
  std::vector<Region*> regions;  // local memory and objects, one each per descriptor
  std::vector<std::uint64_t> lengths;
  State state = State::Idle;
  nixl_status_t result = NIXL_SUCCESS;
  bool released = false;  // NIXL let go of it while the agent still ran it: retiring it frees it
};

DmaProxyEngine::DmaProxyEngine(const nixlBackendInitParams* init_params) : nixlBackendEngine(init_params) {
  try {
    options_ = parse_options(getCustomParams());
    AgentConfig config;
    config.endpoint = options_.endpoint;
    config.name = "nixl:" + localAgent;
    config.connect_timeout_ms = options_.connect_timeout_ms;
    agent_ = std::make_unique<Agent>(config);
    logger().info("{}: agent {} connected at {} (queue_depth {}, tiers {})", kBackendName, log::printable(localAgent),
                  options_.endpoint, options_.queue_depth, fmt::join(agent_->tiers(), " > "));
  } catch (const std::exception& e) {
    logger().error("{}: cannot start: {}", kBackendName, e.what());
    initErr = true;
  }
}

DmaProxyEngine::~DmaProxyEngine() {
  // NIXL releases requests and registrations before it destroys a backend.
  // Orphans (released while they ran) go with the session, which closes with agent_.
  std::lock_guard lk(mu_);
  for (Request* r : sent_)
    if (r->released) delete r;
}

nixl_status_t DmaProxyEngine::connect(const std::string& remote_agent) {
  if (remote_agent == localAgent) return NIXL_SUCCESS;
  logger().error("{}: is local-only; agent {} cannot reach {}", kBackendName, log::printable(localAgent),
                 log::printable(remote_agent));
  return NIXL_ERR_NOT_SUPPORTED;
}

// Every override catches what the client may throw (a socket error, memory
// running out) and answers with this: an exception must not unwind into
// libnixl, which calls some of these from destructors.
namespace {
nixl_status_t failed(const char* action, const std::exception& e) {
  logger().error("{}: {} failed: {}", kBackendName, action, e.what());
  return NIXL_ERR_BACKEND;
}
}  // namespace

nixl_status_t DmaProxyEngine::registerMem(const nixlBlobDesc& mem, const nixl_mem_t& nixl_mem, nixlBackendMD*& out) {
  out = nullptr;
  try {
    switch (nixl_mem) {
      case DRAM_SEG:
      case VRAM_SEG: {
        const MemType type = nixl_mem == DRAM_SEG ? MemType::Dram : MemType::Vram;
        auto region = std::make_unique<Region>(agent_->register_memory(
            type, reinterpret_cast<const void*>(mem.addr), mem.len, static_cast<std::uint32_t>(mem.devId)));
        out = region.release();
        return NIXL_SUCCESS;
      }
      case OBJ_SEG:
        // NIXL's OBJ convention: metaInfo is the key, else devId's decimal form.
        out = new Region(mem.metaInfo.empty() ? std::to_string(mem.devId) : mem.metaInfo, mem.devId);
        return NIXL_SUCCESS;
      default:
        logger().error("{}: memory type {} is not supported (DRAM_SEG, VRAM_SEG and OBJ_SEG are)", kBackendName,
                       static_cast<int>(nixl_mem));
        return NIXL_ERR_NOT_SUPPORTED;
    }
  } catch (const std::exception& e) {
    logger().error("{}: cannot register {} bytes at {:#x}: {}", kBackendName, mem.len, mem.addr, e.what());
    return NIXL_ERR_BACKEND;
  }
}

nixl_status_t DmaProxyEngine::loadLocalMD(nixlBackendMD* input, nixlBackendMD*& output) {
  output = input;  // transfers to this agent itself name the registration's own metadata
  return NIXL_SUCCESS;
}

void DmaProxyEngine::let_go(Region* region) const {
  if (region->dropped && region->holders == 0 && region->in_use == 0) delete region;
}

nixl_status_t DmaProxyEngine::deregisterMem(nixlBackendMD* meta) {
  auto* region = static_cast<Region*>(meta);
  if (region == nullptr) return NIXL_ERR_INVALID_PARAM;
  try {
    // The application may free the memory once this returns: wait until the
    // agent has finished every transfer over it. NIXL drops the registration
    // whatever this answers, so past the bound the wait is logged, not refused.
    const auto deadline = std::chrono::steady_clock::now() + kDrainTimeout;
    std::unique_lock lk(mu_);
    for (;;) {
      send_waiting();
      if (region->in_use == 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        logger().error("{}: deregistered while {} transfer(s) still use {}; the agent may still reach it",
                       kBackendName, region->in_use,
                       region->is_object() ? "object " + log::printable(region->key()) : std::string("this memory"));
        break;
      }
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      lk.lock();
    }
    if (!region->is_object()) agent_->deregister_memory(region->memory());
    region->dropped = true;
    let_go(region);
    return NIXL_SUCCESS;
  }
  catch (const std::exception& e) {
    return failed("deregistration", e);
  }
}

nixl_status_t DmaProxyEngine::prepXfer(const nixl_xfer_op_t& operation, const nixl_meta_dlist_t& local,
                                       const nixl_meta_dlist_t& remote, const std::string& remote_agent,
                                       nixlBackendReqH*& handle, const nixl_opt_b_args_t* opt_args) const {
  handle = nullptr;
  if (remote_agent != localAgent) {
    logger().error("{}: is local-only; a transfer must name agent {} itself, not {}", kBackendName,
                   log::printable(localAgent), log::printable(remote_agent));
    return NIXL_ERR_NOT_SUPPORTED;
  }
  if (opt_args != nullptr && opt_args->hasNotif) {
    logger().error("{}: sends no notifications (supportsNotif is false)", kBackendName);
    return NIXL_ERR_NOT_SUPPORTED;
  }
  if (operation != NIXL_READ && operation != NIXL_WRITE) return NIXL_ERR_INVALID_PARAM;
  if ((local.getType() != DRAM_SEG && local.getType() != VRAM_SEG) || remote.getType() != OBJ_SEG) {
    logger().error("{}: moves DRAM_SEG or VRAM_SEG memory to and from OBJ_SEG objects, not {} to {}", kBackendName,
                   static_cast<int>(local.getType()), static_cast<int>(remote.getType()));
    return NIXL_ERR_INVALID_PARAM;
  }
  const int n = local.descCount();
  if (n == 0 || n != remote.descCount()) return NIXL_ERR_INVALID_PARAM;
  try {
    auto req = std::make_unique<Request>();
    req->op = operation == NIXL_WRITE ? XferOp::Write : XferOp::Read;
    std::vector<MemDesc> descs;
    std::vector<std::string> keys;
    descs.reserve(n);
    keys.reserve(n);
    req->regions.reserve(2 * static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const nixlMetaDesc& l = local[i];
      const nixlMetaDesc& r = remote[i];
      auto* memory = static_cast<Region*>(l.metadataP);
      auto* object = static_cast<Region*>(r.metadataP);
      if (memory == nullptr || memory->is_object() || object == nullptr || !object->is_object()) {
        logger().error("{}: descriptor {} is not covered by this backend's registrations", kBackendName, i);
        return NIXL_ERR_INVALID_PARAM;
      }
      if (r.addr != 0) {
        logger().error("{}: moves whole objects; descriptor {} starts at offset {} of {}", kBackendName, i, r.addr,
                       log::printable(object->key()));
        return NIXL_ERR_NOT_SUPPORTED;
      }
      descs.push_back({l.addr, l.len, static_cast<std::uint32_t>(l.devId)});
      keys.push_back(object->key());
      req->regions.push_back(memory);
      req->regions.push_back(object);
      req->lengths.push_back(l.len);
    }
    try {
      req->id = agent_->create_xfer_req(req->op, descs, keys);
    } catch (const Error& e) {
      logger().error("{}: {}", kBackendName, e.what());
      return NIXL_ERR_INVALID_PARAM;
    }
    std::lock_guard lk(mu_);
    for (Region* region : req->regions) ++region->holders;
    handle = req.release();
    return NIXL_SUCCESS;
  }
  catch (const std::exception& e) {
    return failed("preparing a transfer", e);
  }
}

void DmaProxyEngine::finish(Request& r, nixl_status_t result) const {
  r.state = Request::State::Finished;
  r.result = result;
  for (Region* region : r.regions) --region->in_use;
}

void DmaProxyEngine::forget(Request* r) const {
  for (Region* region : r->regions) {
    --region->holders;
    let_go(region);
  }
  agent_->release(r->id);
  delete r;
}

nixl_status_t DmaProxyEngine::outcome(Request& r, XferStatus s) const {
  if (s == XferStatus::Ok && r.op == XferOp::Read) {
    // A shorter object would leave the rest of the buffer as it was.
    const std::vector<DescResult> results = agent_->results(r.id);
    for (std::size_t i = 0; i < results.size() && i < r.lengths.size(); ++i)
      if (results[i].size != r.lengths[i]) {
        logger().error("{}: object {} holds {} bytes; descriptor {} reads {}", kBackendName,
                       log::printable(r.regions[2 * i + 1]->key()), results[i].size, i, r.lengths[i]);
        return NIXL_ERR_MISMATCH;
      }
  } else if (s != XferStatus::Ok) {
    for (const DescResult& d : agent_->results(r.id))
      if (is_error(d.status)) {
        logger().error("{}: {} failed: {} ({})", kBackendName, to_string(r.op), d.error, to_string(d.status));
        break;
      }
  }
  return to_nixl(s);
}

void DmaProxyEngine::send_waiting() const {
  // Retire what the agent has finished, freeing its places in the queue.
  for (std::size_t i = 0; i < sent_.size();) {
    Request* r = sent_[i];
    const XferStatus s = agent_->status(r->id);
    if (s == XferStatus::InProgress) {
      ++i;
      continue;
    }
    sent_.erase(sent_.begin() + static_cast<std::ptrdiff_t>(i));
    nixl_status_t result = NIXL_ERR_BACKEND;
    try {
      result = outcome(*r, s);
    } catch (const std::exception& e) {
      logger().error("{}: reading a transfer's results failed: {}", kBackendName, e.what());
    }
    finish(*r, result);
    if (r->released) forget(r);
  }
  while (sent_.size() < options_.queue_depth && !waiting_.empty()) {
    Request* r = waiting_.front();
    XferStatus s = XferStatus::Internal;
    try {
      sent_.reserve(sent_.size() + 1);  // so that nothing can throw once the agent has it
      s = agent_->post(r->id);
    } catch (const std::exception& e) {
      logger().error("{}: posting a transfer failed: {}", kBackendName, e.what());
    }
    waiting_.pop_front();
    if (s == XferStatus::InProgress || s == XferStatus::Ok) {
      r->state = Request::State::AtAgent;
      sent_.push_back(r);
      continue;
    }
    logger().error("{}: the agent refused a transfer: {}", kBackendName, to_string(s));
    finish(*r, to_nixl(s));
  }
}

nixl_status_t DmaProxyEngine::postXfer(const nixl_xfer_op_t&, const nixl_meta_dlist_t&, const nixl_meta_dlist_t&,
                                       const std::string&, nixlBackendReqH*& handle, const nixl_opt_b_args_t*) const {
  auto* r = static_cast<Request*>(handle);
  if (r == nullptr) return NIXL_ERR_INVALID_PARAM;
  try {
    std::lock_guard lk(mu_);
    if (r->state == Request::State::Waiting || r->state == Request::State::AtAgent) return NIXL_ERR_REPOST_ACTIVE;
    for (const Region* region : r->regions)
      if (region->dropped) {
        logger().error("{}: a transfer posted again after its memory or object was deregistered", kBackendName);
        return NIXL_ERR_INVALID_PARAM;
      }
    waiting_.push_back(r);  // first: the one call here that may throw
    for (Region* region : r->regions) ++region->in_use;
    r->state = Request::State::Waiting;
    send_waiting();
    return r->state == Request::State::Finished ? r->result : NIXL_IN_PROG;
  }
  catch (const std::exception& e) {
    return failed("posting a transfer", e);
  }
}

nixl_status_t DmaProxyEngine::checkXfer(nixlBackendReqH* handle) const {
  auto* r = static_cast<Request*>(handle);
  if (r == nullptr) return NIXL_ERR_INVALID_PARAM;
  try {
    std::lock_guard lk(mu_);
    send_waiting();
    switch (r->state) {
      case Request::State::Idle: return NIXL_ERR_NOT_POSTED;
      case Request::State::Waiting:
      case Request::State::AtAgent: return NIXL_IN_PROG;
      case Request::State::Finished: return r->result;
    }
    return NIXL_ERR_UNKNOWN;
  }
  catch (const std::exception& e) {
    return failed("checking a transfer", e);
  }
}

nixl_status_t DmaProxyEngine::releaseReqH(nixlBackendReqH* handle) const {
  auto* r = static_cast<Request*>(handle);
  if (r == nullptr) return NIXL_SUCCESS;
  try {
    std::unique_lock lk(mu_);
    if (r->state == Request::State::Waiting) {  // never sent: nothing touches its memory
      std::erase(waiting_, r);
      finish(*r, NIXL_ERR_CANCELED);
    }
    // Sent: the agent may still be reading or writing its memory, which the
    // application may reuse once this returns. Wait for the agent to finish.
    const auto deadline = std::chrono::steady_clock::now() + kDrainTimeout;
    while (r->state == Request::State::AtAgent && std::chrono::steady_clock::now() < deadline) {
      lk.unlock();
      (void)agent_->wait(r->id, 10);
      lk.lock();
      send_waiting();
    }
    if (r->state == Request::State::AtAgent) {
      // Still running: it stays queued as an orphan, counted against the
      // queue depth and its memory, and is freed when the agent finishes it.
      logger().error("{}: a transfer released while it still runs after {} s; its memory stays in use until the "
                     "agent finishes it",
                     kBackendName, std::chrono::duration_cast<std::chrono::seconds>(kDrainTimeout).count());
      r->released = true;
      return NIXL_SUCCESS;
    }
    forget(r);
    return NIXL_SUCCESS;
  }
  catch (const std::exception& e) {
    return failed("releasing a transfer", e);
  }
}

nixl_status_t DmaProxyEngine::queryMem(const nixl_reg_dlist_t& descs, std::vector<nixl_query_resp_t>& resp) const {
  if (descs.getType() != OBJ_SEG) return NIXL_ERR_NOT_SUPPORTED;
  std::vector<std::string> keys;
  keys.reserve(descs.descCount());
  for (int i = 0; i < descs.descCount(); ++i)
    keys.push_back(descs[i].metaInfo.empty() ? std::to_string(descs[i].devId) : descs[i].metaInfo);
  try {
    const std::vector<bool> found = agent_->exists(keys);
    resp.clear();
    for (const bool f : found) resp.push_back(f ? nixl_query_resp_t(nixl_b_params_t{}) : std::nullopt);
    return NIXL_SUCCESS;
  } catch (const std::exception& e) {
    logger().error("{}: query failed: {}", kBackendName, e.what());
    return NIXL_ERR_BACKEND;
  }
}

}  // namespace ferry::xfer::nixl
