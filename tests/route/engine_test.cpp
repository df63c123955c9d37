// The engine under mpirun, in whichever mode the launch chose (--route-mode or
// FERRY_ROUTE_MODE): aggregation, the flush timer, quiescence with handlers
// that send, empty phases, a rank that sends nothing, variable sizes, self
// sends, and the statistics. One Engine serves every test (process mode allows
// one per Runtime), so all handlers are registered before the first test.
//
// Every rank runs every test in the same order; tests use EXPECT_* (never
// ASSERT_*) before collective calls, so a failure on one rank cannot leave the
// others waiting. main() combines the ranks' results.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/route/engine.h"
#include "ferry/route/inbox.h"
#include "ferry/route/runtime.h"

namespace ferry::route {
namespace {

struct Ping {
  std::uint64_t src;
  std::uint64_t seq;
};
struct Hop {
  std::uint64_t ttl;
  std::uint64_t chain;
};

// Everything the handlers touch, reset by each test.
struct World {
  Engine* engine = nullptr;
  Handler<Ping> ping;
  Handler<Hop> hop;
  Handler<Ping> batch;  // the same message type, delivered as spans
  BytesHandler bytes;
  std::vector<std::uint64_t> pings_from;
  std::vector<std::uint64_t> seq_sum_from;
  std::uint64_t hops = 0;
  std::uint64_t bytes_ok = 0, bytes_bad = 0;
  std::uint64_t batch_calls = 0, batch_msgs = 0, batch_misaligned = 0;
  std::vector<std::uint64_t> batch_seq_sum_from;
  std::unique_ptr<Inbox<Ping>> inbox;  // registered last; a test lets it go before a barrier

  void reset() {
    pings_from.assign(static_cast<std::size_t>(engine->size()), 0);
    seq_sum_from.assign(static_cast<std::size_t>(engine->size()), 0);
    batch_seq_sum_from.assign(static_cast<std::size_t>(engine->size()), 0);
    hops = bytes_ok = bytes_bad = 0;
    batch_calls = batch_msgs = batch_misaligned = 0;
  }
};
World* g = nullptr;

std::uint8_t pattern(std::size_t size, std::size_t i) {
  return static_cast<std::uint8_t>(size * 31 + i * 7);
}

std::uint64_t global_sum(std::uint64_t v) {
  std::uint64_t out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, g->engine->comm());
  return out;
}

class RouteEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    g->reset();
    g->engine->barrier();
  }
  Engine& e() { return *g->engine; }
};

TEST_F(RouteEngine, EmptyPhasesComplete) {
  const Stats before = e().stats();
  for (int i = 0; i < 5; ++i) e().barrier();
  const Stats after = e().stats();
  EXPECT_EQ(after.barriers - before.barriers, 5u);
  EXPECT_EQ(after.msgs_received, before.msgs_received);
}

TEST_F(RouteEngine, EveryMessageArrivesOnce) {
  const int n = e().size();
  constexpr std::uint64_t kPerPeer = 2000;
  for (std::uint64_t s = 0; s < kPerPeer; ++s) {
    for (int d = 0; d < n; ++d) e().send(d, g->ping, Ping{static_cast<std::uint64_t>(e().rank()), s});
    if (s % 128 == 0) e().progress();
  }
  e().barrier();
  for (int src = 0; src < n; ++src) {
    EXPECT_EQ(g->pings_from[static_cast<std::size_t>(src)], kPerPeer) << "from rank " << src;
    EXPECT_EQ(g->seq_sum_from[static_cast<std::size_t>(src)], kPerPeer * (kPerPeer - 1) / 2)
        << "from rank " << src;
  }
}

TEST_F(RouteEngine, RankThatSendsNothing) {
  // Rank 0 sends nothing; every other rank sends to rank 0 only.
  constexpr std::uint64_t kCount = 3000;
  if (e().rank() != 0)
    for (std::uint64_t s = 0; s < kCount; ++s)
      e().send(0, g->ping, Ping{static_cast<std::uint64_t>(e().rank()), s});
  e().barrier();
  std::uint64_t got = 0;
  for (std::uint64_t c : g->pings_from) got += c;
  EXPECT_EQ(got, e().rank() == 0 ? kCount * static_cast<std::uint64_t>(e().size() - 1) : 0u);
}

TEST_F(RouteEngine, HandlersThatSendAreWaitedFor) {
  // Chains of hops: each handler sends the next hop, so the barrier must see
  // messages created after it started.
  constexpr std::uint64_t kChains = 50, kTtl = 40;
  for (std::uint64_t c = 0; c < kChains; ++c) e().send((e().rank() + 1) % e().size(), g->hop, Hop{kTtl, c});
  e().barrier();
  EXPECT_EQ(global_sum(g->hops), kChains * (kTtl + 1) * static_cast<std::uint64_t>(e().size()));
}

TEST_F(RouteEngine, VariableSizesUpToTheLimit) {
  const std::size_t max = e().options().max_payload();
  std::vector<std::uint8_t> buf(max);
  std::uint64_t sent = 0;
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                           std::size_t{100}, max / 2, max - 1, max}) {
    for (std::size_t i = 0; i < size; ++i) buf[i] = pattern(size, i);
    for (int d = 0; d < e().size(); ++d) {
      e().send(d, g->bytes, ByteView{buf.data(), size});
      ++sent;
    }
  }
  e().barrier();
  EXPECT_EQ(g->bytes_bad, 0u);
  EXPECT_EQ(g->bytes_ok, sent);  // every rank sends the same set to everyone
}

TEST_F(RouteEngine, OversizedMessageIsRefused) {
  std::vector<std::uint8_t> buf(e().options().max_payload() + 1);
  EXPECT_THROW(e().send(0, g->bytes, ByteView{buf.data(), buf.size()}), Error);
  EXPECT_THROW(e().send(e().size(), g->ping, Ping{}), Error);
  e().barrier();
}

TEST_F(RouteEngine, PartlyFilledBuffersLeaveOnTheFlushTimer) {
  // One small message each, then progress() only (no barrier): it must arrive
  // because of flush_us, not because a buffer filled up.
  const int n = e().size(), me = e().rank();
  e().send((me + 1) % n, g->ping, Ping{static_cast<std::uint64_t>(me), 0});
  const int from = (me + n - 1) % n;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (g->pings_from[static_cast<std::size_t>(from)] == 0 && std::chrono::steady_clock::now() < deadline) {
    e().progress();
    std::this_thread::yield();
  }
  EXPECT_EQ(g->pings_from[static_cast<std::size_t>(from)], 1u)
      << "no message from rank " << from << " in 20 s";
  e().barrier();
}

TEST_F(RouteEngine, SmallMessagesAreAggregated) {
  const Stats before = e().stats();
  constexpr std::uint64_t kCount = 20000;
  const int dest = (e().rank() + 1) % e().size();
  for (std::uint64_t s = 0; s < kCount; ++s)
    e().send(dest, g->ping, Ping{static_cast<std::uint64_t>(e().rank()), s});
  e().barrier();
  const Stats after = e().stats();
  const std::uint64_t flushes = after.flushes - before.flushes;
  EXPECT_EQ(after.msgs_sent - before.msgs_sent, kCount);
  EXPECT_GT(flushes, 0u);
  // Buffers carry many Pings, and Pings to one rank share runs: 16 bytes each
  // and a 16-byte run header about once a buffer (twice gives the slack).
  EXPECT_LT(flushes * 4, kCount) << flushes << " buffers for " << kCount << " messages";
  const std::uint64_t bytes = after.flush_bytes - before.flush_bytes;
  EXPECT_GE(bytes, kCount * sizeof(Ping));
  if (after.wire.frames_forwarded == before.wire.frames_forwarded) {  // two-hop routing adds others' runs
    EXPECT_LE(bytes, kCount * sizeof(Ping) + flushes * 2 * 16)
        << bytes << " bytes in " << flushes << " buffers";
  }
  EXPECT_EQ(g->pings_from[static_cast<std::size_t>((e().rank() + e().size() - 1) % e().size())], kCount);
}

TEST_F(RouteEngine, BatchHandlersTakeRunsAsSpans) {
  // Pings for the batch handler interleaved with pings for the typed one: each
  // handler sees only its own, every message once, in spans of several.
  constexpr std::uint64_t kCount = 5000;
  const int n = e().size(), me = e().rank();
  const int dest = (me + 1) % n, from = (me + n - 1) % n;
  for (std::uint64_t s = 0; s < kCount; ++s) {
    e().send(dest, g->batch, Ping{static_cast<std::uint64_t>(me), s});
    if (s % 10 == 0) e().send(dest, g->ping, Ping{static_cast<std::uint64_t>(me), s});
  }
  e().barrier();
  EXPECT_EQ(g->batch_msgs, kCount);
  EXPECT_EQ(g->batch_seq_sum_from[static_cast<std::size_t>(from)], kCount * (kCount - 1) / 2);
  EXPECT_EQ(g->pings_from[static_cast<std::size_t>(from)], kCount / 10);
  EXPECT_LT(g->batch_calls, kCount / 2) << "runs of 9 same-key messages should arrive as spans";
  EXPECT_EQ(g->batch_misaligned, 0u);
}

TEST_F(RouteEngine, CountsBalanceAcrossRanks) {
  for (int d = 0; d < e().size(); ++d) e().send(d, g->ping, Ping{static_cast<std::uint64_t>(e().rank()), 0});
  e().barrier();
  const Stats s = e().stats();
  EXPECT_EQ(global_sum(s.msgs_sent), global_sum(s.msgs_received));
  EXPECT_EQ(global_sum(s.bytes_sent), global_sum(s.bytes_received));
  EXPECT_GT(s.barriers, 0u);
}

TEST_F(RouteEngine, AnInboxHandsOverEveryMessageToPull) {
  if (g->inbox == nullptr) GTEST_SKIP() << "the inbox is gone: this test runs before the one that drops it";
  constexpr std::uint64_t kCount = 3000;
  const int n = e().size(), me = e().rank();
  const int dest = (me + 1) % n, from = (me + n - 1) % n;
  for (std::uint64_t s = 0; s < kCount; ++s)
    e().send(dest, g->inbox->handler(), Ping{static_cast<std::uint64_t>(me), s});
  e().barrier();
  EXPECT_EQ(g->inbox->queued(), kCount);
  std::uint64_t pulled = 0, seq_sum = 0, wrong_sender = 0;
  Ping p{};
  int sender = -1;
  while (g->inbox->try_pull(&p, &sender)) {
    ++pulled;
    seq_sum += p.seq;
    if (sender != from || p.src != static_cast<std::uint64_t>(from)) ++wrong_sender;
  }
  EXPECT_EQ(pulled, kCount);
  EXPECT_EQ(seq_sum, kCount * (kCount - 1) / 2);
  EXPECT_EQ(wrong_sender, 0u);
  EXPECT_EQ(g->inbox->queued(), 0u);
}

// The engine keeps every handler to its end, so messages sent to an inbox
// that is destroyed before they arrive must land somewhere that still exists
// (ASan would report the old queue's use after free), and still count as
// handled, or the barrier would never see the totals balance.
TEST_F(RouteEngine, MessagesForAnInboxThatIsGoneAreStillHandled) {
  if (g->inbox == nullptr) GTEST_SKIP() << "the inbox was dropped already";
  const Handler<Ping> to_inbox = g->inbox->handler();
  constexpr std::uint64_t kCount = 2000;
  const int dest = (e().rank() + 1) % e().size();
  for (std::uint64_t s = 0; s < kCount; ++s)
    e().send(dest, to_inbox, Ping{static_cast<std::uint64_t>(e().rank()), s});
  g->inbox.reset();
  e().barrier();
  // Per rank, some of a phase's messages may be handled while the receiver
  // still finishes the last barrier, so only the totals are exact.
  const Stats s = e().stats();
  EXPECT_EQ(global_sum(s.msgs_sent), global_sum(s.msgs_received));
}

}  // namespace
}  // namespace ferry::route

int main(int argc, char** argv) {
  using namespace ferry::route;
  Runtime rt(&argc, &argv);  // on router ranks (process mode) this never returns
  ::testing::InitGoogleTest(&argc, argv);
  int failed = 0;
  {
    Engine engine(rt);
    World world;
    world.engine = &engine;
    world.ping = engine.register_handler<Ping>([&](Engine&, int from, const Ping& p) {
      ++world.pings_from[static_cast<std::size_t>(from)];
      world.seq_sum_from[static_cast<std::size_t>(from)] += p.seq;
      EXPECT_EQ(p.src, static_cast<std::uint64_t>(from));
    });
    world.hop = engine.register_handler<Hop>([&](Engine& e, int, const Hop& h) {
      ++world.hops;
      if (h.ttl > 0)
        e.send(static_cast<int>((h.chain + h.ttl) % static_cast<std::uint64_t>(e.size())), world.hop,
               Hop{h.ttl - 1, h.chain});
    });
    world.batch = engine.register_batch_handler<Ping>([&](Engine&, int from, std::span<const Ping> ps) {
      ++world.batch_calls;
      world.batch_msgs += ps.size();
      if (reinterpret_cast<std::uintptr_t>(ps.data()) % alignof(Ping) != 0) ++world.batch_misaligned;
      for (const Ping& p : ps) {
        EXPECT_EQ(p.src, static_cast<std::uint64_t>(from));
        world.batch_seq_sum_from[static_cast<std::size_t>(from)] += p.seq;
      }
    });
    world.bytes = engine.register_bytes_handler([&](Engine&, int, ferry::ByteView b) {
      bool ok = true;
      for (std::size_t i = 0; i < b.size; ++i) ok = ok && b.data[i] == ferry::route::pattern(b.size, i);
      ++(ok ? world.bytes_ok : world.bytes_bad);
    });
    world.inbox = std::make_unique<Inbox<Ping>>(engine);
    world.reset();
    g = &world;
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    engine.barrier();
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, rt.comm());
  if (rt.rank() == 0)
    std::printf("route engine test (%s, %d ranks): %s\n", to_string(rt.options().mode), rt.size(),
                any ? "FAILED on some rank" : "passed on every rank");
  return any;
}
