// Auth and TLS for both redis tiers, against real redis-servers: a password
// (requirepass) and an ACL user, read from a file or the environment; TLS with
// certificates made here with openssl, the server's name checked, a client
// certificate where the server asks for one. A wrong password, an untrusted
// certificate or a wrong name is an error when the tier is made. The TLS tests
// skip only where redis-server was built without TLS.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>

#include "ferry/core/status.h"
#include "ferry/xfer/tier_registry.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;

std::string error_of(const std::string& spec) {
  try {
    make_tier(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string write_secret(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.sub(name);
  std::ofstream(path) << text << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

// Puts objects under `n` keys and reads them back (over every shard of a cluster).
void round_trip(Tier& t, int n = 30) {
  for (int i = 0; i < n; ++i) {
    const std::string k = "secure" + std::to_string(i);
    const auto data = random_bytes(1000 + 37 * i, i);
    std::string err;
    ASSERT_EQ(put_one(t, k, data, &err), XferStatus::Ok) << err;
    const auto g = get_one(t, k);
    ASSERT_EQ(g.status, XferStatus::Ok) << g.error;
    ASSERT_EQ(g.data, data);
  }
}

TEST(RedisAuth, PasswordFromAFileOrTheEnvironment) {
  ferry::test::RedisServer redis({"--requirepass", "s3cret pass"});
  test::TempDir dir;
  const std::string url = redis.url();
  auto t = make_tier(url + "?password_file=" + write_secret(dir, "pw", "s3cret pass"));
  round_trip(*t);
  setenv("FERRY_TEST_REDIS_PW", "s3cret pass", 1);
  t = make_tier(url + "?password_env=FERRY_TEST_REDIS_PW");
  round_trip(*t);

  // Refused at start, with what went wrong.
  std::string e = error_of(url + "?password_file=" + write_secret(dir, "bad", "guess"));
  EXPECT_NE(e.find("AUTH refused"), std::string::npos) << e;
  EXPECT_NE(e.find(std::to_string(redis.port())), std::string::npos) << e;
  e = error_of(url);
  EXPECT_NE(e.find("wants a password"), std::string::npos) << e;
  e = error_of(url + "?password_env=FERRY_TEST_NO_SUCH_VARIABLE");
  EXPECT_NE(e.find("FERRY_TEST_NO_SUCH_VARIABLE"), std::string::npos) << e;
  e = error_of(url + "?password_file=" + dir.sub("missing"));
  EXPECT_NE(e.find("cannot read the password file"), std::string::npos) << e;
}

TEST(RedisAuth, AclUser) {
  ferry::test::RedisServer redis(
      {"--user", "ferry", "on", ">acl-pw", "~ferry:*", "+@all", "--user", "default", "off"});
  test::TempDir dir;
  auto t = make_tier(redis.url() + "?user=ferry&password_file=" + write_secret(dir, "pw", "acl-pw"));
  round_trip(*t);
  std::string e = error_of(redis.url() + "?user=ferry&password_file=" + write_secret(dir, "bad", "nope"));
  EXPECT_NE(e.find("AUTH as user ferry refused"), std::string::npos) << e;
  e = error_of(redis.url() + "?user=ferry");
  EXPECT_NE(e.find("has no password"), std::string::npos) << e;
  // The user may only touch its own keys: another prefix is refused per item, clearly.
  auto other = make_tier(redis.url() + "?prefix=other:&user=ferry&password_file=" + dir.sub("pw"));
  std::string err;
  EXPECT_EQ(put_one(*other, "k", random_bytes(10, 1), &err), XferStatus::IoError);
  EXPECT_NE(err.find("NOPERM"), std::string::npos) << err;
}

TEST(RedisAuth, ClusterWithAclUsers) {
  ferry::test::RedisClusterOptions o;
  o.primaries = 3;
  o.replicas = 0;
  o.server_options = {"--user", "ferry", "on", ">cl-pw", "~*", "&*", "+@all", "--user", "default", "off"};
  o.cli_options = {"--user", "ferry", "--pass", "cl-pw", "--no-auth-warning"};
  ferry::test::RedisCluster cluster(o);
  setenv("FERRY_TEST_CLUSTER_PW", "cl-pw", 1);
  auto t =
      make_tier("redis-cluster://" + cluster.seeds(1) + "?user=ferry&password_env=FERRY_TEST_CLUSTER_PW");
  round_trip(*t);
  setenv("FERRY_TEST_CLUSTER_PW", "wrong", 1);
  const std::string e =
      error_of("redis-cluster://" + cluster.seeds(1) + "?user=ferry&password_env=FERRY_TEST_CLUSTER_PW");
  EXPECT_NE(e.find("AUTH as user ferry refused"), std::string::npos) << e;
}

class RedisTls : public ::testing::Test {
 protected:
  void SetUp() override { ferry::test::make_test_certificates(dir_.path()); }
  // A server with a TLS port beside its plain one; skips where redis-server has no TLS.
  std::unique_ptr<ferry::test::RedisServer> server(std::uint16_t tls_port, bool want_client_cert) {
    try {
      return std::make_unique<ferry::test::RedisServer>(std::vector<std::string>{
          "--tls-port", std::to_string(tls_port), "--tls-cert-file", dir_.sub("server.crt"), "--tls-key-file",
          dir_.sub("server.key"), "--tls-ca-cert-file", dir_.sub("ca.crt"), "--tls-auth-clients",
          want_client_cert ? "yes" : "no"});
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      if (what.find("TLS") != std::string::npos && what.find("not") != std::string::npos) return nullptr;
      throw;
    }
  }
  std::string ca() const { return dir_.sub("ca.crt"); }
  test::TempDir dir_;
};

TEST_F(RedisTls, ServerCertificateAndNameChecked) {
  const std::uint16_t port = ferry::test::free_loopback_port();
  auto redis = server(port, false);
  if (!redis) GTEST_SKIP() << "redis-server was built without TLS";
  const std::string url = "redis://127.0.0.1:" + std::to_string(port);
  auto t = make_tier(url + "?tls_ca=" + ca());
  round_trip(*t);
  // The certificate names localhost too.
  t = make_tier("redis://localhost:" + std::to_string(port) + "?tls_ca=" + ca());
  round_trip(*t, 3);
  t = make_tier(url + "?tls_ca=" + ca() + "&tls_name=localhost");
  round_trip(*t, 3);

  std::string e = error_of(url + "?tls_ca=" + dir_.sub("other-ca.crt"));
  EXPECT_NE(e.find("not trusted"), std::string::npos) << e;
  e = error_of(url + "?tls_ca=" + ca() + "&tls_name=redis.example.com");
  EXPECT_NE(e.find("not trusted (for the name redis.example.com)"), std::string::npos) << e;
  // TLS to the plain port: the handshake fails, said at start.
  e = error_of(redis->url() + "?timeout_ms=300&tls_ca=" + ca());
  EXPECT_NE(e.find("TLS handshake failed"), std::string::npos) << e;
  e = error_of(url + "?tls_ca=" + dir_.sub("missing.crt"));
  EXPECT_NE(e.find("cannot load the CA file"), std::string::npos) << e;
}

TEST_F(RedisTls, ClientCertificateWhereTheServerWantsOne) {
  const std::uint16_t port = ferry::test::free_loopback_port();
  auto redis = server(port, true);
  if (!redis) GTEST_SKIP() << "redis-server was built without TLS";
  const std::string url = "redis://127.0.0.1:" + std::to_string(port) + "?tls_ca=" + ca();
  auto t = make_tier(url + "&tls_cert=" + dir_.sub("client.crt") + "&tls_key=" + dir_.sub("client.key"));
  round_trip(*t);
  const std::string e = error_of(url);
  EXPECT_NE(e.find("refused the TLS connection"), std::string::npos) << e;
}

TEST_F(RedisTls, ClusterOverTls) {
  ferry::test::RedisClusterOptions o;
  o.primaries = 3;
  o.replicas = 0;
  o.tls = true;
  o.tls_dir = dir_.path();
  o.cli_options = {"--tls", "--cacert", ca()};
  std::unique_ptr<ferry::test::RedisCluster> cluster;
  try {
    cluster = std::make_unique<ferry::test::RedisCluster>(o);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.find("TLS") != std::string::npos && what.find("not") != std::string::npos)
      GTEST_SKIP() << "redis-server was built without TLS";
    throw;
  }
  auto t = make_tier("redis-cluster://" + cluster->seeds(1) + "?tls_ca=" + ca());
  round_trip(*t);
  const std::string e =
      error_of("redis-cluster://" + cluster->seeds(1) + "?tls_ca=" + dir_.sub("other-ca.crt"));
  EXPECT_NE(e.find("not trusted"), std::string::npos) << e;
}

}  // namespace
}  // namespace ferry::xfer::store
