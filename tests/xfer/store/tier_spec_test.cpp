#include "xfer/store/tier_spec.h"

#include <gtest/gtest.h>

#include "ferry/core/status.h"
#include "xfer/store/sizes.h"
#include "xfer/store/store_test_util.h"

namespace ferry::xfer::store {
namespace {

std::string error_of(std::string_view spec) {
  try {
    parse_tier_spec(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Sizes, ParseAndFormat) {
  EXPECT_EQ(parse_size("4096", "x"), 4096u);
  EXPECT_EQ(parse_size("64K", "x"), 64u << 10);
  EXPECT_EQ(parse_size("64KiB", "x"), 64u << 10);
  EXPECT_EQ(parse_size("8GiB", "x"), 8ull << 30);
  EXPECT_EQ(parse_size("8g", "x"), 8ull << 30);
  EXPECT_EQ(parse_size("10GB", "x"), 10'000'000'000ull);
  EXPECT_EQ(parse_size("1.5MiB", "x"), 3u << 19);
  EXPECT_EQ(parse_size("2T", "x"), 2ull << 40);
  EXPECT_THROW(parse_size("", "x"), Error);
  EXPECT_THROW(parse_size("GiB", "x"), Error);
  EXPECT_THROW(parse_size("12XB", "x"), Error);
  EXPECT_THROW(parse_size("99999999999999999999", "x"), Error);
  EXPECT_THROW(parse_size("20000000000G", "x"), Error);
  EXPECT_THROW(parse_size("0.3B", "x"), Error);
  EXPECT_EQ(format_size(8ull << 30), "8GiB");
  EXPECT_EQ(format_size(1536), "1.5KiB");
  EXPECT_EQ(format_size(100), "100B");
}

TEST(TierSpec, Dram) {
  const auto t = parse_tier_spec("dram:8GiB");
  EXPECT_EQ(t.kind, TierSpec::Kind::Dram);
  EXPECT_EQ(t.dram_capacity, 8ull << 30);
  EXPECT_NE(error_of("dram:"), "");
  EXPECT_NE(error_of("dram:0"), "");
  EXPECT_NE(error_of("dram:lots").find("'lots'"), std::string::npos);
}

TEST(TierSpec, File) {
  auto t = parse_tier_spec("file:/var/lib/ferry");
  EXPECT_EQ(t.file.threads, 2u);  // a buffered get call is shared by the caller and one helper
  EXPECT_EQ(t.kind, TierSpec::Kind::File);
  EXPECT_EQ(t.file.dir, "/var/lib/ferry");
  EXPECT_FALSE(t.file.direct);
  EXPECT_FALSE(t.file.fsync);
  EXPECT_EQ(t.file.capacity, kUnbounded);
  EXPECT_EQ(t.file.queue_depth, 32u);
  EXPECT_EQ(t.file.pack_threshold, 1u << 20);  // objects up to 1 MiB go into packs by default
  t = parse_tier_spec("file:/mnt/kv,direct,capacity=10GiB,qd=64,fsync");
  EXPECT_TRUE(t.file.direct);
  EXPECT_TRUE(t.file.fsync);
  EXPECT_EQ(t.file.capacity, 10ull << 30);
  EXPECT_EQ(t.file.queue_depth, 64u);
  EXPECT_EQ(t.file.spec, "file:/mnt/kv,direct,capacity=10GiB,qd=64,fsync");
  EXPECT_NE(error_of("file:"), "");
  EXPECT_NE(error_of("file:/x,qd=0").find("outside 1..4096"), std::string::npos);
  EXPECT_NE(error_of("file:/x,qd=many").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of("file:/x,turbo").find("unknown file tier option 'turbo'"), std::string::npos);
  EXPECT_NE(error_of("file:/x,capacity=").find("capacity"), std::string::npos);
  EXPECT_EQ(parse_tier_spec("file:/x,pack=1MiB").file.pack_threshold, 1u << 20);
  EXPECT_EQ(parse_tier_spec("file:/x,pack=0").file.pack_threshold, 0u);
  EXPECT_NE(error_of("file:/x,pack=1GiB").find("larger than a pack file"), std::string::npos);
  EXPECT_EQ(parse_tier_spec("file:/x,threads=1").file.threads, 1u);
  EXPECT_NE(error_of("file:/x,threads=0").find("outside 1..64"), std::string::npos);
  EXPECT_EQ(parse_tier_spec("file:/x").file.cores, 0u) << "the machine's";
  EXPECT_EQ(parse_tier_spec("file:/x,threads=8,cores=12").file.cores, 12u);
  EXPECT_NE(error_of("file:/x,cores=0").find("outside 1..4096"), std::string::npos);
  EXPECT_NE(error_of("file:/x,cores=some").find("'some' is not a whole number"), std::string::npos);
  EXPECT_NE(error_of("file:/x,pack=big").find("'big'"), std::string::npos);
  EXPECT_NE(error_of("file:/x,packs=1").find("pack=<size>"), std::string::npos);
}

TEST(TierSpec, Redis) {
  auto t = parse_tier_spec("redis://127.0.0.1:6379");
  EXPECT_EQ(t.kind, TierSpec::Kind::Redis);
  EXPECT_EQ(t.redis.endpoint.host, "127.0.0.1");
  EXPECT_EQ(t.redis.endpoint.port, 6379);
  EXPECT_EQ(t.redis.endpoint.db, 0);
  EXPECT_EQ(t.redis.prefix, "ferry:");
  t = parse_tier_spec("redis://cache:6380/2?prefix=llama:&connections=8&timeout_ms=500");
  EXPECT_EQ(t.redis.endpoint.host, "cache");
  EXPECT_EQ(t.redis.endpoint.port, 6380);
  EXPECT_EQ(t.redis.endpoint.db, 2);
  EXPECT_EQ(t.redis.prefix, "llama:");
  EXPECT_EQ(t.redis.connections, 8u);
  EXPECT_EQ(t.redis.endpoint.timeout_ms, 500);
  t = parse_tier_spec("redis://[::1]:7000");
  EXPECT_EQ(t.redis.endpoint.host, "::1");
  EXPECT_EQ(t.redis.endpoint.port, 7000);
  t = parse_tier_spec("redis://");
  EXPECT_EQ(t.redis.endpoint.port, 6379);
  EXPECT_NE(error_of("redis://h:99999").find("port 99999"), std::string::npos);
  EXPECT_NE(error_of("redis://h:1?colour=red").find("unknown redis parameter 'colour'"), std::string::npos);
  EXPECT_NE(error_of("redis://user:pw@h:1").find("passwords"), std::string::npos);
}

TEST(TierSpec, RedisAuthAndTls) {
  auto t = parse_tier_spec(
      "redis://cache:6380?user=ferry&password_file=/etc/pw&tls_ca=/etc/ca.pem&tls_cert=/c.pem&tls_key=/k.pem&"
      "tls_name=redis.internal");
  EXPECT_EQ(t.redis.auth.user, "ferry");
  EXPECT_EQ(t.redis.auth.password_file, "/etc/pw");
  EXPECT_TRUE(t.redis.tls.enabled);
  EXPECT_EQ(t.redis.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(t.redis.tls.cert_file, "/c.pem");
  EXPECT_EQ(t.redis.tls.key_file, "/k.pem");
  EXPECT_EQ(t.redis.tls.name, "redis.internal");
  t = parse_tier_spec("redis://h:1?password_env=REDIS_PW&tls=yes");
  EXPECT_EQ(t.redis.auth.password_env, "REDIS_PW");
  EXPECT_TRUE(t.redis.tls.enabled);
  EXPECT_TRUE(t.redis.tls.ca_file.empty());
  // Never a password on the command line.
  EXPECT_NE(error_of("redis://h:1?password=hunter2").find("password_file or password_env"),
            std::string::npos);
  EXPECT_NE(error_of("redis://h:1?tls=maybe").find("not yes or no"), std::string::npos);
  EXPECT_NE(error_of("redis://h:1?tls_ca=").find("tls_ca needs a value"), std::string::npos);
}

// A single Redis is one agent's unless said otherwise; a cluster is shared
// unless said otherwise (tier.h, shared()).
TEST(TierSpec, SharedRedis) {
  EXPECT_FALSE(parse_tier_spec("redis://h:1").redis.shared);
  EXPECT_TRUE(parse_tier_spec("redis://h:1?shared=1").redis.shared);
  EXPECT_TRUE(parse_tier_spec("redis-cluster://h:1").redis_cluster.shared);
  EXPECT_FALSE(parse_tier_spec("redis-cluster://h:1?shared=no").redis_cluster.shared);
  EXPECT_NE(error_of("redis://h:1?shared=maybe").find("is not yes or no"), std::string::npos);
}

TEST(TierSpec, RedisCluster) {
  auto t = parse_tier_spec("redis-cluster://10.0.0.1:7000,10.0.0.2,[::1]:7002");
  EXPECT_EQ(t.kind, TierSpec::Kind::RedisCluster);
  ASSERT_EQ(t.redis_cluster.seeds.size(), 3u);
  EXPECT_EQ(t.redis_cluster.seeds[0].text(), "10.0.0.1:7000");
  EXPECT_EQ(t.redis_cluster.seeds[1].text(), "10.0.0.2:6379");
  EXPECT_EQ(t.redis_cluster.seeds[2].text(), "[::1]:7002");
  EXPECT_EQ(t.redis_cluster.prefix, "ferry:");
  t = parse_tier_spec(
      "redis-cluster://"
      "h:7000?prefix=kv:&connections=2&timeout_ms=300&attempts=4&retry_ms=100&wait_replicas=1&"
      "user=u&password_env=PW&tls_ca=/ca");
  EXPECT_EQ(t.redis_cluster.prefix, "kv:");
  EXPECT_EQ(t.redis_cluster.connections, 2u);
  EXPECT_EQ(t.redis_cluster.timeout_ms, 300);
  EXPECT_EQ(t.redis_cluster.attempts, 4u);
  EXPECT_EQ(t.redis_cluster.retry_ms, 100);
  EXPECT_EQ(t.redis_cluster.wait_replicas, 1u);
  EXPECT_EQ(t.redis_cluster.auth.user, "u");
  EXPECT_EQ(t.redis_cluster.auth.password_env, "PW");
  EXPECT_TRUE(t.redis_cluster.tls.enabled);
  EXPECT_NE(error_of("redis-cluster://h:1/2").find("no databases"), std::string::npos);
  EXPECT_NE(error_of("redis-cluster://h:1,,h:2").find("empty node"), std::string::npos);
  EXPECT_NE(error_of("redis-cluster://h:1?attempts=0").find("attempts 0 is outside"), std::string::npos);
  EXPECT_NE(error_of("redis-cluster://h:1?colour=red").find("unknown redis-cluster parameter 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of("redis-cluster://u:pw@h:1").find("passwords"), std::string::npos);
}

TEST(TierSpec, UnknownKindsSayWhatIsAccepted) {
  const std::string e = error_of("s3://bucket");
  EXPECT_NE(e.find("unknown tier kind 's3'"), std::string::npos) << e;
  EXPECT_NE(e.find("dram:<size>"), std::string::npos) << e;
  EXPECT_NE(error_of("/just/a/path").find("no tier kind"), std::string::npos);
}

TEST(TierSpec, MakeTierBuildsEachKind) {
  test::TempDir dir;
  auto d = make_tier("dram:1MiB");
  EXPECT_EQ(d->kind(), "dram");
  EXPECT_EQ(d->describe(), "dram:1MiB");
  EXPECT_EQ(d->capacity(), 1u << 20);
  auto f = make_tier("file:" + dir.sub("f") + ",capacity=1M,qd=4");
  EXPECT_EQ(f->kind(), "file");
  EXPECT_EQ(f->capacity(), 1u << 20);
  auto r = make_tier("redis://127.0.0.1:1");  // nothing listens: logged, and tried again when used
  EXPECT_EQ(r->kind(), "redis");
  EXPECT_EQ(r->capacity(), kUnbounded);
  auto c = make_tier("redis-cluster://127.0.0.1:1?attempts=1");  // no slot map yet: asked again when used
  EXPECT_EQ(c->kind(), "redis-cluster");
  EXPECT_EQ(c->capacity(), kUnbounded);
  auto chain = make_chain({"dram:1MiB", "file:" + dir.sub("g")});
  EXPECT_EQ(chain->size(), 2u);
  EXPECT_THROW(make_chain({}), Error);
}

}  // namespace
}  // namespace ferry::xfer::store
