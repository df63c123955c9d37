// The redis-cluster tier against a real 6-node Redis Cluster (3 primaries, 3
// replicas; support/redis_cluster.h), one cluster for the suite, its tests in
// order: the plain operations, a slot moved with `redis-cli --cluster reshard`
// while puts and gets run, then a primary killed with SIGKILL while they run.
// Auth and TLS: redis_auth_tls_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "ferry/xfer/tier_registry.h"
#include "support/redis_cluster.h"
#include "xfer/store/redis/redis_cluster_tier.h"
#include "xfer/store/store_test_util.h"
#include "xfer/store/tier_chain.h"

namespace ferry::xfer::store {
namespace {

using test::get_one;
using test::put_one;
using test::random_bytes;
using test::remove_one;

// The object stored under key `k`, version `v`: its bytes tell which it is.
std::vector<std::uint8_t> object(const std::string& k, int v, std::size_t size) {
  return random_bytes(size, std::hash<std::string>{}(k)*31 + static_cast<std::uint64_t>(v));
}

// `n` keys whose slots (with the "ferry:" prefix) lie in [first, last].
std::vector<std::string> keys_in_slots(unsigned first, unsigned last, std::size_t n, const std::string& tag) {
  std::vector<std::string> out;
  for (int i = 0; out.size() < n; ++i) {
    const std::string k = tag + std::to_string(i);
    const unsigned s = key_hash_slot("ferry:" + k);
    if (s >= first && s <= last) out.push_back(k);
  }
  return out;
}

class RedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ferry::test::RedisClusterOptions o;
    o.primaries = 3;
    o.replicas = 1;
    cluster_ = new ferry::test::RedisCluster(o);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  std::unique_ptr<Tier> tier(const std::string& options = "") {
    return make_tier("redis-cluster://" + cluster_->seeds(2) + (options.empty() ? "" : "?" + options));
  }
  // A node's cluster id.
  static std::string id(int i) {
    std::string s = cluster_->cli({"-p", std::to_string(cluster_->client_port(i)), "cluster", "myid"});
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  // Another primary than `p`.
  static int other_primary(int p) {
    for (unsigned s = 0; s < 16384; s += 100)
      if (const int q = cluster_->primary_of(s); q >= 0 && q != p) return q;
    return -1;
  }
  static ferry::test::RedisCluster* cluster_;
};
ferry::test::RedisCluster* RedisClusterTest::cluster_ = nullptr;

// headers(): what the chain checks a hit above a shared tier against, for
// keys on every primary in one call; absent keys are nullopt.
TEST_F(RedisClusterTest, HeadersOfKeysOnEveryShardInOneCall) {
  auto t = tier();
  EXPECT_TRUE(t->shared());
  EXPECT_FALSE(tier("shared=0")->shared());
  std::vector<std::string> names;
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<PutItem> puts;
  for (int i = 0; i < 30; ++i) {
    names.push_back("hdr" + std::to_string(i));
    data.push_back(object(names.back(), 0, 100 + i));
  }
  for (int i = 0; i < 30; ++i) puts.push_back(test::put_item(names[i], data[i]));
  Fault fault;
  t->put(puts, fault);
  ASSERT_FALSE(fault.failed()) << fault.detail();
  std::vector<std::string_view> keys(names.begin(), names.end());
  keys.push_back("hdr-absent");
  std::vector<std::optional<ObjectMeta>> out(keys.size());
  ASSERT_EQ(t->headers(keys, out, fault), XferStatus::Ok) << fault.detail();
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(out[i]) << names[i];
    EXPECT_EQ(out[i]->size, data[i].size());
    EXPECT_EQ(out[i]->checksum, puts[i].checksum);
  }
  EXPECT_FALSE(out.back());
}

TEST_F(RedisClusterTest, PutGetStatRemoveAcrossTheShards) {
  auto t = tier();
  EXPECT_EQ(t->kind(), "redis-cluster");
  // One batch of objects over every shard, sizes from a few bytes to 1 MiB.
  const std::size_t n = 120;
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> data;
  for (std::size_t i = 0; i < n; ++i) {
    keys.push_back("basic" + std::to_string(i));
    data.push_back(object(keys.back(), 0, i % 10 == 0 ? (1 << 20) : 1 + i * 997));
  }
  std::vector<PutItem> puts;
  for (std::size_t i = 0; i < n; ++i) puts.push_back(test::put_item(keys[i], data[i]));
  Fault fault;
  t->put(puts, fault);
  EXPECT_FALSE(fault.failed()) << fault.detail();
  std::set<int> primaries;
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(puts[i].status, XferStatus::Ok) << keys[i];
    primaries.insert(cluster_->primary_of(key_hash_slot("ferry:" + keys[i])));
  }
  EXPECT_EQ(primaries.size(), 3u);  // the batch was split over all three

  std::vector<std::vector<std::uint8_t>> out(n, std::vector<std::uint8_t>(1 << 20));
  std::vector<GetItem> gets;
  for (std::size_t i = 0; i < n; ++i) gets.push_back(test::get_item(keys[i], {out[i].data(), out[i].size()}));
  t->get(gets, fault);
  EXPECT_FALSE(fault.failed()) << fault.detail();
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(gets[i].status, XferStatus::Ok) << keys[i];
    ASSERT_EQ(gets[i].size, data[i].size());
    EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), out[i].begin())) << keys[i];
  }

  // exists (stat), list, remove, and a miss.
  const auto meta = t->stat(keys[3]);
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->size, data[3].size());
  EXPECT_EQ(meta->checksum, checksum({data[3].data(), data[3].size()}));
  EXPECT_FALSE(t->stat("never-stored"));
  std::vector<std::pair<std::string, ObjectMeta>> listed;
  EXPECT_EQ(t->list(&listed, fault), XferStatus::Ok) << fault.detail();
  std::set<std::string> names;
  for (const auto& [k, m] : listed) names.insert(k);
  for (const auto& k : keys) EXPECT_TRUE(names.count(k)) << k;
  EXPECT_TRUE(remove_one(*t, keys[3]));
  EXPECT_EQ(get_one(*t, keys[3]).status, XferStatus::NotFound);
  EXPECT_FALSE(t->stat(keys[3]));
  EXPECT_FALSE(remove_one(*t, keys[3]));  // NotFound now
  EXPECT_EQ(get_one(*t, "never-stored").status, XferStatus::NotFound);

  // Hash tags: keys of one tag share a slot, and still round-trip.
  const auto tagged = object("{tag}x", 0, 4096);
  EXPECT_EQ(put_one(*t, "{tag}x", tagged), XferStatus::Ok);
  EXPECT_EQ(get_one(*t, "{tag}x").data, tagged);

  // Capacity: no maxmemory on these nodes, so nobody can say; used() counts what it put.
  EXPECT_EQ(t->capacity_now(), kUnbounded);
  EXPECT_GT(t->used(), 0u);
  auto* c = dynamic_cast<RedisClusterTier*>(t.get());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->redirects(), 0u);  // a settled cluster: the map was right
  for (const auto& k : keys) remove_one(*t, k);
}

TEST_F(RedisClusterTest, CapacityFromEveryPrimary) {
  for (std::size_t i = 0; i < cluster_->size(); ++i)
    cluster_->cli({"-p", std::to_string(cluster_->client_port(i)), "config", "set", "maxmemory", "64mb"});
  auto t = tier();
  const std::uint64_t cap = t->capacity_now();
  EXPECT_LT(cap, 3ull * (64 << 20));      // three primaries' room, less what they use
  EXPECT_GT(cap, 3ull * (64 << 20) / 2);  // and no replica counted
  for (std::size_t i = 0; i < cluster_->size(); ++i)
    cluster_->cli({"-p", std::to_string(cluster_->client_port(i)), "config", "set", "maxmemory", "0"});
}

// Puts and gets on keys in the slots being moved, from two threads, while
// redis-cli moves them: MOVED and ASK are followed, and no call fails.
TEST_F(RedisClusterTest, ReshardDuringARunOnlyRetries) {
  auto t = tier();
  const int from = cluster_->primary_of(0);
  ASSERT_GE(from, 0);
  const int to = other_primary(from);
  ASSERT_GE(to, 0);
  // The source's lowest slots move first: keys there, and keys elsewhere.
  const unsigned moved = 300;
  const unsigned first = 0;
  std::vector<std::string> keys = keys_in_slots(first, first + moved - 1, 60, "moving");
  for (const auto& k : keys_in_slots(0, 16383, 20, "staying")) keys.push_back(k);
  for (const auto& k : keys) ASSERT_EQ(put_one(*t, k, object(k, 0, 8192)), XferStatus::Ok);

  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, ops{0};
  std::mutex mu;
  std::string first_failure;
  std::map<std::string, int> version;  // per thread's own keys: no races between writers
  for (const auto& k : keys) version[k] = 0;
  const auto work = [&](std::size_t part) {
    int round = 0;
    while (!stop.load()) {
      ++round;
      for (std::size_t i = part; i < keys.size(); i += 2) {
        const std::string& k = keys[i];
        std::string err;
        const XferStatus p = put_one(*t, k, object(k, round, 8192), &err);
        const auto g = get_one(*t, k);
        ops += 2;
        if (p != XferStatus::Ok || g.status != XferStatus::Ok || g.data != object(k, round, 8192)) {
          std::lock_guard lock(mu);
          if (failures++ == 0)
            first_failure = k + ": put " + std::string(to_string(p)) + " " + err + "; get " +
                            std::string(to_string(g.status)) + " " + g.error;
        }
      }
    }
  };
  std::thread a(work, 0), b(work, 1);
  const std::string out = cluster_->cli(
      {"--cluster", "reshard", "127.0.0.1:" + std::to_string(cluster_->client_port(from)), "--cluster-from",
       id(from), "--cluster-to", id(to), "--cluster-slots", std::to_string(moved), "--cluster-yes"},
      60);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  a.join();
  b.join();
  EXPECT_NE(out.find("Moving slot"), std::string::npos) << out;
  EXPECT_EQ(cluster_->primary_of(first), to);
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(ops.load(), 0);
  auto* c = dynamic_cast<RedisClusterTier*>(t.get());
  EXPECT_GT(c->redirects(), 0u);  // it did see the slots move
  ASSERT_TRUE(cluster_->wait_ok());
}

// A slot half-way through a migration (MIGRATING on its primary, IMPORTING on
// another): a key the source does not have is asked of the target, after
// ASKING, for a put and for a get; once the slot is the target's, MOVED.
TEST_F(RedisClusterTest, AskDuringAMigrationGoesToTheTargetAfterAsking) {
  auto t = tier();
  auto* c = dynamic_cast<RedisClusterTier*>(t.get());
  const unsigned slot = 9000;
  const int from = cluster_->primary_of(slot);
  ASSERT_GE(from, 0);
  const int to = other_primary(from);
  ASSERT_GE(to, 0);
  const auto on = [&](int node, const std::vector<std::string>& args) {
    std::vector<std::string> a = {"-p", std::to_string(cluster_->client_port(node))};
    a.insert(a.end(), args.begin(), args.end());
    return cluster_->cli(a);
  };
  ASSERT_NE(on(to, {"cluster", "setslot", std::to_string(slot), "importing", id(from)}).find("OK"),
            std::string::npos);
  ASSERT_NE(on(from, {"cluster", "setslot", std::to_string(slot), "migrating", id(to)}).find("OK"),
            std::string::npos);
  const std::string k = keys_in_slots(slot, slot, 1, "asked")[0];
  const auto data = object(k, 0, 50000);
  const std::uint64_t before = c->redirects();
  std::string err;
  ASSERT_EQ(put_one(*t, k, data, &err), XferStatus::Ok) << err;
  EXPECT_NE(on(to, {"cluster", "countkeysinslot", std::to_string(slot)}).find("1"), std::string::npos);
  EXPECT_NE(on(from, {"cluster", "countkeysinslot", std::to_string(slot)}).find("0"), std::string::npos);
  auto g = get_one(*t, k);
  ASSERT_EQ(g.status, XferStatus::Ok) << g.error;
  EXPECT_EQ(g.data, data);
  EXPECT_GE(c->redirects(), before + 2);  // an ASK for each
  // The migration ends: the slot is the target's, and the tier follows (MOVED, then a new map).
  on(to, {"cluster", "setslot", std::to_string(slot), "node", id(to)});
  on(from, {"cluster", "setslot", std::to_string(slot), "node", id(to)});
  ASSERT_TRUE(cluster_->wait_ok());
  g = get_one(*t, k);
  ASSERT_EQ(g.status, XferStatus::Ok) << g.error;
  EXPECT_EQ(g.data, data);
  EXPECT_EQ(cluster_->primary_of(slot), to);
}

// wait_replicas=1: each window of puts waits for a replica (WAIT), and is
// acknowledged once one has it.
TEST_F(RedisClusterTest, PutsWaitForAReplicaWhenAsked) {
  auto t = tier("wait_replicas=1");
  std::vector<std::string> keys;
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 40; ++i) {
    keys.push_back("waited" + std::to_string(i));
    data.push_back(object(keys.back(), 0, 4096));
  }
  std::vector<PutItem> puts;
  for (std::size_t i = 0; i < keys.size(); ++i) puts.push_back(test::put_item(keys[i], data[i]));
  Fault fault;
  t->put(puts, fault);
  EXPECT_FALSE(fault.failed()) << fault.detail();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(puts[i].status, XferStatus::Ok) << keys[i];
    EXPECT_EQ(get_one(*t, keys[i]).data, data[i]);
  }
}

// SIGKILL a primary while puts and gets run. Every put that was acknowledged
// is afterwards readable with its bytes, or a miss (replication is
// asynchronous: the promoted replica may not have had it); never other bytes.
// Each key is put once, as a KV cache's content-named chunks are: an
// overwritten key could come back as its older value after a failover, unless
// puts wait for a replica (wait_replicas; redis_cluster_tier.h).
TEST_F(RedisClusterTest, PrimaryKilledDuringARunLosesNothingSilently) {
  auto t = tier("retry_ms=1500");
  const int victim = cluster_->primary_of(16383);
  ASSERT_GE(victim, 0);
  std::mutex mu;
  std::map<std::string, int> acked;  // key -> version acknowledged
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, unavailable{0}, ok_after{0};
  std::atomic<bool> killed{false};
  std::string first_wrong;
  const auto work = [&](int id) {
    for (int i = 0; !stop.load(); ++i) {
      const std::string k = "fo" + std::to_string(id) + "-" + std::to_string(i);
      const int v = 0;
      std::string err;
      const XferStatus p = put_one(*t, k, object(k, v, 16384), &err);
      if (p == XferStatus::Ok) {
        std::lock_guard lock(mu);
        acked[k] = v;
        if (killed.load()) ++ok_after;
      } else if (p == XferStatus::Unavailable) {
        ++unavailable;
      } else {
        std::lock_guard lock(mu);
        if (wrong++ == 0) first_wrong = k + ": put " + std::string(to_string(p)) + ": " + err;
      }
      // A get of the key just put: its bytes, a miss, or Unavailable; nothing else.
      const auto g = get_one(*t, k);
      if (g.status == XferStatus::Ok && p == XferStatus::Ok && g.data != object(k, v, 16384)) {
        std::lock_guard lock(mu);
        if (wrong++ == 0) first_wrong = k + ": get returned other bytes";
      } else if (g.status != XferStatus::Ok && g.status != XferStatus::NotFound &&
                 g.status != XferStatus::Unavailable) {
        std::lock_guard lock(mu);
        if (wrong++ == 0) first_wrong = k + ": get " + std::string(to_string(g.status)) + ": " + g.error;
      }
    }
  };
  std::thread a(work, 0), b(work, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  cluster_->node(victim).stop();  // SIGKILL
  killed = true;
  const bool settled = cluster_->wait_ok(20);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  a.join();
  b.join();
  if (!settled)
    for (std::size_t i = 0; i < cluster_->size(); ++i)
      if (cluster_->node(i).running()) std::printf("node %zu:\n%s\n", i, cluster_->node(i).log().c_str());
  ASSERT_TRUE(settled) << "no failover:\n" << cluster_->cli({"cluster", "nodes"});
  EXPECT_EQ(wrong.load(), 0) << first_wrong;
  EXPECT_GT(ok_after.load(), 0);  // the cluster took puts again after the failover

  // Each acknowledged put: its bytes, or a clear miss.
  int readable = 0, missing = 0;
  for (const auto& [k, v] : acked) {
    const auto g = get_one(*t, k);
    if (g.status == XferStatus::NotFound) {
      ++missing;
      continue;
    }
    ASSERT_EQ(g.status, XferStatus::Ok) << k << ": " << g.error;
    ASSERT_EQ(g.data, object(k, v, 16384)) << k << " came back with other bytes";
    ++readable;
  }
  EXPECT_GT(readable, 0);
  // The promoted replica has no replica of its own now: a put that must wait
  // for one is not acknowledged, and says why.
  auto waiting = tier("wait_replicas=1&timeout_ms=400");
  const std::string orphan = keys_in_slots(16383, 16383, 1, "orphan")[0];
  std::string err;
  EXPECT_EQ(put_one(*waiting, orphan, object(orphan, 0, 100), &err), XferStatus::Unavailable);
  EXPECT_NE(err.find("replicas wanted confirmed"), std::string::npos) << err;
  std::printf(
      "failover: %zu keys acknowledged: %d readable, %d lost to asynchronous replication; "
      "%d puts Unavailable during it\n",
      acked.size(), readable, missing, unavailable.load());
}

}  // namespace
}  // namespace ferry::xfer::store
