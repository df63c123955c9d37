// The redis tier on its own, against a real redis-server (and a fake one that
// answers every command with an error). The chain with Redis in it:
// redis_chain_test.cpp.
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
#include "xfer/store/redis/redis_info.h"
#include "xfer/store/store_test_util.h"

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

// Every object the tier lists; a test failure when it cannot list.
std::vector<std::pair<std::string, ObjectMeta>> list_all(RedisTier& t) {
  std::vector<std::pair<std::string, ObjectMeta>> out;
  Fault fault;
  EXPECT_EQ(t.list(&out, fault), XferStatus::Ok) << fault.detail();
  EXPECT_FALSE(fault.failed()) << fault.detail();
  return out;
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
  Fault fault;
  t.put(puts, fault);
  for (const auto& p : puts) ASSERT_EQ(p.status, XferStatus::Ok) << fault.detail();
  EXPECT_FALSE(fault.failed()) << fault.detail();
  for (std::size_t i = 0; i < data.size(); ++i) {
    const auto got = get_one(t, keys[i]);
    ASSERT_EQ(got.status, XferStatus::Ok) << got.error;
    EXPECT_EQ(got.data, data[i]);
    const auto meta = t.stat(keys[i]);
    ASSERT_TRUE(meta);
    EXPECT_EQ(meta->size, sizes[i]);
    EXPECT_EQ(meta->checksum, checksum({data[i].data(), data[i].size()}));
  }
  EXPECT_EQ(list_all(t).size(), data.size());
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
  Fault put_fault;
  t.put(puts, put_fault);
  EXPECT_EQ(put_fault.status(), XferStatus::InvalidDesc) << "the one bad item is raised";
  EXPECT_NE(put_fault.detail().find("empty key"), std::string::npos) << put_fault.detail();
  std::vector<std::vector<std::uint8_t>> out(kItems, std::vector<std::uint8_t>(1000));
  std::vector<GetItem> gets;
  for (int i = 0; i < kItems; ++i) gets.push_back(test::get_item(keys[i], {out[i].data(), out[i].size()}));
  Fault get_fault;
  t.get(gets, get_fault);
  for (int i = 0; i < kItems; ++i) {
    if (i == 17) {
      EXPECT_EQ(puts[i].status, XferStatus::InvalidDesc);
      EXPECT_EQ(gets[i].status, XferStatus::NotFound);
      continue;
    }
    ASSERT_EQ(gets[i].status, XferStatus::Ok) << i << ": " << get_fault.detail();
    out[i].resize(gets[i].size);
    EXPECT_EQ(out[i], data[i]);
  }
}

TEST_F(RedisTierTest, MissingRemoveTooSmallAndPrefixes) {
  RedisTier a(opts(redis.port(), "a:"));
  RedisTier b(opts(redis.port(), "b:"));
  const auto miss = get_one(a, "x");
  EXPECT_EQ(miss.status, XferStatus::NotFound);
  EXPECT_EQ(miss.error, "") << "a miss is an answer, not a fault";
  ASSERT_EQ(put_one(a, "x", random_bytes(500, 1)), XferStatus::Ok);
  EXPECT_EQ(get_one(b, "x").status, XferStatus::NotFound) << "prefixes keep tiers apart";
  const auto small = get_one(a, "x", 499);
  EXPECT_EQ(small.status, XferStatus::TooLarge);
  EXPECT_NE(small.error.find("'x' has 500 bytes"), std::string::npos) << small.error;
  EXPECT_EQ(list_all(b).size(), 0u);
  Fault fault;
  EXPECT_EQ(b.remove("x", fault), XferStatus::NotFound);
  EXPECT_FALSE(fault.failed()) << fault.detail();
  EXPECT_EQ(a.remove("x", fault), XferStatus::Ok);
  EXPECT_FALSE(fault.failed()) << fault.detail();
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
  EXPECT_EQ(list_all(t).size(), 1u) << "values that are not ours are not listed";
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
  EXPECT_EQ(error, "") << "a full tier is an answer (the chain moves on), not a fault";
}

TEST(RedisInfo, ReadsUsedAndMaxMemoryFromTheReply) {
  const auto m = parse_info_memory(
      "# Memory\r\nused_memory:1046560\r\nused_memory_human:1022.03K\r\nused_memory_rss:13606912\r\n"
      "used_memory_peak:1046560\r\nmaxmemory:67108864\r\nmaxmemory_human:64.00M\r\n"
      "maxmemory_policy:noeviction\r\n");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->used, 1046560u);
  EXPECT_EQ(m->max, 67108864u);
  const auto none = parse_info_memory("used_memory:5\nmaxmemory:0\n");  // LF alone ends a line too
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->max, 0u) << "no maxmemory";
}

TEST(RedisInfo, RefusesAReplyWithoutBothPlainFigures) {
  EXPECT_FALSE(parse_info_memory(""));
  EXPECT_FALSE(parse_info_memory("# Memory\r\nused_memory:10\r\n")) << "no maxmemory";
  EXPECT_FALSE(parse_info_memory("maxmemory:10\r\n")) << "no used_memory";
  EXPECT_FALSE(parse_info_memory("used_memory:10\r\nmaxmemory:-1\r\n"));
  EXPECT_FALSE(parse_info_memory("used_memory:1e6\r\nmaxmemory:0\r\n"));
  EXPECT_FALSE(parse_info_memory("used_memory:\r\nmaxmemory:0\r\n"));
  EXPECT_FALSE(parse_info_memory("used_memory:010\r\nmaxmemory:0\r\n")) << "not as Redis writes numbers";
  EXPECT_FALSE(parse_info_memory("used_memory:10\r\nmaxmemory:0\r")) << "a CR is a line's end only before LF";
  EXPECT_FALSE(parse_info_memory("used_memory:18446744073709551616\r\nmaxmemory:0\r\n")) << "2^64";
  EXPECT_FALSE(parse_info_memory("used_memory:1\r\nmaxmemory:0\r\nused_memory:2\r\n")) << "twice";
  EXPECT_TRUE(parse_info_memory("used_memory:18446744073709551615\r\nmaxmemory:0\r\n")) << "2^64 - 1";
}

TEST_F(RedisTierTest, CapacityIsItsBytesPlusTheRoomUnderMaxmemory) {
  RedisTier t(opts(redis.port()));
  RawRedis raw(redis.port());
  freeReplyObject(redisCommand(raw.c, "CONFIG SET maxmemory 0"));
  EXPECT_EQ(t.capacity_now(), kUnbounded) << "without maxmemory nobody can say";

  freeReplyObject(redisCommand(raw.c, "CONFIG SET maxmemory-policy noeviction"));
  freeReplyObject(redisCommand(raw.c, "CONFIG SET maxmemory 64mb"));
  constexpr std::uint64_t kMax = 64ull << 20;
  const std::uint64_t empty = t.capacity_now();
  EXPECT_LT(empty, kMax) << "Redis's own memory is not room for objects";
  EXPECT_GT(empty, kMax / 2);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(put_one(t, "k" + std::to_string(i), random_bytes(4 << 20, i)), XferStatus::Ok);
  EXPECT_EQ(t.used(), 16ull << 20);
  const std::uint64_t with_objects = t.capacity_now();
  EXPECT_GE(with_objects, t.used());
  // The objects moved room from "free" to "this tier's": the total stays,
  // less what Redis spends on them beyond their bytes (its allocator's size
  // classes, 1 MiB apart at this size, and the connections' query buffers
  // that took them: 9 MiB for these 16 MiB on Redis 7), give or take.
  EXPECT_LE(with_objects, empty + (256u << 10));
  EXPECT_GT(with_objects + t.used(), empty) << empty << " before, " << with_objects << " after";

  redis.stop();
  EXPECT_EQ(t.capacity_now(), kUnbounded) << "a Redis that cannot be asked gives no figure";
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
  EXPECT_NE(got.error.find("127.0.0.1:" + std::to_string(redis.port())), std::string::npos) << got.error;
  EXPECT_FALSE(t.stat("before"));
  {
    std::vector<std::pair<std::string, ObjectMeta>> listed;
    Fault fault;
    EXPECT_EQ(t.list(&listed, fault), XferStatus::Unavailable) << "list cannot say what Redis holds";
    EXPECT_EQ(fault.status(), XferStatus::Unavailable);
    EXPECT_NE(fault.detail().find("127.0.0.1:" + std::to_string(redis.port())), std::string::npos)
        << fault.detail();
    EXPECT_TRUE(listed.empty());
    std::string error;
    EXPECT_FALSE(test::remove_one(t, "before", &error));
    EXPECT_NE(error.find("127.0.0.1:" + std::to_string(redis.port())), std::string::npos) << error;
  }

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

}  // namespace
}  // namespace ferry::xfer::store
