#pragma once
// The application's side of the transfer engine, shaped like NIXL's agent
// (https://github.com/ai-dynamo/nixl, docs/xfer.md):
//
//   Agent agent({.endpoint = "unix:ferry.agent"});        // connect (throws on failure)
//   auto buf = Buffer::allocate(MemType::Vram, 64 << 20);  // or your own cudaMalloc
//   auto mem = agent.register_memory(buf);                 // once, at set-up
//   auto req = agent.create_xfer_req(XferOp::Write, {{addr, len}}, {"key"}, "done!");
//   agent.post(req);        // Ok or InProgress
//   agent.status(req);      // InProgress ... then Ok or the first error
//   agent.release(req);
//
// Set-up calls throw ferry::Error; data-path calls return XferStatus. A transfer
// finishes as a whole; results() then says, per descriptor, how it went, where
// (which tier) and why it failed. Completion also raises notify_fd() (an eventfd)
// and queues a notification, so nobody has to poll on a timer.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferry/xfer/buffer.h"
#include "ferry/xfer/types.h"

namespace ferry::xfer {

struct AgentConfig {
  std::string endpoint = "unix:ferry.agent";  // "unix:NAME" or "tcp:HOST:PORT"
  std::string name = "app";                   // shown in the agent's log
  int connect_timeout_ms = 5000;
};

// NIXL's basic descriptor: an address range in registered memory.
struct MemDesc {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  std::uint32_t dev_id = 0;
};

// A registered region (what register_memory returns).
struct MemRegion {
  std::uint64_t id = 0;
  MemType type = MemType::Dram;
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  std::uint32_t dev_id = 0;
};

// What a backend of the agent declares (NIXL: supportsLocal/Remote/Notif, memory types).
struct BackendInfo {
  std::string name;                   // "cuda-ipc" or "memfd" (copy), "dram"/"file"/"redis" (tiers)
  std::vector<MemType> mem_types;
  bool supports_local = true;
  bool supports_remote = false;
  bool supports_notif = true;
};

struct DescResult {
  XferStatus status = XferStatus::InProgress;
  std::uint64_t size = 0;  // bytes stored or read (a pulled object may be shorter than its buffer)
  std::string tier;        // where it was stored or found
  std::string error;       // why it failed, naming the key
};

struct Notification {
  std::uint64_t request = 0;
  std::string message;  // the notif_msg given to create_xfer_req
  XferStatus status = XferStatus::Ok;
};

struct ObjectInfo {
  std::string key;
  std::uint64_t size = 0;
  std::string tier;
};

struct ObjectPage {
  std::vector<ObjectInfo> objects;
  std::string next;
};

using XferReq = std::uint64_t;

class Agent {
 public:
  explicit Agent(const AgentConfig& config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const std::vector<BackendInfo>& backends() const;
  const std::vector<std::string>& tiers() const;  // the agent's chain, top first

  // Registration (set-up). A Buffer is reachable by construction (the agent
  // maps its memfd). A raw pointer is a cudaMalloc allocation (Vram, CUDA
  // builds; a caching allocator's block inside a larger allocation is fine), a
  // range inside a registered Buffer, or any other host memory of this
  // process, which the agent copies with process_vm_readv/writev (this process
  // then names the agent its ptracer: docs/xfer.md, "Memory the agent reaches").
  MemRegion register_memory(const Buffer& buffer);
  MemRegion register_memory(MemType type, const void* addr, std::uint64_t len, std::uint32_t dev_id = 0);
  // Memory this process mapped from a shared file (POSIX shm, such as
  // LMCache's L1 pool): [addr, addr + len) is [file_offset, file_offset + len)
  // of the file open as fd. The agent gets its own descriptor and reaches the
  // bytes with pread/pwrite, faster than cross-memory attach and never
  // mapping a file that could shrink under it. fd stays the caller's.
  MemRegion register_shared_file(const void* addr, std::uint64_t len, int fd, std::uint64_t file_offset);
  void deregister_memory(const MemRegion& region);

  // A transfer: local[i] <-> keys[i]. Write pushes memory to storage, Read pulls.
  // Throws ferry::Error naming the descriptor when one lies outside every
  // registered region or the lists disagree in length.
  XferReq create_xfer_req(XferOp op, std::span<const MemDesc> local, std::span<const std::string> keys,
                          std::string notif_msg = {});
  // Sends it to the agent: InProgress (or an error status, e.g. the agent is gone).
  XferStatus post(XferReq req);
  // InProgress until the agent answers; then Ok or the first descriptor's error.
  XferStatus status(XferReq req);
  // Waits up to timeout_ms (-1: forever) for the request to finish; returns status().
  XferStatus wait(XferReq req, int timeout_ms = -1);
  // Per-descriptor results, once status() is no longer InProgress.
  std::vector<DescResult> results(XferReq req);
  // Forgets a request (a posted one still runs to completion in the agent).
  void release(XferReq req);

  // An eventfd that becomes readable when a request finishes; get_notifs() drains it.
  int notify_fd() const;
  std::vector<Notification> get_notifs();

  // Management. Keys live in the calling user's namespace (docs/security.md).
  // Every object whose key starts with prefix, in key order (fetched page by page).
  std::vector<ObjectInfo> list(const std::string& prefix = {});
  // One page of that listing: up to `limit` objects (0: the agent's page size)
  // whose keys sort after `after`; ObjectPage::next is the next page's `after`,
  // empty after the last page.
  ObjectPage list_page(const std::string& prefix, const std::string& after = {}, std::uint32_t limit = 0);
  // Removes keys from every tier; returns how many existed.
  std::size_t remove(std::span<const std::string> keys);
  // The same, one answer per key, in order: whether it existed and is gone.
  std::vector<bool> remove_each(std::span<const std::string> keys);
  // Whether some tier holds each key, in one round trip (no transfer, no listing).
  std::vector<bool> exists(std::span<const std::string> keys);
  std::string stats_json();

 private:
  struct Impl;
  // A call that asks one question per key (remove, exists): its answers.
  std::vector<bool> per_key_call(std::uint32_t ask, std::uint32_t answer, const char* what,
                                 std::span<const std::string> keys);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::xfer
