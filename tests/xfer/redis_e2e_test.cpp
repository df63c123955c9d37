// The redis tier seen from the application: a chain that ends in a real
// redis-server, and a Redis that goes away mid-run and comes back.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "support/ferry_processes.h"
#include "support/redis_server.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

using xfer::Agent;
using xfer::Buffer;
using xfer::XferOp;
using xfer::XferStatus;

TEST(XferRedis, ObjectsEvictedFromDramLandInRedisAndComeBack) {
  RedisServer redis;
  FerryAgent agent_proc({"dram:2MiB", redis.url()});
  Agent agent(config_for(agent_proc.endpoint()));
  constexpr std::size_t kBlock = 512 << 10, kCount = 10;  // 5 MiB through a 2 MiB dram tier
  Buffer buf = Buffer::allocate(xfer_env().mem, kBlock * kCount);
  const auto data = random_bytes(kBlock * kCount, 21);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  const auto keys = keys_of("r/", kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kBlock, i), {keys[i]}), XferStatus::Ok);
  std::size_t in_redis = 0;
  for (const auto& o : agent.list("r/")) in_redis += o.tier.rfind("redis://", 0) == 0;
  EXPECT_GE(in_redis, 6u);
  buf.write(0, std::vector<std::uint8_t>(data.size(), 0).data(), data.size());
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, kCount, kBlock), keys), XferStatus::Ok);
  std::vector<std::uint8_t> back(data.size());
  buf.read(0, back.data(), back.size());
  EXPECT_EQ(back, data);
}

TEST(XferRedis, RedisStoppedMidRunGivesClearErrorsAndTheAgentRecovers) {
  RedisServer redis;
  FerryAgent agent_proc({redis.url()});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 1 << 20);
  const auto data = random_bytes(1 << 20, 2);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 4, 256 << 10), keys_of("a/", 4)),
            XferStatus::Ok);

  redis.stop();
  std::vector<xfer::DescResult> results;
  EXPECT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 4, 256 << 10), keys_of("b/", 4), &results),
            XferStatus::Unavailable);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_NE(results[0].error.find("b/0"), std::string::npos) << results[0].error;
  EXPECT_TRUE(agent_proc.process().running()) << agent_proc.log();

  redis.start();  // empty again: persistence is off, as after a real crash
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 4, 256 << 10), keys_of("c/", 4)),
            XferStatus::Ok);
  buf.write(0, std::vector<std::uint8_t>(data.size(), 0).data(), data.size());
  ASSERT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 4, 256 << 10), keys_of("c/", 4)), XferStatus::Ok);
  std::vector<std::uint8_t> back(data.size());
  buf.read(0, back.data(), back.size());
  EXPECT_EQ(back, data);
}

// Issue 35, finding 5: while Redis was down, every failed call logged a line
// (25,000 a second under load). Now one a second per kind of failure, with a
// count of those held back; each application still gets its own error.
TEST(XferRedis, WhileRedisIsDownTheWarningsAreThrottled) {
  RedisServer redis;
  FerryAgent agent_proc({redis.url()});
  Agent agent(config_for(agent_proc.endpoint()));
  Buffer buf = Buffer::allocate(xfer_env().mem, 64 << 10);
  agent.register_memory(buf);
  redis.stop();
  const auto start = std::chrono::steady_clock::now();
  int failed = 0, sent = 0;
  // Past a second, so that a line passes again and counts the ones held back.
  for (int i = 0; i < 400 || std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500); ++i) {
    ++sent;
    std::vector<xfer::DescResult> results;
    failed += run_request(agent, XferOp::Write, blocks_of(buf, 1, 4096), {"down/" + std::to_string(i)}, &results) ==
              XferStatus::Unavailable;
    ASSERT_FALSE(results.empty());
    ASSERT_NE(results[0].error.find("redis"), std::string::npos) << results[0].error;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(failed, sent);
  const std::string log = agent_proc.log();
  std::size_t lines = 0;
  for (std::size_t at = log.find("backend unavailable: "); at != std::string::npos;
       at = log.find("backend unavailable: ", at + 1))
    ++lines;
  EXPECT_LE(static_cast<double>(lines), 2 * (seconds + 2)) << lines << " lines in " << seconds << " s:\n" << log;
  EXPECT_NE(log.find("suppressed)"), std::string::npos) << log;
}

// LMCache sizes its cache by the capacity the agent reports: for Redis, the
// tier's bytes plus the room left under maxmemory.
TEST(XferRedis, StatsReportRedisCapacityUnderMaxmemory) {
  RedisServer redis({"--maxmemory", "64mb", "--maxmemory-policy", "noeviction"});
  FerryAgent agent_proc({redis.url()});
  Agent agent(config_for(agent_proc.endpoint()));
  const auto redis_tier = [&] {
    const auto stats = nlohmann::json::parse(agent.stats_json());
    return stats.at("tiers").at(0);
  };
  const auto empty = redis_tier();
  ASSERT_TRUE(empty.contains("capacity_bytes")) << empty.dump();
  EXPECT_FALSE(empty.at("capacity_bounded").get<bool>()) << "Redis's bound is its own, not the chain's";
  const auto room = empty.at("capacity_bytes").get<std::uint64_t>();
  EXPECT_LT(room, 64ull << 20);
  EXPECT_GT(room, 32ull << 20);

  Buffer buf = Buffer::allocate(xfer_env().mem, 4 << 20);
  const auto data = random_bytes(4 << 20, 5);
  buf.write(0, data.data(), data.size());
  agent.register_memory(buf);
  ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 4, 1 << 20), keys_of("cap/", 4)),
            XferStatus::Ok);
  const auto used = redis_tier();
  EXPECT_EQ(used.at("used_bytes").get<std::uint64_t>(), 4ull << 20) << used.dump();
  EXPECT_LE(used.at("capacity_bytes").get<std::uint64_t>(), room + (256u << 10)) << used.dump();
  EXPECT_GE(used.at("capacity_bytes").get<std::uint64_t>(), 4ull << 20) << used.dump();
}

// A read into a block smaller than the object is TooLarge with the object's
// size (docs/xfer-tiers.md, section 7), so that the application can read it
// again into a block that fits: for objects in the file tier and in Redis, which
// the agent reads through the chain (the dram tier's objects it lends in place).
TEST(XferRedis, ATooSmallBlockIsTooLargeWithTheObjectsSizeFromFileAndRedis) {
  RedisServer redis;
  const auto dir = std::filesystem::temp_directory_path() / ("ferry-redis-e2e-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    // The file tier holds one object: the second moves the first down to Redis.
    FerryAgent agent_proc({"file:" + dir.string() + ",capacity=12KiB", redis.url()});
    Agent agent(config_for(agent_proc.endpoint()));
    constexpr std::size_t kObject = 8192;
    Buffer buf = Buffer::allocate(xfer_env().mem, 2 * kObject);
    const auto data = random_bytes(2 * kObject, 31);
    buf.write(0, data.data(), data.size());
    agent.register_memory(buf);
    const auto keys = keys_of("small-block/", 2);
    for (std::size_t i = 0; i < 2; ++i)
      ASSERT_EQ(run_request(agent, XferOp::Write, blocks_of(buf, 1, kObject, i), {keys[i]}), XferStatus::Ok);
    std::map<std::string, std::string> where;
    for (const auto& o : agent.list("small-block/")) where[o.key] = o.tier;
    EXPECT_EQ(where[keys[0]].rfind("redis://", 0), 0u) << where[keys[0]];
    EXPECT_EQ(where[keys[1]].rfind("file:", 0), 0u) << where[keys[1]];
    std::vector<xfer::DescResult> results;
    EXPECT_EQ(run_request(agent, XferOp::Read, blocks_of(buf, 2, 4096), keys, &results),
              XferStatus::TooLarge);
    ASSERT_EQ(results.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(results[i].status, XferStatus::TooLarge) << keys[i] << ": " << results[i].error;
      EXPECT_EQ(results[i].size, kObject)
          << keys[i] << " (in " << where[keys[i]] << "): " << results[i].error;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ferry::test
