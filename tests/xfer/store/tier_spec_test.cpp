#include "ferry/xfer/tier_registry.h"

#include <gtest/gtest.h>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier_spec.h"
#include "xfer/store/file/file_tier_spec.h"
#include "xfer/store/redis/redis_tier_spec.h"
#include "xfer/store/sizes.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {
namespace {

// The error a spec gets from its kind's parser (nothing is opened or created),
// or from the registry for a spec of no kind.
std::string error_of(std::string_view spec) {
  const auto starts = [&](std::string_view p) { return spec.substr(0, p.size()) == p; };
  try {
    if (starts("dram:"))
      parse_dram_tier_spec(spec);
    else if (starts("file:"))
      parse_file_tier_spec(spec);
    else if (starts("redis:"))
      parse_redis_tier_spec(spec);
    else if (starts("redis-cluster:"))
      parse_redis_cluster_tier_spec(spec);
    else
      make_tier(spec);
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
  EXPECT_EQ(parse_dram_tier_spec("dram:8GiB"), 8ull << 30);
  EXPECT_NE(error_of("dram:"), "");
  EXPECT_NE(error_of("dram:0"), "");
  EXPECT_NE(error_of("dram:lots").find("'lots'"), std::string::npos);
}

TEST(TierSpec, File) {
  auto t = parse_file_tier_spec("file:/var/lib/ferry");
  EXPECT_EQ(t.threads, 2u);  // a buffered get call is shared by the caller and one helper
  EXPECT_EQ(t.dir, "/var/lib/ferry");
  EXPECT_FALSE(t.direct);
  EXPECT_FALSE(t.fsync);
  EXPECT_EQ(t.capacity, kUnbounded);
  EXPECT_EQ(t.queue_depth, 32u);
  EXPECT_EQ(t.pack_threshold, 1u << 20);  // objects up to 1 MiB go into packs by default
  t = parse_file_tier_spec("file:/mnt/kv,direct,capacity=10GiB,qd=64,fsync");
  EXPECT_TRUE(t.direct);
  EXPECT_TRUE(t.fsync);
  EXPECT_EQ(t.capacity, 10ull << 30);
  EXPECT_EQ(t.queue_depth, 64u);
  EXPECT_EQ(t.spec, "file:/mnt/kv,direct,capacity=10GiB,qd=64,fsync");
  EXPECT_NE(error_of("file:"), "");
  EXPECT_NE(error_of("file:/x,qd=0").find("outside 1..4096"), std::string::npos);
  EXPECT_NE(error_of("file:/x,qd=many").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of("file:/x,turbo").find("unknown file tier option 'turbo'"), std::string::npos);
  EXPECT_NE(error_of("file:/x,capacity=").find("capacity"), std::string::npos);
  EXPECT_EQ(parse_file_tier_spec("file:/x,pack=1MiB").pack_threshold, 1u << 20);
  EXPECT_EQ(parse_file_tier_spec("file:/x,pack=0").pack_threshold, 0u);
  EXPECT_NE(error_of("file:/x,pack=1GiB").find("larger than a pack file"), std::string::npos);
  EXPECT_EQ(parse_file_tier_spec("file:/x,threads=1").threads, 1u);
  EXPECT_NE(error_of("file:/x,threads=0").find("outside 1..64"), std::string::npos);
  EXPECT_EQ(parse_file_tier_spec("file:/x").cores, 0u) << "the machine's";
  EXPECT_EQ(parse_file_tier_spec("file:/x,threads=8,cores=12").cores, 12u);
  EXPECT_NE(error_of("file:/x,cores=0").find("outside 1..4096"), std::string::npos);
  EXPECT_NE(error_of("file:/x,cores=some").find("'some' is not a whole number"), std::string::npos);
  EXPECT_NE(error_of("file:/x,pack=big").find("'big'"), std::string::npos);
  EXPECT_NE(error_of("file:/x,packs=1").find("pack=<size>"), std::string::npos);
}

TEST(TierSpec, Redis) {
  auto t = parse_redis_tier_spec("redis://127.0.0.1:6379");
  EXPECT_EQ(t.endpoint.host, "127.0.0.1");
  EXPECT_EQ(t.endpoint.port, 6379);
  EXPECT_EQ(t.endpoint.db, 0);
  EXPECT_EQ(t.prefix, "ferry:");
  t = parse_redis_tier_spec("redis://cache:6380/2?prefix=llama:&connections=8&timeout_ms=500");
  EXPECT_EQ(t.endpoint.host, "cache");
  EXPECT_EQ(t.endpoint.port, 6380);
  EXPECT_EQ(t.endpoint.db, 2);
  EXPECT_EQ(t.prefix, "llama:");
  EXPECT_EQ(t.connections, 8u);
  EXPECT_EQ(t.endpoint.timeout_ms, 500);
  t = parse_redis_tier_spec("redis://[::1]:7000");
  EXPECT_EQ(t.endpoint.host, "::1");
  EXPECT_EQ(t.endpoint.port, 7000);
  t = parse_redis_tier_spec("redis://");
  EXPECT_EQ(t.endpoint.port, 6379);
  EXPECT_NE(error_of("redis://h:99999").find("port 99999"), std::string::npos);
  EXPECT_NE(error_of("redis://h:1?colour=red").find("unknown redis parameter 'colour'"), std::string::npos);
  EXPECT_NE(error_of("redis://user:pw@h:1").find("passwords"), std::string::npos);
}

TEST(TierSpec, RedisAuthAndTls) {
  auto t = parse_redis_tier_spec(
      "redis://cache:6380?user=ferry&password_file=/etc/pw&tls_ca=/etc/ca.pem&tls_cert=/c.pem&tls_key=/k.pem&"
      "tls_name=redis.internal");
  EXPECT_EQ(t.auth.user, "ferry");
  EXPECT_EQ(t.auth.password_file, "/etc/pw");
  EXPECT_TRUE(t.tls.enabled);
  EXPECT_EQ(t.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(t.tls.cert_file, "/c.pem");
  EXPECT_EQ(t.tls.key_file, "/k.pem");
  EXPECT_EQ(t.tls.name, "redis.internal");
  t = parse_redis_tier_spec("redis://h:1?password_env=REDIS_PW&tls=yes");
  EXPECT_EQ(t.auth.password_env, "REDIS_PW");
  EXPECT_TRUE(t.tls.enabled);
  EXPECT_TRUE(t.tls.ca_file.empty());
  // Never a password on the command line.
  EXPECT_NE(error_of("redis://h:1?password=hunter2").find("password_file or password_env"),
            std::string::npos);
  EXPECT_NE(error_of("redis://h:1?tls=maybe").find("not yes or no"), std::string::npos);
  EXPECT_NE(error_of("redis://h:1?tls_ca=").find("tls_ca needs a value"), std::string::npos);
}

// A single Redis is one agent's unless said otherwise; a cluster is shared
// unless said otherwise (tier.h, shared()).
TEST(TierSpec, SharedRedis) {
  EXPECT_FALSE(parse_redis_tier_spec("redis://h:1").shared);
  EXPECT_TRUE(parse_redis_tier_spec("redis://h:1?shared=1").shared);
  EXPECT_TRUE(parse_redis_cluster_tier_spec("redis-cluster://h:1").shared);
  EXPECT_FALSE(parse_redis_cluster_tier_spec("redis-cluster://h:1?shared=no").shared);
  EXPECT_NE(error_of("redis://h:1?shared=maybe").find("is not yes or no"), std::string::npos);
}

TEST(TierSpec, RedisCluster) {
  auto t = parse_redis_cluster_tier_spec("redis-cluster://10.0.0.1:7000,10.0.0.2,[::1]:7002");
  ASSERT_EQ(t.seeds.size(), 3u);
  EXPECT_EQ(t.seeds[0].text(), "10.0.0.1:7000");
  EXPECT_EQ(t.seeds[1].text(), "10.0.0.2:6379");
  EXPECT_EQ(t.seeds[2].text(), "[::1]:7002");
  EXPECT_EQ(t.prefix, "ferry:");
  t = parse_redis_cluster_tier_spec(
      "redis-cluster://"
      "h:7000?prefix=kv:&connections=2&timeout_ms=300&attempts=4&retry_ms=100&wait_replicas=1&"
      "user=u&password_env=PW&tls_ca=/ca");
  EXPECT_EQ(t.prefix, "kv:");
  EXPECT_EQ(t.connections, 2u);
  EXPECT_EQ(t.timeout_ms, 300);
  EXPECT_EQ(t.attempts, 4u);
  EXPECT_EQ(t.retry_ms, 100);
  EXPECT_EQ(t.wait_replicas, 1u);
  EXPECT_EQ(t.auth.user, "u");
  EXPECT_EQ(t.auth.password_env, "PW");
  EXPECT_TRUE(t.tls.enabled);
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

TEST(TierRegistry, BuiltInKindsComeFirstInOrder) {
  const auto kinds = registered_tiers();
  ASSERT_GE(kinds.size(), 4u);
  EXPECT_EQ(kinds[0].scheme, "dram");
  EXPECT_EQ(kinds[1].scheme, "file");
  EXPECT_EQ(kinds[2].scheme, "redis");
  EXPECT_EQ(kinds[3].scheme, "redis-cluster");
  for (const auto& k : kinds) EXPECT_EQ(k.usage.substr(0, k.scheme.size() + 1), k.scheme + ":") << k.usage;
}

TEST(TierRegistry, RefusesBadOrTakenSchemes) {
  const auto make = [](std::string_view) { return make_tier("dram:1MiB"); };
  EXPECT_THROW(register_tier({"dram", "dram:<anything>", make}), Error) << "a built-in is never replaced";
  EXPECT_THROW(register_tier({"", "x", make}), Error);
  EXPECT_THROW(register_tier({"Big", "Big:", make}), Error);
  EXPECT_THROW(register_tier({"9lives", "9lives:", make}), Error);
  EXPECT_THROW(register_tier({"has space", "x", make}), Error);
  EXPECT_THROW(register_tier({"nousage", "", make}), Error);
  EXPECT_THROW(register_tier({"nomake", "nomake:", {}}), Error);
  register_tier({"test-alias", "test-alias:<size>", [](std::string_view spec) {
                   return make_tier("dram:" + std::string(spec.substr(spec.find(':') + 1)));
                 }});
  EXPECT_THROW(register_tier({"test-alias", "test-alias:", make}), Error);
  auto t = make_tier("test-alias:64KiB");
  EXPECT_EQ(t->kind(), "dram");
  EXPECT_EQ(t->capacity(), 64u << 10);
  // An unknown kind's error names every registered form, this one's too.
  EXPECT_NE(error_of("s3://x").find("test-alias:<size>"), std::string::npos) << error_of("s3://x");
  register_tier({"test-null", "test-null:", [](std::string_view) { return std::unique_ptr<Tier>(); }});
  EXPECT_NE(error_of("test-null:").find("made no tier"), std::string::npos);
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
