#pragma once
// DOCA_DMA_PROXY: a NIXL backend over ferry::xfer::Agent, the client the C++
// and Python APIs use (docs/nixl.md). One agent session per engine. It is
// local-only, as NIXL's own OBJ backend is: memory (DRAM_SEG, VRAM_SEG) moves
// to and from objects (OBJ_SEG) that the agent keeps in its tiers.
//
//   NIXL                        Ferry
//   registerMem(DRAM/VRAM)      Agent::register_memory
//   registerMem(OBJ, metaInfo)  the object's key (devId's decimal form when metaInfo is empty)
//   prepXfer                    Agent::create_xfer_req (checks every descriptor)
//   postXfer WRITE / READ       Agent::post: push / pull
//   checkXfer                   Agent::status
//   releaseReqH                 Agent::release, once the agent has finished with the memory

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/xfer/agent.h"
#include "xfer/nixl/nixl_plugin_abi.h"

namespace ferry::xfer::nixl {

inline constexpr const char* kBackendName = "DOCA_DMA_PROXY";

// The backend's init params, as create_backend(name, params) gives them.
struct EngineOptions {
  std::string endpoint = "unix:ferry.agent";  // `ferry agent`'s default
  std::size_t queue_depth = 64;               // transfers posted to the agent at once; later posts wait here
  std::string checksum = "xxh3";              // what the agent stores and verifies every object with
  int connect_timeout_ms = 5000;
};

// Every option with its default, as get_plugin_params() reports them.
nixl_b_params_t default_options();
// Throws ferry::Error naming the option for an unknown name or a bad value.
EngineOptions parse_options(const nixl_b_params_t& params);
// The status NIXL gets for one of Ferry's.
nixl_status_t to_nixl(XferStatus status) noexcept;

class DmaProxyEngine final : public nixlBackendEngine {
 public:
  // Connects to the agent. A failure (bad options, no agent) is logged and
  // sets initErr, which create_backend reports as NIXL_ERR_BACKEND.
  explicit DmaProxyEngine(const nixlBackendInitParams* init_params);
  ~DmaProxyEngine() override;

  bool supportsRemote() const override { return false; }
  bool supportsLocal() const override { return true; }
  bool supportsNotif() const override { return false; }
  nixl_mem_list_t getSupportedMems() const override { return {DRAM_SEG, VRAM_SEG, OBJ_SEG}; }

  nixl_status_t registerMem(const nixlBlobDesc& mem, const nixl_mem_t& nixl_mem, nixlBackendMD*& out) override;
  nixl_status_t deregisterMem(nixlBackendMD* meta) override;
  nixl_status_t connect(const std::string& remote_agent) override;
  nixl_status_t disconnect(const std::string&) override { return NIXL_SUCCESS; }
  nixl_status_t loadLocalMD(nixlBackendMD* input, nixlBackendMD*& output) override;
  nixl_status_t unloadMD(nixlBackendMD*) override { return NIXL_SUCCESS; }

  nixl_status_t prepXfer(const nixl_xfer_op_t& operation, const nixl_meta_dlist_t& local,
                         const nixl_meta_dlist_t& remote, const std::string& remote_agent, nixlBackendReqH*& handle,
                         const nixl_opt_b_args_t* opt_args) const override;
  nixl_status_t postXfer(const nixl_xfer_op_t& operation, const nixl_meta_dlist_t& local,
                         const nixl_meta_dlist_t& remote, const std::string& remote_agent, nixlBackendReqH*& handle,
                         const nixl_opt_b_args_t* opt_args) const override;
  nixl_status_t checkXfer(nixlBackendReqH* handle) const override;
  nixl_status_t releaseReqH(nixlBackendReqH* handle) const override;

  // Whether some tier holds each registered object (metaInfo is the key).
  nixl_status_t queryMem(const nixl_reg_dlist_t& descs, std::vector<nixl_query_resp_t>& resp) const override;

 private:
  struct Request;
  class Region;

  // Retires the requests the agent has finished, then sends waiting posts
  // while fewer than queue_depth are at the agent. Caller holds mu_ (as for
  // the helpers below).
  void send_waiting() const;
  // The NIXL status of a request the agent has answered with s (logs why it failed).
  nixl_status_t outcome(Request& r, XferStatus s) const;
  // Marks a request done and its regions no longer moved.
  void finish(Request& r, nixl_status_t result) const;
  // Frees a request NIXL has released and the agent has finished.
  void forget(Request* r) const;
  // Frees a region once deregistered and no request points at it.
  void let_go(Region* region) const;

  EngineOptions options_;
  std::unique_ptr<Agent> agent_;  // null when the constructor failed
  mutable std::mutex mu_;         // the queue below and every Request's state
  mutable std::deque<Request*> waiting_;  // posted here, not yet sent
  mutable std::vector<Request*> sent_;    // at the agent: at most queue_depth
};

}  // namespace ferry::xfer::nixl
