// Two hosts sharing one KV store through Ferry (issue 38, part 4): network
// namespaces A and B joined by a veth pair (10.77.0.1 and 10.77.0.2), a Redis
// Cluster in A listening on A's end of it, and a `ferry agent` on each host
// over that cluster. What one host's application stores, the other's reads
// byte-exact; an overwrite or a removal on either side is what the other sees
// next, never the older bytes. Then the same through the LMCache connector
// (python/ferry/lmcache.py, driven as tests/python/test_lmcache_contract.py
// drives it, without LMCache itself, which needs torch): a chunk stored on one
// host is a hit on the other.
//
// Skipped with the reason where this process may not make network namespaces,
// as l2fwd_live_test does: the work runs in a child that reports through its
// exit status (77: skipped).

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/ferry_processes.h"
#include "support/redis_cluster.h"
#include "xfer_test_env.h"

namespace ferry::test {
namespace {

using xfer::Agent;
using xfer::Buffer;
using xfer::XferOp;
using xfer::XferStatus;

constexpr int kSkip = 77;
constexpr const char* kAddrA = "10.77.0.1";
constexpr const char* kAddrB = "10.77.0.2";

// What the child reports: a line naming what went wrong, and exit status 1.
struct Failed {
  std::string what;
};
void check(bool ok, const std::string& what) {
  if (!ok) throw Failed{what};
}

// The two hosts: this process's network namespace (A) and a second one (B).
// Switching is per thread (setns), so whatever this thread spawns or connects
// while in B lives in B: an agent, an abstract unix socket, a TCP connection.
class Hosts {
 public:
  // Empty on success, else why there are no namespaces here (the test skips).
  std::string make() {
    if (unshare(CLONE_NEWNET) != 0)
      return std::string("network namespaces are not permitted here: unshare(CLONE_NEWNET): ") +
             std::strerror(errno);
    a_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (unshare(CLONE_NEWNET) != 0) return std::string("a second network namespace: ") + std::strerror(errno);
    b_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (a_ < 0 || b_ < 0) return "cannot open /proc/self/ns/net";
    // In B: loopback up (a new namespace has it down).
    if (std::system("ip link set lo up") != 0)
      return "ip link set lo up in a new namespace failed: no iproute2?";
    enter_a();
    // In A: the veth pair, its B end moved into B (ip opens a namespace given as a path).
    const std::string ns_b = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(b_);
    const std::string up_a = "ip link set lo up && ip link add va type veth peer name vb netns " + ns_b +
                             " && ip addr add " + kAddrA + "/24 dev va && ip link set va up";
    if (std::system(up_a.c_str()) != 0)
      return "cannot make a veth pair between two namespaces (ip link add): no CAP_NET_ADMIN, or no iproute2";
    enter_b();
    const std::string up_b = std::string("ip addr add ") + kAddrB + "/24 dev vb && ip link set vb up";
    const bool b_up = std::system(up_b.c_str()) == 0;
    enter_a();
    if (!b_up) return "cannot bring up the veth's end in the second namespace";
    return {};
  }
  ~Hosts() {
    if (a_ >= 0) close(a_);
    if (b_ >= 0) close(b_);
  }
  void enter_a() const {
    check(setns(a_, CLONE_NEWNET) == 0, std::string("setns A: ") + std::strerror(errno));
  }
  void enter_b() const {
    check(setns(b_, CLONE_NEWNET) == 0, std::string("setns B: ") + std::strerror(errno));
  }

 private:
  int a_ = -1, b_ = -1;
};

// Whether a TCP connection to host:port succeeds within timeout_s (the veth's
// carrier takes a moment to come up).
bool reachable(const char* host, std::uint16_t port, double timeout_s) {
  return wait_until(
      [&] {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        inet_pton(AF_INET, host, &a.sin_addr);
        const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        close(fd);
        return ok;
      },
      timeout_s);
}

// The shared store: a Redis Cluster of 3 primaries (no replicas: failover is
// redis_cluster_test's) in A, on A's veth address, which the nodes announce,
// so that CLUSTER SHARDS sends both hosts there. The spec of its tier.
RedisClusterOptions on_the_veth() {
  RedisClusterOptions o;
  o.primaries = 3;
  o.replicas = 0;
  o.server_options = {"--bind", "127.0.0.1", kAddrA, "--cluster-announce-ip", kAddrA};
  return o;
}
struct SharedStore {
  RedisCluster cluster{on_the_veth()};
  std::string tier() const {
    std::string seeds;
    for (std::size_t i = 0; i < cluster.size(); ++i)
      seeds += (i ? "," : "") + std::string(kAddrA) + ":" + std::to_string(cluster.client_port(i));
    return "redis-cluster://" + seeds + "?prefix=shared:";
  }
};

// One host's application: its own memory, registered with its host's agent.
struct App {
  App(const std::string& endpoint, std::size_t bytes)
      : agent(config_for(endpoint)), buf(Buffer::allocate(xfer::MemType::Dram, bytes)) {
    agent.register_memory(buf);
  }
  XferStatus write(const std::vector<std::string>& keys, const std::vector<std::uint8_t>& data) {
    buf.write(0, data.data(), data.size());
    return run_request(agent, XferOp::Write, blocks_of(buf, keys.size(), data.size() / keys.size()), keys);
  }
  // Reads keys into a zeroed buffer; the status, and the bytes in `out`.
  XferStatus read(const std::vector<std::string>& keys, std::size_t block, std::vector<std::uint8_t>* out,
                  std::vector<xfer::DescResult>* results = nullptr) {
    out->assign(keys.size() * block, 0);
    buf.write(0, out->data(), out->size());
    const XferStatus s = run_request(agent, XferOp::Read, blocks_of(buf, keys.size(), block), keys, results);
    buf.read(0, out->data(), out->size());
    return s;
  }
  Agent agent;
  Buffer buf;
};

constexpr std::size_t kBlock = 256 << 10;

// A's application stores, B's reads; overwrites and removals on either side are
// seen by the other. `tiers` come before the shared cluster tier in each agent.
void share_objects(const Hosts& hosts, const std::vector<std::string>& tiers_above) {
  SharedStore store;
  std::vector<std::string> tiers = tiers_above;
  tiers.push_back(store.tier());
  FerryAgent agent_a(tiers);
  App a(agent_a.endpoint(), 4 * kBlock);
  hosts.enter_b();
  check(reachable(kAddrA, store.cluster.client_port(0), 10), "host B cannot reach the cluster over the veth");
  FerryAgent agent_b(tiers);
  App b(agent_b.endpoint(), 4 * kBlock);  // its socket stays in B
  hosts.enter_a();

  const std::vector<std::string> keys = keys_of("kv/", 4);
  std::vector<std::uint8_t> got;
  auto expect_bytes = [&](App& app, const std::vector<std::string>& k, const std::vector<std::uint8_t>& want,
                          const std::string& what) {
    std::vector<xfer::DescResult> results;
    const XferStatus s = app.read(k, kBlock, &got, &results);
    std::string errors;
    for (const auto& r : results) errors += " [" + r.error + "]";
    check(s == XferStatus::Ok,
          what + ": the read failed (" + std::to_string(static_cast<int>(s)) + ")" + errors);
    check(got == want, what + ": other bytes than stored");
  };
  auto expect_gone = [&](App& app, const std::string& key, const std::string& what) {
    check(!app.agent.exists(std::vector<std::string>{key})[0], what + ": exists() still finds " + key);
    std::vector<xfer::DescResult> results;
    const XferStatus s = app.read({key}, kBlock, &got, &results);
    check(s == XferStatus::NotFound, what + ": a read of " + key + " was not a miss (status " +
                                         std::to_string(static_cast<int>(s)) + ")");
  };

  const auto v1 = random_bytes(4 * kBlock, 1);
  check(a.write(keys, v1) == XferStatus::Ok, "A's put failed:\n" + agent_a.log());
  expect_bytes(b, keys, v1, "B reading what A stored");
  check(b.agent.exists(keys) == std::vector<bool>(4, true), "B's exists() misses what A stored");

  const auto v2 = random_bytes(4 * kBlock, 2);
  check(a.write(keys, v2) == XferStatus::Ok, "A's overwrite failed");
  expect_bytes(b, keys, v2, "B reading after A overwrote");

  // B writes key 1 (a copy on B's side, where B has tiers above the cluster),
  // A reads it, then A overwrites it: B must not serve its own older copy.
  const std::vector<std::string> k1 = {keys[1]};
  const auto v3 = random_bytes(kBlock, 3), v4 = random_bytes(kBlock, 4);
  check(b.write(k1, v3) == XferStatus::Ok, "B's overwrite failed");
  expect_bytes(a, k1, v3, "A reading after B overwrote");
  check(a.write(k1, v4) == XferStatus::Ok, "A's second overwrite failed");
  expect_bytes(b, k1, v4, "B reading its own key after A overwrote it");

  // Removals, from either side.
  check(a.agent.remove(std::vector<std::string>{keys[0]}) == 1, "A's remove found nothing");
  expect_gone(b, keys[0], "B after A removed");
  expect_gone(a, keys[0], "A after A removed");
  check(b.agent.remove(std::vector<std::string>{keys[2]}) == 1, "B's remove found nothing");
  expect_gone(a, keys[2], "A after B removed");
  check(a.agent.remove(k1) == 1, "A's remove of B's key found nothing");
  expect_gone(b, keys[1], "B after A removed the key B had written");
  expect_bytes(b, {keys[3]}, std::vector<std::uint8_t>(v2.begin() + 3 * kBlock, v2.end()),
               "B's untouched key");
}

// Runs body in a child of its own (the namespaces are that process's); the
// parent turns its exit status into a test result.
template <typename Body>
void in_two_hosts(Body body) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    try {
      Hosts hosts;
      const std::string refused = hosts.make();
      if (!refused.empty()) {
        std::fprintf(stderr, "%s\n", refused.c_str());
        _exit(kSkip);
      }
      rc = body(hosts);
    } catch (const Failed& f) {
      std::fprintf(stderr, "two hosts: %s\n", f.what.c_str());
      rc = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "two hosts: %s\n", e.what());
      rc = 1;
    }
    std::fflush(stderr);
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the namespaces' child died by a signal";
  if (WEXITSTATUS(status) == kSkip)
    GTEST_SKIP() << "no two network namespaces with a veth pair here (see the log above)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the log above";
}

TEST(TwoHosts, AgentsOverOneRedisClusterSeeEachOthersPutsOverwritesAndRemovals) {
  in_two_hosts([](const Hosts& hosts) {
    share_objects(hosts, {});
    return 0;
  });
}

// What issue 38 asks for: each host's own dram tier over the shared cluster.
// The cluster tier is shared (tier.h, shared()), so each chain writes its puts
// through and checks every dram hit against the cluster's header of the key.
TEST(TwoHosts, AgentsWithTheirOwnDramOverOneRedisClusterNeverServeStaleData) {
  in_two_hosts([](const Hosts& hosts) {
    share_objects(hosts, {"dram:64MiB"});
    return 0;
  });
}

// The LMCache connector on each host: a chunk stored by one is a hit, with
// the same bytes, for the other, and gone for both once one deletes it.
TEST(TwoHosts, LmcacheConnectorsOnTwoHostsShareChunks) {
  const std::string python = FERRY_TEST_PYTHON, script = FERRY_TEST_LMCACHE_PEER;
  if (access(python.c_str(), X_OK) != 0 ||
      Subprocess::spawn({python, "-c", "import ferry.lmcache"}).wait(30).value_or(1) != 0)
    GTEST_SKIP() << "no Python with the ferry package at " << python << " (make python installs it)";
  in_two_hosts([&](const Hosts& hosts) {
    SharedStore store;
    FerryAgent agent_a({store.tier()});
    hosts.enter_b();
    check(reachable(kAddrA, store.cluster.client_port(0), 10),
          "host B cannot reach the cluster over the veth");
    FerryAgent agent_b({store.tier()});
    hosts.enter_a();
    // One connector at a time, each on its host: the peer script's steps.
    auto peer = [&](bool on_b, const std::string& endpoint, const std::string& step) {
      if (on_b) hosts.enter_b();
      Subprocess p = Subprocess::spawn({python, script, endpoint, step});
      if (on_b) hosts.enter_a();
      const auto rc = p.wait(60);
      if (!rc) p.kill();
      check(rc == 0,
            std::string("the connector on host ") + (on_b ? "B" : "A") + ": step '" + step + "' failed");
    };
    peer(false, agent_a.endpoint(), "store");
    peer(true, agent_b.endpoint(), "hit");
    peer(true, agent_b.endpoint(), "store-other");
    peer(false, agent_a.endpoint(), "hit-other");
    peer(false, agent_a.endpoint(), "delete");
    peer(true, agent_b.endpoint(), "miss");
    return 0;
  });
}

}  // namespace
}  // namespace ferry::test
