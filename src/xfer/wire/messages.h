#pragma once
// The agent protocol's messages (framing: protocol.h; docs/xfer.md lists them).
// encode() returns a whole frame; decode() returns false on a malformed body.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/xfer/agent.h"
#include "ferry/xfer/types.h"
#include "xfer/gpu/gpu.h"
#include "xfer/wire/protocol.h"

namespace ferry::xfer::proto {

struct Hello {
  std::uint32_t version = kVersion;
  std::string app;
};

struct HelloOk {
  std::uint64_t session = 0;
  std::uint32_t agent_pid = 0;  // TCP clients let this process take their memfds (PR_SET_PTRACER)
  std::vector<BackendInfo> backends;
  std::vector<std::string> tiers;
};

struct RegisterMsg {
  std::uint64_t call = 0;
  MemType type = MemType::Dram;
  std::uint32_t dev_id = 0;
  std::uint64_t len = 0;
  Reach reach = Reach::Memfd;
  std::uint64_t offset = 0;     // of the region in the memfd, the CUDA allocation or the shared file; its address (ProcessMemory)
  // Over TCP (no SCM_RIGHTS, no peer pid there): the application's process
  // and, for a memfd, the descriptor's number there. The agent checks that the
  // process runs as the connection's uid before it takes the descriptor or
  // reaches the memory.
  std::uint32_t owner_pid = 0;
  std::int32_t owner_fd = -1;
  std::uint8_t ipc_handle[gpu::kIpcHandleSize] = {};
  // SharedFile: the region's address in the application, where pulls write
  // by cross-memory attach (writes to one tmpfs file are serialized by its
  // inode lock; reads are not).
  std::uint64_t addr = 0;
};

struct RegisterOk {
  std::uint64_t call = 0;
  std::uint64_t region = 0;
};

struct TransferDesc {
  std::uint64_t region = 0;
  std::uint64_t offset = 0;  // in the region
  std::uint64_t len = 0;
  // A view, so that thousands of descriptors cost no allocation per key: of the
  // caller's keys (encode), or of the frame's body (decode). Valid while those live.
  std::string_view key;
};

struct TransferMsg {
  std::uint64_t request = 0;
  XferOp op = XferOp::Write;
  std::vector<TransferDesc> descs;
};

struct TransferDone {
  std::uint64_t request = 0;
  XferStatus status = XferStatus::Ok;
  std::vector<DescResult> results;
};

struct CallReply {          // ListReply, RemoveReply, ExistsReply, StatsReply, CallError share a shape
  std::uint64_t call = 0;
  XferStatus status = XferStatus::Ok;
  std::string text;         // StatsReply: JSON; CallError: the message; ListReply: the next page's
                            // cursor (the last key listed), empty on the last page
  std::uint64_t count = 0;  // RemoveReply: keys removed; ExistsReply: keys found
  std::vector<ObjectInfo> objects;  // ListReply
  std::vector<std::uint8_t> found;  // RemoveReply, ExistsReply: one answer per key asked, in order
};

struct CallMsg {            // List, Remove, Exists, Stats, Deregister
  std::uint64_t call = 0;
  std::string prefix;             // List
  std::string after;              // List: only keys after this one (a page's cursor)
  std::uint32_t limit = 0;        // List: at most this many objects (0: the agent's page size)
  std::vector<std::string> keys;  // Remove, Exists
  std::uint64_t region = 0;       // Deregister
};

std::string encode(const Hello& m);
std::string encode(const HelloOk& m);
std::string encode(const RegisterMsg& m);
std::string encode(const RegisterOk& m);
std::string encode(const TransferMsg& m);
std::string encode(const TransferDone& m);
std::string encode(Type type, const CallReply& m);
std::string encode(Type type, const CallMsg& m);

bool decode(std::string_view body, Hello* m);
bool decode(std::string_view body, HelloOk* m);
bool decode(std::string_view body, RegisterMsg* m);
bool decode(std::string_view body, RegisterOk* m);
bool decode(std::string_view body, TransferMsg* m);
bool decode(std::string_view body, TransferDone* m);
bool decode(Type type, std::string_view body, CallReply* m);
bool decode(Type type, std::string_view body, CallMsg* m);

}  // namespace ferry::xfer::proto
