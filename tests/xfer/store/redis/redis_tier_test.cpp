#include "xfer/store/redis/redis_tier.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "support/redis_server.h"
#include "xfer/store/dram/dram_tier.h"
#include "xfer/store/file/file_tier.h"
#include "xfer/store/older_builds.h"
#include "xfer/store/store_stress.h"
#include "xfer/store/tier_chain.h"
#include "xfer/store/tier_spec.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;

RedisTierOptions opts(std::uint16_t port, std::string prefix = "ferry:") {
  RedisTierOptions o;
  o.endpoint.port = port;
  o.endpoint.timeout_ms = 2000;
  o.prefix = std::move(prefix);
  o.connections = 2;
  return o;
}

// A direct connection, for tests that look behind the tier's back.
struct RawRedis {
  explicit RawRedis(std::uint16_t port) : c(redisConnect("127.0.0.1", port)) {}
  ~RawRedis() { redisFree(c); }
  redisReply* cmd(const char* fmt, const std::string& a) {
    return static_cast<redisReply*>(redisCommand(c, fmt, a.data(), a.size()));
  }
  redisContext* c;
};

class RedisTierTest : public ::testing::Test {
 protected:
  ferry::test::RedisServer redis;
};

// Reads key from the chain into a generous buffer.
test::GetResult chain_get(TierChain& chain, std::string_view key) {
  test::GetResult r;
  r.data.resize(1 << 20);
  GetItem item = test::get_item(key, {r.data.data(), r.data.size()});
  chain.get({&item, 1});
  r.status = item.status;
  r.error = item.error;
  r.tier = item.tier;
  r.data.resize(item.status == XferStatus::Ok ? item.size : 0);
  return r;
}

XferStatus chain_put(TierChain& chain, std::string_view key, const std::vector<std::uint8_t>& data,
                     std::string* error) {
  PutItem item = test::put_item(key, data);
  chain.put({&item, 1});
  *error = item.error;
  return item.status;
}

// A server on a loopback port that answers every RESP command with one error
// reply, as Redis answers "-LOADING ..." while it loads its data set at
// start-up, or "-BUSY ..." while a script runs.
class ErrorServer {
 public:
  explicit ErrorServer(std::string reply) : reply_(std::move(reply) + "\r\n") {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd_, 8) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("ErrorServer: cannot listen on loopback");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ErrorServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int commands() const { return commands_.load(); }

 private:
  // The length of the first whole command (an array of bulk strings) in b; 0
  // while it is incomplete.
  static std::size_t command_length(const std::string& b) {
    std::size_t p = b.find("\r\n");
    if (b.empty() || b[0] != '*' || p == std::string::npos) return 0;
    const long n = std::stol(b.substr(1, p - 1));
    p += 2;
    for (long i = 0; i < n; ++i) {
      const std::size_t q = b.find("\r\n", p);
      if (q == std::string::npos) return 0;
      p = q + 2 + std::stoul(b.substr(p + 1, q - p - 1)) + 2;
      if (p > b.size()) return 0;
    }
    return p;
  }
  void serve() {
    std::map<int, std::string> clients;  // fd -> bytes received, not yet answered
    while (!stop_) {
      std::vector<pollfd> fds{{fd_, POLLIN, 0}};
      for (const auto& [fd, buf] : clients) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN)
        if (const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC); c >= 0) clients[c];
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[1 << 16];
        const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          close(fds[i].fd);
          clients.erase(fds[i].fd);
          continue;
        }
        std::string& in = clients[fds[i].fd];
        in.append(buf, static_cast<std::size_t>(n));
        for (std::size_t len; (len = command_length(in)) > 0;) {
          in.erase(0, len);
          ++commands_;
          if (write(fds[i].fd, reply_.data(), reply_.size()) < 0) break;
        }
      }
    }
    for (const auto& [fd, buf] : clients) close(fd);
  }

  std::string reply_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> commands_{0};
  std::thread thread_;
};

TEST_F(RedisTierTest, RoundTripsEverySizeInOneBatch) {
  RedisTier t(opts(redis.port()));
  EXPECT_EQ(t.describe(), redis.url());
  const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, 3 << 20};
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::string> keys;
  for (std::size_t n : sizes) {
    data.push_back(random_bytes(n, n));
    keys.push_back("k" + std::to_string(n));
  }
  std::vector<PutItem> puts;
  for (std::size_t i = 0; i < data.size(); ++i) puts.push_back(test::put_item(keys[i], data[i]));
  t.put(puts);
  for (const auto& p : puts) ASSERT_EQ(p.status, XferStatus::Ok) << p.error;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const auto got = get_one(t, keys[i]);
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, data[i]);
    const auto meta = t.stat(keys[i]);
    ASSERT_TRUE(meta);
    EXPECT_EQ(meta->size, sizes[i]);
    EXPECT_EQ(meta->checksum, checksum({data[i].data(), data[i].size()}));
  }
  EXPECT_EQ(t.list().size(), data.size());
}

TEST_F(RedisTierTest, PipelinesBatchesLongerThanAWindow) {
  RedisTier t(opts(redis.port()));
  constexpr int kItems = 300;
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::string> keys;
  for (int i = 0; i < kItems; ++i) {
    data.push_back(random_bytes(100 + i, i));
    keys.push_back("batch:" + std::to_string(i));
  }
  std::vector<PutItem> puts;
  for (int i = 0; i < kItems; ++i) puts.push_back(test::put_item(keys[i], data[i]));
  puts[17].key = "";
  t.put(puts);
  std::vector<std::vector<std::uint8_t>> out(kItems, std::vector<std::uint8_t>(1000));
  std::vector<GetItem> gets;
  for (int i = 0; i < kItems; ++i) gets.push_back(test::get_item(keys[i], {out[i].data(), out[i].size()}));
  t.get(gets);
  for (int i = 0; i < kItems; ++i) {
    if (i == 17) {
      EXPECT_EQ(puts[i].status, XferStatus::InvalidDesc);
      EXPECT_EQ(gets[i].status, XferStatus::NotFound);
      continue;
    }
    ASSERT_EQ(gets[i].status, XferStatus::Ok) << gets[i].error;
    out[i].resize(gets[i].size);
    EXPECT_EQ(out[i], data[i]);
  }
}

TEST_F(RedisTierTest, MissingRemoveTooSmallAndPrefixes) {
  RedisTier a(opts(redis.port(), "a:"));
  RedisTier b(opts(redis.port(), "b:"));
  EXPECT_EQ(get_one(a, "x").status, XferStatus::NotFound);
  ASSERT_EQ(put_one(a, "x", random_bytes(500, 1)), XferStatus::Ok);
  EXPECT_EQ(get_one(b, "x").status, XferStatus::NotFound) << "prefixes keep tiers apart";
  EXPECT_EQ(get_one(a, "x", 499).status, XferStatus::TooLarge);
  EXPECT_EQ(b.list().size(), 0u);
  EXPECT_FALSE(b.remove("x"));
  EXPECT_TRUE(a.remove("x"));
  EXPECT_EQ(get_one(a, "x").status, XferStatus::NotFound);
  EXPECT_FALSE(a.stat("x"));
  EXPECT_EQ(a.used(), 0u);
}

TEST_F(RedisTierTest, CorruptedValueIsDetected) {
  RedisTier t(opts(redis.port()));
  ASSERT_EQ(put_one(t, "v", random_bytes(1000, 4)), XferStatus::Ok);
  RawRedis raw(redis.port());
  redisReply* r = raw.cmd("GET %b", "ferry:v");
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  std::string value(r->str, r->len);
  freeReplyObject(r);
  value[600] ^= 1;
  r = static_cast<redisReply*>(
      redisCommand(raw.c, "SET %b %b", "ferry:v", size_t{7}, value.data(), value.size()));
  freeReplyObject(r);
  const auto got = get_one(t, "v");
  EXPECT_EQ(got.status, XferStatus::ChecksumMismatch);
  EXPECT_NE(got.error.find("'ferry:v'"), std::string::npos) << got.error;

  r = static_cast<redisReply*>(redisCommand(raw.c, "SET ferry:foreign hello"));
  freeReplyObject(r);
  EXPECT_EQ(get_one(t, "foreign").status, XferStatus::ChecksumMismatch);
  EXPECT_EQ(t.list().size(), 1u) << "values that are not ours are not listed";
}

// A value as a build before leaf checksums stored it: flags 0, and the XXH3-64
// of all its bytes as its checksum.
TEST_F(RedisTierTest, AnOlderBuildsValueVerifiesWithItsOwnChecksum) {
  RedisTier t(opts(redis.port()));
  const auto data = random_bytes(300000, 8);  // several leaves: the two checksums differ
  const std::uint64_t header[4] = {0x3156525952524546ull /* "FERRYRV1" */, data.size(),
                                   XXH3_64bits(data.data(), data.size()), 0};
  std::string value(reinterpret_cast<const char*>(header), sizeof(header));
  value.append(reinterpret_cast<const char*>(data.data()), data.size());
  RawRedis raw(redis.port());
  freeReplyObject(redisCommand(raw.c, "SET %b %b", "ferry:old", size_t{9}, value.data(), value.size()));
  ASSERT_TRUE(t.stat("old").has_value());
  EXPECT_TRUE(t.stat("old")->whole_sum);
  EXPECT_EQ(test::get_one(t, "old").data, data);
  value[32 + 250000] ^= 1;
  freeReplyObject(redisCommand(raw.c, "SET %b %b", "ferry:old", size_t{9}, value.data(), value.size()));
  EXPECT_EQ(test::get_one(t, "old").status, XferStatus::ChecksumMismatch);
  ASSERT_EQ(test::put_one(t, "old", data), XferStatus::Ok);
  EXPECT_FALSE(t.stat("old")->whole_sum) << "new values carry leaf checksums";
  EXPECT_EQ(test::get_one(t, "old").data, data);
}

// The chain moves an older build's object down with today's checksum: the copy
// verifies in a tier that stores leaf checksums only.
TEST_F(RedisTierTest, AnOlderBuildsObjectMovesDownWithALeafChecksum) {
  test::TempDir dir;
  const auto old = random_bytes(300000, 9), fresh = random_bytes(300000, 10);
  test::write_older_build_object_file(dir.path(), "old", old);
  auto chain = make_chain({"file:" + dir.path() + ",capacity=400KiB", redis.url()});
  PutItem item = test::put_item("fresh", fresh);
  chain->put({&item, 1});
  ASSERT_EQ(item.status, XferStatus::Ok) << item.error;
  RedisTier direct(opts(redis.port()));
  const auto meta = direct.stat("old");
  ASSERT_TRUE(meta.has_value()) << "the file tier was full: the least recently used object moved down";
  EXPECT_FALSE(meta->whole_sum);
  EXPECT_EQ(meta->checksum, checksum({old.data(), old.size()}));
  EXPECT_EQ(test::get_one(direct, "old").data, old);
}

TEST_F(RedisTierTest, FullRedisIsNoSpace) {
  RedisTier t(opts(redis.port()));
  RawRedis raw(redis.port());
  freeReplyObject(redisCommand(raw.c, "CONFIG SET maxmemory-policy noeviction"));
  freeReplyObject(redisCommand(raw.c, "CONFIG SET maxmemory 2mb"));
  std::string error;
  XferStatus s = XferStatus::Ok;
  for (int i = 0; i < 10 && s == XferStatus::Ok; ++i)
    s = put_one(t, "big" + std::to_string(i), random_bytes(1 << 20, i), &error);
  EXPECT_EQ(s, XferStatus::NoSpace) << error;
  EXPECT_NE(error.find("OOM"), std::string::npos) << error;
}

TEST_F(RedisTierTest, UnavailableWhileDownThenWorksAgain) {
  RedisTier t(opts(redis.port()));
  const auto data = random_bytes(10000, 9);
  ASSERT_EQ(put_one(t, "before", data), XferStatus::Ok);
  redis.stop();

  std::string error;
  EXPECT_EQ(put_one(t, "during", data, &error), XferStatus::Unavailable);
  EXPECT_NE(error.find("127.0.0.1:" + std::to_string(redis.port())), std::string::npos) << error;
  const auto got = get_one(t, "before");
  EXPECT_EQ(got.status, XferStatus::Unavailable) << got.error;
  EXPECT_FALSE(t.stat("before"));
  EXPECT_TRUE(t.list().empty());

  redis.start();  // an empty Redis (no persistence), on the same port
  ASSERT_EQ(put_one(t, "after", data, &error), XferStatus::Ok) << error;
  EXPECT_EQ(get_one(t, "after").data, data);
  EXPECT_EQ(get_one(t, "before").status, XferStatus::NotFound);
}

TEST(RedisTier, DownAtStartUpIsUnavailableNotAnException) {
  RedisTier t(opts(ferry::test::free_loopback_port()));
  std::string error;
  EXPECT_EQ(put_one(t, "k", random_bytes(10, 1), &error), XferStatus::Unavailable);
  EXPECT_NE(error.find("cannot connect"), std::string::npos) << error;
}

// A Redis that is still loading its data set answers "-LOADING ..." (and one
// running a long script "-BUSY ..."): it is there, but cannot answer yet. That
// is Unavailable (retry later), as for a Redis that is down, not IoError.
TEST(RedisTier, ALoadingOrBusyRedisIsUnavailable) {
  for (const char* reply :
       {"-LOADING Redis is loading the dataset in memory",
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."}) {
    ErrorServer server(reply);
    RedisTier t(opts(server.port()));
    const std::string word = std::string(reply).substr(1, std::string(reply).find(' ') - 1);
    std::string error;
    EXPECT_EQ(put_one(t, "k", random_bytes(100, 1), &error), XferStatus::Unavailable) << error;
    EXPECT_NE(error.find(word), std::string::npos) << error;
    const auto got = get_one(t, "k");
    EXPECT_EQ(got.status, XferStatus::Unavailable) << got.error;
    EXPECT_NE(got.error.find(word), std::string::npos) << got.error;
    EXPECT_GE(server.commands(), 2);
  }
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
TEST_F(RedisTierTest, AChainStartedWithoutRedisNeverLeavesAnOlderRedisCopyToServeAfterARestart) {
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
    const XferStatus s = chain_put(*chain, "k", v[2], &error);
    if (s == XferStatus::Ok) acknowledged = "v2";
    EXPECT_EQ(s, XferStatus::Unavailable) << error;
    EXPECT_NE(error.find("older copy"), std::string::npos) << error;
    redis.start();
    left_by_an_earlier_run();
    // Back: the put goes through, and the old copy goes.
    ASSERT_EQ(chain_put(*chain, "k", v[3], &error), XferStatus::Ok) << error;
    acknowledged = "v3";
    EXPECT_EQ(v.name(chain_get(*chain, "k")), "v3");
  }
  auto chain = make_chain({"dram:1MiB", redis.url()});  // the restart: dram starts empty
  const std::string served = v.name(chain_get(*chain, "k"));
  EXPECT_TRUE(served == acknowledged || served == "none")
      << "the restart served " << served << ", the last version acknowledged was " << acknowledged;
}

// Once Redis is back, a put lists it (at most once a second): the keys it
// holds join the chain's map, and a newer version of one of them still removes
// the old copy, now because the map names it.
TEST_F(RedisTierTest, AChainListsRedisOnceItIsBackAndStillRemovesItsOldCopies) {
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
    ASSERT_EQ(chain_put(*chain, "other", v[3], &error), XferStatus::Ok) << error;  // lists Redis
    // The new version lands in dram; only the map can tell the chain that
    // Redis holds an older one now.
    ASSERT_EQ(chain_put(*chain, "k", v[2], &error), XferStatus::Ok) << error;
    EXPECT_EQ(chain->stat("k")->tier, 0);
    EXPECT_FALSE(chain->tier(1).stat("k").has_value()) << "the old copy in Redis stayed";
  }
  auto chain = make_chain({"dram:1MiB", redis.url()});
  EXPECT_EQ(v.name(chain_get(*chain, "k")), "none");
}

// Redis goes away after the start, holding an older copy of a key. A newer
// version that cannot remove that copy is not acknowledged: a restart with
// Redis back (holding what it had) would serve the older one.
TEST_F(RedisTierTest, APutThatCannotRemoveAnOlderRedisCopyIsNotAcknowledged) {
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
    const XferStatus s = chain_put(*chain, "k", v[2], &error);
    if (s == XferStatus::Ok) acknowledged = "v2";
    EXPECT_EQ(s, XferStatus::Unavailable) << error;
    EXPECT_NE(error.find(redis.url()), std::string::npos) << error;
    EXPECT_NE(v.name(chain_get(*chain, "k")), "v2")
        << "a version that was not acknowledged is not served either";
  }
  redis.start();
  left_by_an_earlier_run();
  auto chain = make_chain({"dram:1MiB", redis.url()});
  const std::string served = v.name(chain_get(*chain, "k"));
  EXPECT_EQ(served, acknowledged) << "the restart served " << served << ", the last version acknowledged was "
                                  << acknowledged;
}

TEST_F(RedisTierTest, VictimsPutUntouchedKeysFirst) {
  {
    RedisTier earlier(opts(redis.port()));
    ASSERT_EQ(put_one(earlier, "old", random_bytes(100, 1)), XferStatus::Ok);
  }
  RedisTier t(opts(redis.port()));
  ASSERT_EQ(put_one(t, "a", random_bytes(100, 2)), XferStatus::Ok);
  ASSERT_EQ(put_one(t, "b", random_bytes(100, 3)), XferStatus::Ok);
  ASSERT_EQ(get_one(t, "a").status, XferStatus::Ok);
  EXPECT_EQ(t.lru_victims(1000), (std::vector<std::string>{"old", "b", "a"}));
  EXPECT_EQ(t.lru_victims(150), (std::vector<std::string>{"old", "b"}));
}

// dram (small) -> file (bounded) -> redis, built from --tier specs as the agent does.
TEST_F(RedisTierTest, ThreeTierChainSpillsIntoRedis) {
  test::TempDir dir;
  auto chain = make_chain({"dram:32KiB", "file:" + dir.path() + ",capacity=64KiB,qd=4", redis.url()});
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 40; ++i) {
    data.push_back(random_bytes(5000 + 100 * i, i));
    const std::string key = "c" + std::to_string(i);  // PutItem::key is a view: keep the string alive
    PutItem item = test::put_item(key, data.back());
    chain->put({&item, 1});
    ASSERT_EQ(item.status, XferStatus::Ok) << item.error;
  }
  int per_tier[3] = {0, 0, 0};
  std::vector<std::uint8_t> buf(1 << 20);
  for (int i = 0; i < 40; ++i) {
    const std::string key = "c" + std::to_string(i);
    GetItem item = test::get_item(key, {buf.data(), buf.size()});
    chain->get({&item, 1});
    ASSERT_EQ(item.status, XferStatus::Ok) << item.error;
    ASSERT_EQ(std::vector<std::uint8_t>(buf.begin(), buf.begin() + item.size), data[i]);
    ++per_tier[item.tier];
  }
  EXPECT_GT(per_tier[0], 0);
  EXPECT_GT(per_tier[1], 0);
  EXPECT_GT(per_tier[2], 0);
  const auto listed = chain->list();
  EXPECT_EQ(listed.size(), 40u);
  EXPECT_EQ(
      std::count_if(listed.begin(), listed.end(), [&](const auto& l) { return l.tier_name == redis.url(); }),
      per_tier[2]);
}

TEST_F(RedisTierTest, ChainUnderConcurrencyWithRedisLast) {
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
TEST_F(RedisTierTest, ChainKeepsWorkingWhileRedisIsDown) {
  auto chain = make_chain({"dram:16KiB", redis.url()});
  const auto a = random_bytes(6000, 1), b = random_bytes(6000, 2);
  PutItem pa = test::put_item("a", a), pb = test::put_item("b", b);
  chain->put({&pa, 1});
  chain->put({&pb, 1});
  ASSERT_EQ(pa.status, XferStatus::Ok);
  ASSERT_EQ(pb.status, XferStatus::Ok);
  redis.stop();
  const auto c = random_bytes(6000, 3);
  PutItem pc = test::put_item("c", c);
  chain->put({&pc, 1});
  EXPECT_EQ(pc.status, XferStatus::Unavailable) << pc.error;
  std::vector<std::uint8_t> buf(1 << 16);
  for (const char* k : {"a", "b"}) {
    GetItem g = test::get_item(k, {buf.data(), buf.size()});
    chain->get({&g, 1});
    EXPECT_EQ(g.status, XferStatus::Ok) << k << ": " << g.error;
    EXPECT_EQ(g.tier, 0);
  }
  GetItem gc = test::get_item("c", {buf.data(), buf.size()});
  chain->get({&gc, 1});
  EXPECT_EQ(gc.status, XferStatus::Unavailable) << "not in dram; Redis cannot say";
  redis.start();
  chain->put({&pc, 1});
  ASSERT_EQ(pc.status, XferStatus::Ok) << pc.error;
  chain->get({&gc, 1});
  EXPECT_EQ(gc.status, XferStatus::Ok) << gc.error;
  EXPECT_EQ(chain->stats().moved_objects, 1u) << "one of a, b went down to make room";
}

}  // namespace
}  // namespace ferry::xfer::store
