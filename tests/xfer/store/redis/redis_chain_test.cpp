// The chain with Redis in it (the redis tier on its own: redis_tier_test.cpp),
// against a real redis-server that each test starts on a free port.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "support/redis_server.h"
#include "xfer/store/older_builds.h"
#include "xfer/store/redis/redis_tier.h"
#include "xfer/store/store_stress.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;

RedisTierOptions opts(std::uint16_t port) {
  RedisTierOptions o;
  o.endpoint.port = port;
  o.endpoint.timeout_ms = 2000;
  o.connections = 2;
  return o;
}

class RedisChainTest : public ::testing::Test {
 protected:
  ferry::test::RedisServer redis;
};

// The chain moves an older build's object down with today's checksum: the copy
// verifies in a tier that stores leaf checksums only.
TEST_F(RedisChainTest, AnOlderBuildsObjectMovesDownWithALeafChecksum) {
  test::TempDir dir;
  const auto old = random_bytes(300000, 9), fresh = random_bytes(300000, 10);
  test::write_older_build_object_file(dir.path(), "old", old);
  auto chain = make_chain({"file:" + dir.path() + ",capacity=400KiB", redis.url()});
  std::string error;
  ASSERT_EQ(put_one(*chain, "fresh", fresh, &error), XferStatus::Ok) << error;
  RedisTier direct(opts(redis.port()));
  const auto meta = direct.stat("old");
  ASSERT_TRUE(meta.has_value()) << "the file tier was full: the least recently used object moved down";
  EXPECT_FALSE(meta->whole_sum);
  EXPECT_EQ(meta->checksum, checksum({old.data(), old.size()}));
  EXPECT_EQ(test::get_one(direct, "old").data, old);
}

// The versions of key "k" in the tests of what a restart serves, by name.
struct Versions {
  std::vector<std::vector<std::uint8_t>> data = {random_bytes(6000, 1), random_bytes(6000, 2),
                                                 random_bytes(6000, 3)};
  const std::vector<std::uint8_t>& operator[](int v) const { return data[v - 1]; }
  // "v1" ... for a result that holds one of them, "none" for a miss.
  std::string name(const test::GetResult& r) const {
    if (r.status == XferStatus::NotFound) return "none";
    if (r.status != XferStatus::Ok)
      return std::string("an error (") + to_string(r.status) + ": " + r.error + ")";
    for (std::size_t i = 0; i < data.size(); ++i)
      if (r.data == data[i]) return "v" + std::to_string(i + 1);
    return "other bytes";
  }
};

// Redis is down while the agent starts, so the chain cannot list what it holds;
// it comes back holding the copy of a key that an earlier run left there (a
// Redis that persists keeps it; this test's does not persist, so the test
// writes it back). A newer version of that key acknowledged from the dram tier
// must not leave the old copy behind: after the next restart dram is empty, and
// the old copy would be served.
TEST_F(RedisChainTest, AChainStartedWithoutRedisNeverLeavesAnOlderRedisCopyToServeAfterARestart) {
  const Versions v;
  const auto left_by_an_earlier_run = [&] {
    RedisTier earlier(opts(redis.port()));
    ASSERT_EQ(put_one(earlier, "k", v[1]), XferStatus::Ok);
  };
  left_by_an_earlier_run();
  redis.stop();
  std::string acknowledged = "v1";
  {
    auto chain = make_chain({"dram:1MiB", redis.url()});
    // Still down: the chain can neither find nor remove the old copy.
    std::string error;
    const XferStatus s = put_one(*chain, "k", v[2], &error);
    if (s == XferStatus::Ok) acknowledged = "v2";
    EXPECT_EQ(s, XferStatus::Unavailable) << error;
    EXPECT_NE(error.find("older copy"), std::string::npos) << error;
    redis.start();
    left_by_an_earlier_run();
    // Back: the put goes through, and the old copy goes.
    ASSERT_EQ(put_one(*chain, "k", v[3], &error), XferStatus::Ok) << error;
    acknowledged = "v3";
    EXPECT_EQ(v.name(get_one(*chain, "k")), "v3");
  }
  auto chain = make_chain({"dram:1MiB", redis.url()});  // the restart: dram starts empty
  const std::string served = v.name(get_one(*chain, "k"));
  EXPECT_TRUE(served == acknowledged || served == "none")
      << "the restart served " << served << ", the last version acknowledged was " << acknowledged;
}

// Once Redis is back, a put lists it (at most once a second): the keys it
// holds join the chain's map, and a newer version of one of them still removes
// the old copy, now because the map names it.
TEST_F(RedisChainTest, AChainListsRedisOnceItIsBackAndStillRemovesItsOldCopies) {
  const Versions v;
  redis.stop();
  {
    auto chain = make_chain({"dram:1MiB", redis.url()});
    redis.start();
    {
      RedisTier earlier(opts(redis.port()));
      ASSERT_EQ(put_one(earlier, "k", v[1]), XferStatus::Ok);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the chain's first attempt
    std::string error;
    ASSERT_EQ(put_one(*chain, "other", v[3], &error), XferStatus::Ok) << error;  // lists Redis
    // The new version lands in dram; only the map can tell the chain that
    // Redis holds an older one now.
    ASSERT_EQ(put_one(*chain, "k", v[2], &error), XferStatus::Ok) << error;
    EXPECT_EQ(chain->stat("k")->tier, 0);
    EXPECT_FALSE(chain->tier(1).stat("k").has_value()) << "the old copy in Redis stayed";
  }
  auto chain = make_chain({"dram:1MiB", redis.url()});
  EXPECT_EQ(v.name(get_one(*chain, "k")), "none");
}

// Redis goes away after the start, holding an older copy of a key. A newer
// version that cannot remove that copy is not acknowledged: a restart with
// Redis back (holding what it had) would serve the older one.
TEST_F(RedisChainTest, APutThatCannotRemoveAnOlderRedisCopyIsNotAcknowledged) {
  const Versions v;
  const auto left_by_an_earlier_run = [&] {
    RedisTier earlier(opts(redis.port()));
    ASSERT_EQ(put_one(earlier, "k", v[1]), XferStatus::Ok);
  };
  left_by_an_earlier_run();
  std::string acknowledged = "v1";
  {
    auto chain = make_chain({"dram:1MiB", redis.url()});  // it knows Redis holds k
    redis.stop();
    std::string error;
    const XferStatus s = put_one(*chain, "k", v[2], &error);
    if (s == XferStatus::Ok) acknowledged = "v2";
    EXPECT_EQ(s, XferStatus::Unavailable) << error;
    EXPECT_NE(error.find(redis.url()), std::string::npos) << error;
    EXPECT_NE(v.name(get_one(*chain, "k")), "v2")
        << "a version that was not acknowledged is not served either";
  }
  redis.start();
  left_by_an_earlier_run();
  auto chain = make_chain({"dram:1MiB", redis.url()});
  const std::string served = v.name(get_one(*chain, "k"));
  EXPECT_EQ(served, acknowledged) << "the restart served " << served << ", the last version acknowledged was "
                                  << acknowledged;
}

// dram (small) -> file (bounded) -> redis, built from --tier specs as the agent does.
TEST_F(RedisChainTest, ThreeTierChainSpillsIntoRedis) {
  test::TempDir dir;
  auto chain = make_chain({"dram:32KiB", "file:" + dir.path() + ",capacity=64KiB,qd=4", redis.url()});
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 40; ++i) {
    data.push_back(random_bytes(5000 + 100 * i, i));
    const std::string key = "c" + std::to_string(i);  // PutItem::key is a view: keep the string alive
    std::string error;
    ASSERT_EQ(put_one(*chain, key, data.back(), &error), XferStatus::Ok) << error;
  }
  int per_tier[3] = {0, 0, 0};
  for (int i = 0; i < 40; ++i) {
    const auto got = get_one(*chain, "c" + std::to_string(i), 1 << 20);
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    ASSERT_EQ(got.data, data[i]);
    ++per_tier[got.tier];
  }
  EXPECT_GT(per_tier[0], 0);
  EXPECT_GT(per_tier[1], 0);
  EXPECT_GT(per_tier[2], 0);
  Fault fault;
  const auto listed = chain->list(fault);
  EXPECT_FALSE(fault.failed()) << fault.detail();
  EXPECT_EQ(listed.size(), 40u);
  EXPECT_EQ(std::count_if(listed.begin(), listed.end(), [&](const auto& l) { return l.tier == 2; }),
            per_tier[2]);
}

TEST_F(RedisChainTest, ChainUnderConcurrencyWithRedisLast) {
  test::TempDir dir;
  auto chain = make_chain({"dram:64KiB", "file:" + dir.path() + ",capacity=96KiB,qd=4", redis.url()});
  test::StressParams p;
  p.ops_per_thread = 800;
  test::run_stress(*chain, p);
  EXPECT_GT(chain->stats().moved_objects, 50u);
  EXPECT_EQ(chain->stats().failed_moves, 0u);
}

// Redis as the last tier goes away: what dram holds stays readable, what needs
// Redis is Unavailable (not lost, not NoSpace), and all works again once it is back.
TEST_F(RedisChainTest, ChainKeepsWorkingWhileRedisIsDown) {
  auto chain = make_chain({"dram:16KiB", redis.url()});
  const auto a = random_bytes(6000, 1), b = random_bytes(6000, 2), c = random_bytes(6000, 3);
  ASSERT_EQ(put_one(*chain, "a", a), XferStatus::Ok);
  ASSERT_EQ(put_one(*chain, "b", b), XferStatus::Ok);
  redis.stop();
  std::string error;
  EXPECT_EQ(put_one(*chain, "c", c, &error), XferStatus::Unavailable) << error;
  for (const char* k : {"a", "b"}) {
    const auto got = get_one(*chain, k, 1 << 16);
    EXPECT_EQ(got.status, XferStatus::Ok) << k << ": " << got.error;
    EXPECT_EQ(got.tier, 0);
  }
  EXPECT_EQ(get_one(*chain, "c", 1 << 16).status, XferStatus::Unavailable) << "not in dram; Redis cannot say";
  redis.start();
  ASSERT_EQ(put_one(*chain, "c", c, &error), XferStatus::Ok) << error;
  const auto got = get_one(*chain, "c", 1 << 16);
  EXPECT_EQ(got.status, XferStatus::Ok) << got.error;
  EXPECT_EQ(chain->stats().moved_objects, 1u) << "one of a, b went down to make room";
}

}  // namespace
}  // namespace ferry::xfer::store
