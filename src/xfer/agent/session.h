#pragma once
// One application connected to the agent: its registrations and its transfers.
// Each session has its own thread reading its socket; transfers run on the
// shared DataMover and answer through send(), from whichever thread finishes them.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/xfer/agent.h"
#include "xfer/agent/mover.h"
#include "xfer/agent/region.h"
#include "xfer/protocol.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::agent {

// What every session shares.
struct AgentContext {
  DataMover* mover = nullptr;
  store::TierChain* chain = nullptr;
  bool gpu_here = false;
  std::vector<BackendInfo> backends;
  std::vector<std::string> tiers;
  std::atomic<std::uint64_t> next_region{1};
  std::atomic<std::uint64_t> transfers{0}, bad_requests{0};
  std::function<std::string()> stats_json;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(proto::FrameSocket sock, std::uint64_t id, AgentContext& ctx);
  // Serves the application until it disconnects, breaks the protocol, or
  // shutdown() is called. Never throws: failures are logged.
  void run() noexcept;
  void shutdown() noexcept { sock_.shutdown(); }
  // Sends one frame; false (and nothing else) when the application is gone.
  bool send(const std::string& frame);
  const std::string& name() const noexcept { return name_; }

 private:
  bool handshake();
  void on_register(const proto::Frame& f, int fd);
  void on_transfer(proto::Frame& f);  // takes f.body over
  void on_call(const proto::Frame& f);
  void reply_error(std::uint64_t call, XferStatus status, const std::string& message);

  proto::FrameSocket sock_;
  std::mutex send_mu_;
  std::uint64_t id_;
  std::string name_;
  AgentContext& ctx_;
  std::mutex regions_mu_;
  std::map<std::uint64_t, std::shared_ptr<ImportedRegion>> regions_;
};

}  // namespace ferry::xfer::agent
