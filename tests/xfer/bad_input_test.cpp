// Bad descriptors and bad peers get specific errors, and the agent goes on.
#include <gtest/gtest.h>

#include <fstream>

#include "ferry/core/status.h"
#include "support/ferry_processes.h"
#include "xfer/wire/messages.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

using xfer::Agent;
using xfer::Buffer;
using xfer::XferOp;
using xfer::XferStatus;

TEST(XferBadInput, ADescriptorOutsideTheRegisteredRangeIsRefusedNamingIt) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 8192);
  agent.register_memory(buf);
  auto descs = blocks_of(buf, 2, 4096);
  descs[1].len = 4097;  // one byte past the end
  try {
    (void)agent.create_xfer_req(XferOp::Write, descs, keys_of("k", 2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("descriptor 1"), std::string::npos) << e.what();
  }
}

TEST(XferBadInput, StorageMemoryTypesCannotBeRegisteredAsMemory) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  char host[64];
  EXPECT_THROW(agent.register_memory(xfer::MemType::Obj, host, sizeof(host)), Error);
  EXPECT_THROW(agent.register_memory(xfer::MemType::File, host, sizeof(host)), Error);
  // Plain host memory is reached by cross-memory attach, but only where it is
  // mapped: the agent reads both ends at registration, and says why not.
  agent.register_memory(xfer::MemType::Dram, host, sizeof(host));
  try {
    agent.register_memory(xfer::MemType::Dram, reinterpret_cast<const void*>(std::uintptr_t{4096}), 4096);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not mapped"), std::string::npos) << e.what();
  }
}

TEST(XferBadInput, AnUnknownKeyIsNotFoundAndNamesTheKey) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 8192);
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 4096), {"present"}), XferStatus::Ok);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 2, 4096), {"present", "missing-key"}, &results),
            XferStatus::NotFound);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, XferStatus::Ok);  // the good descriptor still arrived
  EXPECT_EQ(results[1].status, XferStatus::NotFound);
  EXPECT_NE(results[1].error.find("missing-key"), std::string::npos) << results[1].error;
}

TEST(XferBadInput, AnObjectLargerThanThePullBufferIsTooLarge) {
  FerryAgent agent_proc({"dram:16MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 8192);
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 8192), {"big"}), XferStatus::Ok);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 1, 4096), {"big"}, &results), XferStatus::TooLarge);
}

TEST(XferBadInput, ABlockLargerThanAStagingSlotIsTooLargeWithAHint) {
  // 64 MiB staging / 4 lanes = 16 MiB slots (the FerryAgent defaults).
  FerryAgent agent_proc({"dram:64MiB"});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 20 << 20);
  agent.register_memory(buf);
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 20 << 20), {"huge"}, &results), XferStatus::TooLarge);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].error.find("AgentServiceOptions::staging_mib"), std::string::npos) << results[0].error;
}

TEST(XferBadInput, ForgedDescriptorsAndGarbageFramesAreRefusedAndTheAgentGoesOn) {
  FerryAgent agent_proc({"dram:16MiB"});
  const auto ep = xfer::proto::Endpoint::parse(agent_proc.endpoint());
  {  // a peer that bypasses the API and names a region it never registered
    auto sock = xfer::proto::connect_to(ep, 5000);
    ASSERT_TRUE(sock.send(xfer::proto::encode(xfer::proto::Hello{xfer::proto::kVersion, "forger"})));
    auto hello = sock.recv();
    ASSERT_TRUE(hello && hello->type == xfer::proto::Type::HelloOk);
    xfer::proto::TransferMsg m;
    m.request = 1;
    m.descs.push_back({999, 0, 4096, "k"});
    ASSERT_TRUE(sock.send(xfer::proto::encode(m)));
    auto done_frame = sock.recv();
    ASSERT_TRUE(done_frame && done_frame->type == xfer::proto::Type::TransferDone);
    xfer::proto::TransferDone done;
    ASSERT_TRUE(xfer::proto::decode(done_frame->body, &done));
    EXPECT_EQ(done.status, XferStatus::InvalidDesc);
    EXPECT_NE(done.results[0].error.find("not registered"), std::string::npos) << done.results[0].error;
  }
  {  // garbage: an oversized frame header
    auto sock = xfer::proto::connect_to(ep, 5000);
    const std::string junk("\xff\xff\xff\xff\x00\x00\x00\x01", 8);
    ASSERT_TRUE(sock.send(junk));
    EXPECT_FALSE(sock.recv().has_value());  // the agent closes this session
  }
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 4096);
  agent.register_memory(buf);
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, 4096), {"ok"}), XferStatus::Ok);
  const std::string log = agent_proc.log();
  EXPECT_NE(log.find("frame of 4294967295 bytes"), std::string::npos) << log;
}

TEST(XferBadInput, NoAgentGivesAnErrorThatSaysHowToStartOne) {
  try {
    xfer::AgentConfig c;
    c.endpoint = "unix:ferry-test-nobody-listens";
    c.connect_timeout_ms = 200;
    Agent agent(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ferry agent --endpoint"), std::string::npos) << e.what();
  }
}

TEST(XferCli, KvPushLsExistsPullRmThroughARunningAgent) {
  FerryAgent agent_proc({"dram:16MiB"});
  const std::string file = ::testing::TempDir() + "/kv-cli-in";
  const auto data = random_bytes(12345, 4);
  {
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), data.size());
  }
  std::string out;
  ASSERT_EQ(run_ferry({"kv", "push", "cli/key", "--file", file, "--endpoint", agent_proc.endpoint()}, &out), 0) << out;
  ASSERT_EQ(run_ferry({"kv", "ls", "cli/", "--endpoint", agent_proc.endpoint()}, &out), 0) << out;
  EXPECT_NE(out.find("12345\tdram:16MiB\tcli/key"), std::string::npos) << out;
  EXPECT_EQ(run_ferry({"kv", "exists", "cli/key", "--endpoint", agent_proc.endpoint()}, &out), 0) << out;
  EXPECT_EQ(run_ferry({"kv", "exists", "cli/key", "cli/other", "--endpoint", agent_proc.endpoint()}, &out), 1)
      << "a missing key fails the command";
  EXPECT_NE(out.find("found\tcli/key"), std::string::npos) << out;
  EXPECT_NE(out.find("missing\tcli/other"), std::string::npos) << out;
  const std::string back_file = file + ".back";
  ASSERT_EQ(run_ferry({"kv", "pull", "cli/key", "--out", back_file, "--endpoint", agent_proc.endpoint()}, &out), 0)
      << out;
  std::ifstream in(back_file, std::ios::binary);
  std::vector<std::uint8_t> back((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(back, data);
  ASSERT_EQ(run_ferry({"kv", "rm", "cli/key", "--endpoint", agent_proc.endpoint()}, &out), 0) << out;
  EXPECT_NE(run_ferry({"kv", "pull", "cli/key", "--endpoint", agent_proc.endpoint()}, &out), 0);
  EXPECT_NE(out.find("not found"), std::string::npos) << out;
}

TEST(XferCli, AgentRefusesBadTierSpecsClearly) {
  std::string out;
  EXPECT_NE(run_ferry({"agent", "--endpoint", "unix:ferry-test-badtier", "--tier", "floppy:3"}, &out, 20), 0);
  EXPECT_NE(out.find("floppy"), std::string::npos) << out;
}

}  // namespace
}  // namespace ferry::test
