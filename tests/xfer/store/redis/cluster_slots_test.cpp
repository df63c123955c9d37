// The cluster tier's pure parts: CRC16 and hash tags against Redis's documented
// values (the Cluster specification, "Keys distribution model"), and the
// readings of CLUSTER SHARDS, CLUSTER SLOTS and MOVED/ASK.
#include "xfer/store/redis/cluster_slots.h"

#include <gtest/gtest.h>

namespace ferry::xfer::store {
namespace {

RespValue bulk(std::string s) {
  RespValue v;
  v.kind = RespReader::Kind::Bulk;
  v.str = std::move(s);
  return v;
}
RespValue num(std::int64_t n) {
  RespValue v;
  v.kind = RespReader::Kind::Integer;
  v.n = n;
  return v;
}
RespValue arr(std::vector<RespValue> e) {
  RespValue v;
  v.kind = RespReader::Kind::Array;
  v.n = static_cast<std::int64_t>(e.size());
  v.elements = std::move(e);
  return v;
}
RespValue node(int port, std::string role, std::string health = "online", std::string ip = "127.0.0.1",
               int tls_port = -1) {
  std::vector<RespValue> f = {bulk("id"), bulk(std::string(40, 'e')), bulk("port"), num(port)};
  if (tls_port >= 0) f.insert(f.end(), {bulk("tls-port"), num(tls_port)});
  f.insert(f.end(), {bulk("ip"), bulk(ip), bulk("endpoint"), bulk(ip), bulk("role"), bulk(role),
                     bulk("replication-offset"), num(10), bulk("health"), bulk(health)});
  return arr(std::move(f));
}
RespValue shard(std::vector<RespValue> slots, std::vector<RespValue> nodes) {
  return arr({bulk("slots"), arr(std::move(slots)), bulk("nodes"), arr(std::move(nodes))});
}

TEST(ClusterSlots, Crc16AsRedisDocumentsIt) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(ClusterSlots, KeySlotsAndHashTags) {
  // Values as `CLUSTER KEYSLOT` answers them.
  EXPECT_EQ(key_hash_slot("foo"), 12182u);
  EXPECT_EQ(key_hash_slot("bar"), 5061u);
  EXPECT_EQ(key_hash_slot("123456789"), 0x31C3u);
  // The specification's examples: only the first {...} counts, and only when not empty.
  EXPECT_EQ(key_hash_slot("{user1000}.following"), key_hash_slot("user1000"));
  EXPECT_EQ(key_hash_slot("{user1000}.followers"), key_hash_slot("user1000"));
  EXPECT_EQ(key_hash_slot("foo{}{bar}"), crc16("foo{}{bar}") % 16384);
  EXPECT_EQ(key_hash_slot("foo{{bar}}zap"), key_hash_slot("{bar"));
  EXPECT_EQ(key_hash_slot("foo{bar}{zap}"), key_hash_slot("bar"));
  EXPECT_EQ(key_hash_slot("ferry:{llama}:chunk7"), key_hash_slot("llama"));
  EXPECT_EQ(key_hash_slot("no close {brace"), crc16("no close {brace") % 16384);
}

TEST(ClusterSlots, Redirects) {
  auto r = parse_redirect("MOVED 3999 127.0.0.1:6381", "asked");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ask);
  EXPECT_EQ(r->slot, 3999u);
  EXPECT_EQ(r->to, (ClusterAddress{"127.0.0.1", 6381}));
  r = parse_redirect("ASK 3999 :6382", "10.1.1.1");  // no host: the node that answered
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ask);
  EXPECT_EQ(r->to, (ClusterAddress{"10.1.1.1", 6382}));
  r = parse_redirect("MOVED 0 ::1:7000", "asked");  // IPv6: the port after the last colon
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.host, "::1");
  EXPECT_EQ(r->to.text(), "[::1]:7000");
  r = parse_redirect("MOVED 16383 redis-3.internal:7000", "asked");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to.host, "redis-3.internal");
  EXPECT_FALSE(parse_redirect("MOVED 16384 h:1", "a"));
  EXPECT_FALSE(parse_redirect("MOVED -1 h:1", "a"));
  EXPECT_FALSE(parse_redirect("MOVED 1 h:0", "a"));
  EXPECT_FALSE(parse_redirect("MOVED 1 h:65536", "a"));
  EXPECT_FALSE(parse_redirect("MOVED 1 h", "a"));
  EXPECT_FALSE(parse_redirect("MOVED 1", "a"));
  EXPECT_FALSE(parse_redirect("ERR wrong type", "a"));
  EXPECT_FALSE(parse_redirect("MOVEDX 1 h:1", "a"));
}

TEST(ClusterSlots, Shards) {
  const RespValue reply = arr({
      shard({num(0), num(5460)}, {node(7000, "master"), node(7003, "replica")}),
      // After a failover: the old primary failed, the promoted replica serves.
      shard({num(5461), num(10922)}, {node(7001, "master", "fail"), node(7004, "master")}),
      // Two ranges; a node that does not know its address ("?").
      shard({num(10923), num(12000), num(12001), num(16383)}, {node(7002, "master", "online", "?")}),
      shard({}, {node(7009, "master", "fail")}),  // serves nothing
  });
  std::string why;
  const auto ranges = parse_cluster_shards(reply, "10.0.0.9", false, &why);
  ASSERT_TRUE(ranges) << why;
  ASSERT_EQ(ranges->size(), 4u);
  EXPECT_EQ((*ranges)[0].first, 0u);
  EXPECT_EQ((*ranges)[0].last, 5460u);
  EXPECT_EQ((*ranges)[0].primary, (ClusterAddress{"127.0.0.1", 7000}));
  EXPECT_EQ((*ranges)[1].primary.port, 7004);
  EXPECT_EQ((*ranges)[2].primary, (ClusterAddress{"10.0.0.9", 7002}));
  EXPECT_EQ((*ranges)[3].first, 12001u);
  EXPECT_EQ((*ranges)[3].last, 16383u);

  // TLS: the tls-port; a node without one cannot be used.
  const auto tls = parse_cluster_shards(
      arr({shard({num(0), num(16383)}, {node(7000, "master", "online", "h", 7100)})}), "a", true, &why);
  ASSERT_TRUE(tls) << why;
  EXPECT_EQ((*tls)[0].primary.port, 7100);
  EXPECT_FALSE(
      parse_cluster_shards(arr({shard({num(0), num(16383)}, {node(7000, "master")})}), "a", true, &why));
  EXPECT_NE(why.find("tls-port"), std::string::npos);

  EXPECT_FALSE(parse_cluster_shards(bulk("x"), "a", false, &why));
  EXPECT_FALSE(
      parse_cluster_shards(arr({shard({num(0), num(16384)}, {node(1, "master")})}), "a", false, &why));
  EXPECT_FALSE(parse_cluster_shards(arr({shard({num(9), num(3)}, {node(1, "master")})}), "a", false, &why));
  EXPECT_FALSE(parse_cluster_shards(arr({shard({num(0), num(1)}, {node(1, "replica")})}), "a", false, &why));
  EXPECT_FALSE(parse_cluster_shards(arr({shard({num(0)}, {node(1, "master")})}), "a", false, &why));
  EXPECT_FALSE(parse_cluster_shards(arr({arr({bulk("slots")})}), "a", false, &why));
  EXPECT_FALSE(
      parse_cluster_shards(arr({shard({num(0), num(1)}, {node(70000, "master")})}), "a", false, &why));
}

TEST(ClusterSlots, Slots) {
  const RespValue reply = arr({
      arr({num(0), num(5460), arr({bulk("127.0.0.1"), num(7000), bulk("id0")}),
           arr({bulk("127.0.0.1"), num(7003)})}),
      arr({num(5461), num(16383), arr({bulk(""), num(7001)})}),
  });
  std::string why;
  const auto ranges = parse_cluster_slots(reply, "seed", &why);
  ASSERT_TRUE(ranges) << why;
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[0].primary, (ClusterAddress{"127.0.0.1", 7000}));
  EXPECT_EQ((*ranges)[1].primary, (ClusterAddress{"seed", 7001}));
  EXPECT_FALSE(parse_cluster_slots(arr({arr({num(0), num(1)})}), "a", &why));
  EXPECT_FALSE(parse_cluster_slots(arr({arr({num(0), num(1), arr({num(1), num(2)})})}), "a", &why));
  EXPECT_FALSE(parse_cluster_slots(arr({arr({num(2), num(1), arr({bulk("h"), num(2)})})}), "a", &why));
}

}  // namespace
}  // namespace ferry::xfer::store
