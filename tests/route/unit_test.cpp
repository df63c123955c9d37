// Unit tests of the route's parts that need no MPI job: options, the run
// format, the routing arithmetic, the quiescence rule, the mailbox ABI, and
// the router with its application ports in one thread (aggregation into
// chunks, holding runs for an app that falls behind, the barrier handshake).

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/route/options.h"
#include "route/client_port.h"
#include "route/mailbox.h"
#include "route/quiescence.h"
#include "route/router.h"
#include "route/run.h"
#include "route/topology.h"

namespace ferry::route::detail {
namespace {

TEST(RouteOptions, FlagsOverrideAndAreStripped) {
  Options o;
  std::vector<std::string> args = {"app",  "--route-mode=process",   "--updates", "5", "--route-buffer-bytes",
                                   "4096", "--route-app-cpus=0-2,5", "x"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  char** p = argv.data();
  o.apply_args(&argc, &p);
  EXPECT_EQ(o.mode, Mode::Process);
  EXPECT_EQ(o.buffer_bytes, 4096u);
  EXPECT_EQ(o.app_cpus, (std::vector<int>{0, 1, 2, 5}));
  ASSERT_EQ(argc, 4);
  EXPECT_STREQ(p[1], "--updates");
  EXPECT_STREQ(p[2], "5");
  EXPECT_STREQ(p[3], "x");
}

TEST(RouteOptions, RouterThreadsTakeAutoOrOneToEight) {
  Options o;
  o.mode = Mode::Process;
  o.set("router_threads", "auto");
  EXPECT_EQ(o.router_threads, 0u);  // the Runtime resolves it from the node sizes
  EXPECT_NO_THROW(o.validate());
  EXPECT_NE(o.describe().find("router_threads=auto"), std::string::npos);
  o.set("router_threads", "8");
  EXPECT_NO_THROW(o.validate());
  o.set("router_threads", "9");
  EXPECT_THROW(o.validate(), Error);
}

TEST(RouteOptions, EnvironmentIsRead) {
  setenv("FERRY_ROUTE_MODE", "thread", 1);
  setenv("FERRY_ROUTE_FLUSH_US", "7", 1);
  const Options o = Options::from_env();
  unsetenv("FERRY_ROUTE_MODE");
  unsetenv("FERRY_ROUTE_FLUSH_US");
  EXPECT_EQ(o.mode, Mode::Thread);
  EXPECT_EQ(o.flush_us, 7u);
  setenv("FERRY_ROUTE_BUFFER_BYTES", "lots", 1);
  EXPECT_THROW(Options::from_env(), Error);
  unsetenv("FERRY_ROUTE_BUFFER_BYTES");
}

TEST(RouteOptions, BadValuesAreRefusedWithTheirName) {
  Options o;
  EXPECT_THROW(o.set("mode", "dpu"), Error);
  EXPECT_THROW(o.set("no_such_option", "1"), Error);
  o.ring_slots = 3;
  try {
    o.validate();
    FAIL() << "ring_slots 3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ring_slots"), std::string::npos);
  }
  Options big;
  big.ring_slot_bytes = big.buffer_bytes * 2;
  EXPECT_NO_THROW(big.validate());  // inline mode has no rings
  big.mode = Mode::Process;
  EXPECT_THROW(big.validate(), Error);
  EXPECT_EQ(Options{}.max_payload(), Options{}.buffer_bytes - kRunHeaderBytes);
}

TEST(RouteRun, MessagesWithOneKeyShareARunAndAnotherKeyStartsOne) {
  alignas(8) std::uint8_t buf[256] = {};
  std::uint32_t used = 0;
  RunCursor cursor;
  auto put = [&](std::uint32_t dest, std::uint16_t handler, const void* p, std::uint32_t len) {
    std::uint8_t* at = cursor.append(buf, &used, sizeof buf, dest, 1, handler, len);
    if (at != nullptr) std::memcpy(at, p, len);
    return at != nullptr;
  };
  const std::uint64_t a = 11, b = 22, c = 33;
  ASSERT_TRUE(put(3, 9, &a, 8));
  ASSERT_TRUE(put(3, 9, &b, 8));
  EXPECT_EQ(used, run_bytes(8, 2));    // one header for both: 16 + 16
  ASSERT_TRUE(put(3, 9, "hello", 5));  // another size: a new run
  ASSERT_TRUE(put(4, 9, &c, 8));       // another destination: a new run
  EXPECT_EQ(used % 8, 0u);

  RunHeader h;
  std::size_t off = 0;
  std::uint32_t rb = read_run(buf, used, off, &h);
  ASSERT_EQ(rb, 32u);
  EXPECT_EQ(h.dest, 3u);
  EXPECT_EQ(h.src, 1u);
  EXPECT_EQ(h.handler, 9u);
  EXPECT_EQ(h.len(), 8u);
  EXPECT_EQ(h.count, 2u);
  std::uint64_t got[2];
  std::memcpy(got, buf + off + kRunHeaderBytes, 16);
  EXPECT_EQ(got[0], a);
  EXPECT_EQ(got[1], b);
  off += rb;
  rb = read_run(buf, used, off, &h);
  ASSERT_EQ(rb, 24u);  // 16 + 5 padded to 8
  EXPECT_EQ(h.len(), 5u);
  EXPECT_EQ(std::memcmp(buf + off + kRunHeaderBytes, "hello", 5), 0);
  off += rb;
  rb = read_run(buf, used, off, &h);
  ASSERT_EQ(rb, 24u);
  EXPECT_EQ(h.dest, 4u);
  EXPECT_EQ(off + rb, used);
}

TEST(RouteRun, AFullBufferRefusesAndTheRunStaysWhole) {
  alignas(8) std::uint8_t buf[64] = {};
  std::uint32_t used = 0;
  RunCursor cursor;
  int stored = 0;
  const std::uint32_t v = 7;
  while (std::uint8_t* at = cursor.append(buf, &used, sizeof buf, 0, 0, 1, sizeof v)) {
    std::memcpy(at, &v, sizeof v);
    ++stored;
  }
  EXPECT_EQ(stored, 12);  // (64 - 16) / 4
  RunHeader h;
  EXPECT_EQ(read_run(buf, used, 0, &h), 64u);
  EXPECT_EQ(h.count, 12u);
}

TEST(RouteRun, RunsAreMergedAndSplitByRoom) {
  alignas(8) std::uint8_t buf[96] = {};
  std::uint32_t used = 0;
  RunCursor cursor;
  RunHeader h{};
  h.dest = 2;
  h.src = 5;
  h.handler = 1;
  h.len_magic = 8 | kRunMagic;
  const std::uint64_t v[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto* p = reinterpret_cast<const std::uint8_t*>(v);
  EXPECT_EQ(cursor.append_payloads(buf, &used, sizeof buf, h, p, 3), 3u);
  EXPECT_EQ(cursor.append_payloads(buf, &used, sizeof buf, h, p + 24, 2), 2u);  // joins: one run of 5
  EXPECT_EQ(used, run_bytes(8, 5));
  std::uint8_t* at = cursor.append(buf, &used, sizeof buf, 2, 5, 1, 8);  // a single send joins too
  ASSERT_NE(at, nullptr);
  std::memcpy(at, &v[5], 8);
  // Room for (96 - 16) / 8 = 10 in all: 4 more fit, the caller gets the count.
  EXPECT_EQ(cursor.append_payloads(buf, &used, sizeof buf, h, p + 48, 4), 4u);
  EXPECT_EQ(cursor.append_payloads(buf, &used, sizeof buf, h, p, 1), 0u);
  RunHeader got;
  ASSERT_EQ(read_run(buf, used, 0, &got), 96u);
  EXPECT_EQ(got.count, 10u);
  EXPECT_EQ(std::memcmp(buf + kRunHeaderBytes, v, sizeof v), 0);
  // Another sender starts a new run.
  alignas(8) std::uint8_t buf2[96] = {};
  std::uint32_t used2 = 0;
  cursor.reset();
  EXPECT_EQ(cursor.append_payloads(buf2, &used2, sizeof buf2, h, p, 2), 2u);
  h.src = 6;
  EXPECT_EQ(cursor.append_payloads(buf2, &used2, sizeof buf2, h, p, 2), 2u);
  EXPECT_EQ(used2, 2 * run_bytes(8, 2));
}

TEST(RouteRun, CorruptOrTruncatedRunsAreRefused) {
  alignas(8) std::uint8_t buf[64] = {};
  const std::uint64_t v[3] = {1, 2, 3};
  RunHeader src{};
  src.dest = 3;
  src.src = 1;
  src.handler = 2;
  src.len_magic = 8 | kRunMagic;
  ASSERT_EQ(put_run(buf, src, reinterpret_cast<const std::uint8_t*>(v), 3), 40u);
  RunHeader h;
  EXPECT_EQ(read_run(buf, sizeof buf, 0, &h), 40u);
  EXPECT_EQ(read_run(buf, 39, 0, &h), 0u);  // truncated payloads
  EXPECT_EQ(read_run(buf, 12, 0, &h), 0u);  // truncated header
  buf[11] ^= 1;                             // magic
  EXPECT_EQ(read_run(buf, sizeof buf, 0, &h), 0u);
  buf[11] ^= 1;
  buf[14] = buf[15] = 0;  // a run of no messages
  EXPECT_EQ(read_run(buf, sizeof buf, 0, &h), 0u);
  EXPECT_EQ(items_that_fit(8, 64), 6u);
  EXPECT_EQ(items_that_fit(8, 16), 0u);
  EXPECT_EQ(items_that_fit(0, 16), kMaxRunCount);
}

TEST(RouteTopology, NodeLocalRemoteReachesEveryRankInTwoHops) {
  // Three nodes of four, two and three ranks (keys in rank order).
  const std::vector<int> keys = {7, 7, 7, 7, 2, 2, 9, 9, 9};
  const int n = static_cast<int>(keys.size());
  for (int src = 0; src < n; ++src) {
    const Topology t = Topology::from_keys(keys, src);
    std::set<int> remote_peers;
    for (int dest = 0; dest < n; ++dest) {
      int at = src, hops = 0;
      while (at != dest && hops < 3) {
        const int next = Topology::from_keys(keys, at).next_hop(dest, Routing::NodeLocalRemote);
        if (t.node_of[next] != t.node_of[at] && at == src) remote_peers.insert(next);
        at = next;
        ++hops;
      }
      EXPECT_EQ(at, dest) << src << " -> " << dest;
      EXPECT_LE(hops, 2) << src << " -> " << dest;
      EXPECT_EQ(t.next_hop(dest, Routing::Direct), dest);
    }
    // A rank talks across nodes only to ranks with its local index (mod size).
    for (int p : remote_peers)
      EXPECT_EQ(t.local_of[p] % static_cast<int>(t.apps_of[t.my_node()].size()), t.local_of[src]);
  }
  const Topology t = Topology::from_keys(keys, 0);
  EXPECT_EQ(t.num_nodes, 3);
  EXPECT_EQ(t.apps_of[1], (std::vector<int>{4, 5}));
}

TEST(RouteQuiescence, NeedsTwoEqualBalancedRounds) {
  Quiescence q;
  EXPECT_FALSE(q.complete_round(0, 0));  // one round is never enough
  EXPECT_TRUE(q.complete_round(0, 0));   // empty phase: two quiet rounds
  q.reset();
  EXPECT_FALSE(q.complete_round(10, 10));
  EXPECT_FALSE(q.complete_round(12, 11));  // a handler sent more in between
  EXPECT_FALSE(q.complete_round(12, 12));  // balanced, but moved since the last round
  EXPECT_TRUE(q.complete_round(12, 12));
  q.reset();
  EXPECT_FALSE(q.complete_round(5, 4));
  EXPECT_FALSE(q.complete_round(5, 4));  // stable but unbalanced: messages in flight
}

TEST(RouteMailbox, SharedMailboxValidatesItsHeader) {
  const std::string name = "/ferry-route-unit-" + std::to_string(getpid());
  {
    Mailbox m = Mailbox::create_shared(name, Mailbox::Geometry{3, 8, 1024, 2});
    Mailbox a = Mailbox::attach_shared(name);
    EXPECT_EQ(a.num_clients(), 3u);
    EXPECT_EQ(a.header()->ring_slot_bytes, 1024u);
    ClientSlot c = a.client(2);
    EXPECT_EQ(c.requests.capacity(), 8u);
    EXPECT_EQ(c.delivery_rings, 2u);
    EXPECT_EQ(c.deliveries[1].slot_size(), 1024u);
    EXPECT_THROW(a.client(3), Error);
    m.header()->version = 99;
    EXPECT_THROW(Mailbox::attach_shared(name), Error);
    Mailbox::unlink(name);
  }
  EXPECT_THROW(Mailbox::attach_shared(name), Error);
  RouterStatsBlock block{};
  RouterStats s;
  s.frames_routed = 5;
  s.world_rank = 3;
  s.wire.rounds = 7;
  store_router_stats(&block, s);
  const RouterStats back = load_router_stats(&block);
  EXPECT_EQ(back.frames_routed, 5u);
  EXPECT_EQ(back.world_rank, 3u);
  EXPECT_EQ(back.wire.rounds, 7u);
}

// Two apps and a router with no transport, driven by hand in one thread.
struct Loopback {
  Mailbox mailbox = Mailbox::create_private(Mailbox::Geometry{2, 4, 256, 1});
  BufferPool pool{4096};
  WireStats wire;
  std::unique_ptr<Router> router;
  std::vector<ClientPort> ports;
  Loopback() {
    RouterConfig cfg;
    cfg.options.buffer_bytes = 4096;
    cfg.mailbox = &mailbox;
    cfg.client_of_app = {0, 1};
    cfg.peer_of_app = {-1, -1};
    router = std::make_unique<Router>(cfg, &pool, &wire);
    Options o;
    o.stall_timeout_ms = 10'000;
    for (std::uint32_t i = 0; i < 2; ++i) ports.emplace_back(mailbox.client(i), mailbox.header(), o);
  }
  void send(int from, int to, std::uint64_t value) {
    std::uint8_t* at = ports[static_cast<std::size_t>(from)].append(static_cast<std::uint32_t>(to),
                                                                    static_cast<std::uint32_t>(from), 0, 8);
    std::memcpy(at, &value, 8);
    ports[static_cast<std::size_t>(from)].count_sent();
  }
  // Reads every delivered message of app `to`; returns their values.
  std::vector<std::uint64_t> drain(int to) {
    std::vector<std::uint64_t> out;
    SlotMessage m;
    ClientPort& p = ports[static_cast<std::size_t>(to)];
    while (p.peek(0, &m)) {
      for (std::size_t off = 0; off < m.payload.size;) {
        RunHeader h;
        const std::uint32_t rb = read_run(m.payload.data, m.payload.size, off, &h);
        EXPECT_NE(rb, 0u);
        if (rb == 0) return out;
        EXPECT_EQ(h.dest, static_cast<std::uint32_t>(to));
        EXPECT_EQ(h.len(), 8u);
        for (std::uint32_t i = 0; i < h.count; ++i) {
          std::uint64_t v;
          std::memcpy(&v, m.payload.data + off + kRunHeaderBytes + 8 * i, 8);
          out.push_back(v);
        }
        off += rb;
      }
      p.advance(0);
    }
    p.release(0);
    return out;
  }
  // Reads app `to`'s deliveries, stepping the router between reads, until
  // `expected` messages came or `passes` went by; returns their values in order.
  std::vector<std::uint64_t> catch_up(int to, std::uint64_t expected, int passes) {
    std::vector<std::uint64_t> got;
    for (int i = 0; i < passes && got.size() < expected; ++i) {
      const auto part = drain(to);
      got.insert(got.end(), part.begin(), part.end());
      router->step();
    }
    return got;
  }
};

TEST(RouteRouter, MessagesAreAggregatedIntoRunsAndChunks) {
  Loopback lb;
  for (std::uint64_t v = 0; v < 60; ++v) lb.send(0, 1, v);  // one run of 30 per 256-byte chunk
  lb.ports[0].publish_chunk();
  for (int i = 0; i < 3; ++i) lb.router->step();
  const auto got = lb.drain(1);
  ASSERT_EQ(got.size(), 60u);
  for (std::uint64_t v = 0; v < 60; ++v) EXPECT_EQ(got[v], v);
  EXPECT_EQ(lb.ports[0].chunks(), 2u);
  EXPECT_EQ(lb.ports[0].chunk_bytes(), 2u * run_bytes(8, 30));
  EXPECT_EQ(lb.router->stats().frames_routed, 60u);
  EXPECT_EQ(lb.router->stats().chunks_out, 2u);
}

TEST(RouteRouter, RunsOfOneSenderAreMergedPerDestination) {
  Loopback lb;
  // App 0 alternates between two destinations: its chunk holds runs of one,
  // the router merges them into one run per destination.
  for (std::uint64_t v = 0; v < 8; ++v) lb.send(0, static_cast<int>(v % 2), v);
  lb.ports[0].publish_chunk();
  lb.router->step();
  for (int to = 0; to < 2; ++to) {
    SlotMessage m;
    ASSERT_TRUE(lb.ports[static_cast<std::size_t>(to)].peek(0, &m));
    RunHeader h;
    ASSERT_EQ(read_run(m.payload.data, m.payload.size, 0, &h), m.payload.size) << "one run for app " << to;
    EXPECT_EQ(h.count, 4u);
  }
  const auto zero = lb.drain(0), one = lb.drain(1);
  EXPECT_EQ(zero, (std::vector<std::uint64_t>{0, 2, 4, 6}));
  EXPECT_EQ(one, (std::vector<std::uint64_t>{1, 3, 5, 7}));
}

TEST(RouteRouter, AnAppThatFallsBehindIsNotWaitedFor) {
  Loopback lb;
  // Far more than app 1's 4 delivery slots hold; app 1 reads nothing yet.
  std::uint64_t v = 0;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 25; ++i) lb.send(0, 1, v++);
    lb.ports[0].publish_chunk();
    lb.router->step();  // never blocks: what does not fit waits in the router
  }
  EXPECT_GT(lb.router->stats().pending_max, 0u);
  const auto got = lb.catch_up(1, v, 200);
  ASSERT_EQ(got.size(), v);
  for (std::uint64_t i = 0; i < v; ++i) EXPECT_EQ(got[i], i);  // one sender, one receiver: order kept
}

TEST(RouteRouter, AnAppThatFallsBehindHoldsUpOnlyItsOwnRuns) {
  Loopback lb;
  // App 0 sends to app 1 (which reads nothing) and to itself, interleaved;
  // app 1's 4 delivery slots fill in the first rounds.
  std::uint64_t to_one = 0, to_self = 0;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 5; ++i) {
      lb.send(0, 1, to_one++);
      lb.send(0, 0, 1000 + to_self++);
    }
    lb.ports[0].publish_chunk();
    lb.router->step();
    const auto mine = lb.drain(0);  // app 0 keeps up
    for (std::uint64_t v : mine) EXPECT_GE(v, 1000u);
    EXPECT_EQ(mine.size(), 5u) << "round " << round << ": app 0's runs waited behind app 1's";
  }
  EXPECT_GT(lb.router->stats().pending_max, 0u);
  const auto got = lb.catch_up(1, to_one, 100);
  ASSERT_EQ(got.size(), to_one);
  for (std::uint64_t i = 0; i < to_one; ++i) EXPECT_EQ(got[i], i);  // what waited kept its order
}

TEST(RouteRouter, BarrierWaitsForEveryAppAndForTheirReplies) {
  Loopback lb;
  lb.send(0, 1, 42);
  lb.ports[0].publish_chunk();
  lb.ports[0].publish_handled(0);
  lb.ports[0].request_barrier(1);
  for (int i = 0; i < 5; ++i) lb.router->step();
  EXPECT_FALSE(lb.ports[0].barrier_done(1)) << "app 1 has not entered the barrier";
  lb.ports[1].publish_handled(0);
  lb.ports[1].request_barrier(1);
  for (int i = 0; i < 5; ++i) lb.router->step();
  EXPECT_FALSE(lb.ports[1].barrier_done(1)) << "a message is not handled yet";
  // App 1 handles it and replies: the reply is unpublished while handled stays unpublished too (Q2).
  EXPECT_EQ(lb.drain(1).size(), 1u);
  lb.send(1, 0, 43);
  lb.ports[1].publish_handled(1);  // refused: the reply is not published yet
  for (int i = 0; i < 5; ++i) lb.router->step();
  EXPECT_FALSE(lb.ports[1].barrier_done(1));
  lb.ports[1].publish_chunk();
  lb.ports[1].publish_handled(1);
  for (int i = 0; i < 5; ++i) lb.router->step();
  EXPECT_FALSE(lb.ports[0].barrier_done(1)) << "the reply is not handled yet";
  EXPECT_EQ(lb.drain(0).size(), 1u);
  lb.ports[0].publish_handled(1);
  for (int i = 0; i < 5; ++i) lb.router->step();
  EXPECT_TRUE(lb.ports[0].barrier_done(1));
  EXPECT_TRUE(lb.ports[1].barrier_done(1));
  EXPECT_EQ(lb.router->epoch(), 1u);
}

}  // namespace
}  // namespace ferry::route::detail
