#pragma once
// Shared by the transfer engine's end-to-end tests: which application memory
// they use, and helpers to move random data through an agent.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ferry/xfer/agent.h"
#include "ferry/xfer/buffer.h"

namespace ferry::test {

struct XferTestEnv {
  xfer::MemType mem = xfer::MemType::Dram;
};
XferTestEnv& xfer_env();

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

inline xfer::AgentConfig config_for(const std::string& endpoint, const std::string& name = "test") {
  xfer::AgentConfig c;
  c.endpoint = endpoint;
  c.name = name;
  return c;
}

// Runs one request to completion; returns its status.
inline xfer::XferStatus run_request(xfer::Agent& agent, xfer::XferOp op, const std::vector<xfer::MemDesc>& descs,
                                    const std::vector<std::string>& keys,
                                    std::vector<xfer::DescResult>* results = nullptr) {
  const xfer::XferReq req = agent.create_xfer_req(op, descs, keys);
  xfer::XferStatus s = agent.post(req);
  if (s == xfer::XferStatus::InProgress) s = agent.wait(req, 60000);
  if (results != nullptr) *results = agent.results(req);
  agent.release(req);
  return s;
}

// Descriptors for `count` consecutive blocks of `block` bytes at the buffer's start.
inline std::vector<xfer::MemDesc> blocks_of(const xfer::Buffer& buf, std::size_t count, std::size_t block,
                                            std::size_t first = 0) {
  std::vector<xfer::MemDesc> d;
  for (std::size_t i = 0; i < count; ++i)
    d.push_back({reinterpret_cast<std::uint64_t>(buf.data()) + (first + i) * block, block, 0});
  return d;
}

// After a transfer that failed on the application's memory: the agent still
// serves this session, a fresh registration and a write included.
inline xfer::XferStatus write_one_fresh_block(xfer::Agent& agent) {
  std::vector<std::uint8_t> fine = random_bytes(4096, 5);
  agent.register_memory(xfer::MemType::Dram, fine.data(), fine.size());
  return run_request(agent, xfer::XferOp::Write, {{reinterpret_cast<std::uint64_t>(fine.data()), 4096, 0}}, {"fine"});
}

inline std::vector<std::string> keys_of(const std::string& prefix, std::size_t count) {
  std::vector<std::string> k;
  for (std::size_t i = 0; i < count; ++i) k.push_back(prefix + std::to_string(i));
  return k;
}

}  // namespace ferry::test
