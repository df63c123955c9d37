// The router and its application ports under real concurrency, the lock-free
// part of thread and process mode: router threads (one, then two, as with
// router_threads) serve three app threads
// through one mailbox. Apps send messages of random sizes to random apps; a
// quarter are requests whose handler replies (handlers that send). After each
// barrier the apps meet on a std::barrier and check that quiescence was real:
// every message sent so far has been handled, none twice, every byte intact.
// Small rings force full request rings and deliveries held in the router. CI also runs it
// under TSan (label lockfree).

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "ferry/core/detail/backoff.h"
#include "route/client_port.h"
#include "route/idle.h"
#include "route/mailbox.h"
#include "route/router.h"
#include "route/run.h"

namespace ferry::route::detail {
namespace {

constexpr int kApps = 3;
constexpr std::uint16_t kRequest = 1, kReply = 2, kOneWay = 3;

std::uint64_t messages_per_app() {
  std::uint64_t total = 800'000;
  if (const char* env = std::getenv("FERRY_FUZZ_MESSAGES")) total = std::strtoull(env, nullptr, 10);
  return std::max<std::uint64_t>(kApps * 100, total / 8) / kApps;
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
std::uint8_t byte_of(std::uint64_t key, std::size_t i) {
  return static_cast<std::uint8_t>(mix(key + i / 8) >> (8 * (i % 8)));
}

// Payload: an 8-byte key then key-derived bytes, so every byte is checkable.
void fill(std::uint8_t* p, std::uint32_t len, std::uint64_t key) {
  std::memcpy(p, &key, 8);
  for (std::uint32_t i = 8; i < len; ++i) p[i] = byte_of(key, i);
}
bool check(const std::uint8_t* p, std::uint32_t len) {
  std::uint64_t key;
  std::memcpy(&key, p, 8);
  for (std::uint32_t i = 8; i < len; ++i)
    if (p[i] != byte_of(key, i)) return false;
  return true;
}

Options port_options;

struct App {
  int id;
  ClientPort port;
  std::uint64_t sent = 0, handled = 0, corrupt = 0, misrouted = 0;

  void send(int to, std::uint16_t kind, std::uint32_t len, std::uint64_t key) {
    std::vector<std::uint8_t> buf(len);
    fill(buf.data(), len, key);
    std::uint8_t* at = port.append(static_cast<std::uint32_t>(to), static_cast<std::uint32_t>(id), kind, len);
    std::memcpy(at, buf.data(), len);
    port.count_sent();
    ++sent;
  }
  // Runs the handlers of every delivered chunk (as RingBackend does).
  bool deliver() {
    bool any = false;
    for (std::uint32_t r = 0; r < port.delivery_rings(); ++r) any |= deliver_ring(r);
    return any;
  }
  bool deliver_ring(std::uint32_t r) {
    SlotMessage m;
    bool any = false;
    while (port.peek(r, &m)) {
      for (std::size_t off = 0; off < m.payload.size;) {
        RunHeader h;
        const std::uint32_t rb = read_run(m.payload.data, m.payload.size, off, &h);
        if (rb == 0) {
          ++corrupt;
          break;
        }
        if (h.dest != static_cast<std::uint32_t>(id)) ++misrouted;
        for (std::uint32_t i = 0; i < h.count; ++i) {
          const std::uint8_t* payload = m.payload.data + off + kRunHeaderBytes + std::size_t{i} * h.len();
          if (h.len() < 8 || !check(payload, h.len())) ++corrupt;
          if (h.handler == kRequest) send(static_cast<int>(h.src), kReply, 8 + h.len() % 40, mix(h.len()));
          ++handled;
        }
        off += rb;
      }
      port.advance(r);
      any = true;
    }
    if (any) port.release(r);
    return any;
  }
  void barrier(std::uint32_t epoch) {
    port.publish_chunk();
    port.publish_handled(handled);
    port.request_barrier(epoch);
    Backoff backoff = idle_backoff(port_options);
    for (;;) {
      const bool did = deliver();
      port.publish_chunk();
      port.publish_handled(handled);
      if (port.barrier_done(epoch)) return;
      if (!did)
        backoff.idle();
      else
        backoff.reset();
    }
  }
};

// `shards` router threads serve the apps (process mode's router_threads).
void run_fuzz(std::uint32_t shards) {
  const std::uint64_t per_app = messages_per_app();
  constexpr int kPhases = 8;
  // Tiny rings: full waits happen, and the router holds runs for apps behind.
  Mailbox mailbox = Mailbox::create_private(Mailbox::Geometry{kApps, 4, 512, shards});
  RouterConfig cfg;
  cfg.options.buffer_bytes = 4096;
  cfg.options.stall_timeout_ms = 120'000;
  resolve_idle_spins(cfg.options, kApps + shards);
  cfg.mailbox = &mailbox;
  cfg.client_of_app = {0, 1, 2};
  cfg.peer_of_app = {-1, -1, -1};
  cfg.shards = shards;
  port_options = cfg.options;
  std::vector<std::unique_ptr<BufferPool>> pools;
  std::vector<std::unique_ptr<WireStats>> wires;
  std::vector<std::unique_ptr<Router>> routers;
  for (std::uint32_t k = 0; k < shards; ++k) {
    cfg.shard = k;
    pools.push_back(std::make_unique<BufferPool>(4096));
    wires.push_back(std::make_unique<WireStats>());
    routers.push_back(std::make_unique<Router>(cfg, pools.back().get(), wires.back().get()));
  }
  std::vector<App> apps;
  for (int i = 0; i < kApps; ++i) {
    apps.push_back(
        App{i, ClientPort(mailbox.client(static_cast<std::uint32_t>(i)), mailbox.header(), cfg.options)});
    mailbox.client(static_cast<std::uint32_t>(i)).app->state =
        static_cast<std::uint32_t>(ClientState::Attached);
  }
  std::vector<std::thread> router_threads;  // after the apps attached
  for (auto& r : routers) router_threads.emplace_back([&r] { r->run(); });
  std::atomic<std::uint64_t> imbalance{0};
  std::barrier meet(kApps);
  std::vector<std::thread> threads;
  for (int i = 0; i < kApps; ++i) {
    threads.emplace_back([&, i] {
      App& a = apps[static_cast<std::size_t>(i)];
      std::uint64_t rng = mix(static_cast<std::uint64_t>(i) + 1);
      int to = 0;
      std::uint32_t len = 8;
      std::uint16_t kind = kOneWay;
      for (int phase = 1; phase <= kPhases; ++phase) {
        for (std::uint64_t k = 0; k < per_app / kPhases; ++k) {
          rng = mix(rng);
          // Half the messages repeat the last one's destination, size and
          // kind, so runs of several messages form; the rest start new runs.
          if ((rng >> 40) % 2 == 0 || k == 0) {
            to = static_cast<int>(rng % kApps);
            len = 8 + static_cast<std::uint32_t>((rng >> 8) % 200);
            kind = (rng >> 20) % 4 == 0 ? kRequest : kOneWay;
          }
          a.send(to, kind, len, rng);
          if ((rng >> 24) % 16 == 0) a.deliver();
        }
        a.barrier(static_cast<std::uint32_t>(phase));
        meet.arrive_and_wait();  // nobody sends until everyone has checked
        std::uint64_t sent = 0, handled = 0;
        for (const App& x : apps) {
          sent += x.sent;
          handled += x.handled;
        }
        if (sent != handled) imbalance.fetch_add(1);
        meet.arrive_and_wait();
      }
      a.port.set_state(ClientState::Detached);
    });
  }
  for (auto& t : threads) t.join();
  for (auto& t : router_threads) t.join();
  std::uint64_t sent = 0, handled = 0, corrupt = 0, misrouted = 0;
  for (const App& a : apps) {
    sent += a.sent;
    handled += a.handled;
    corrupt += a.corrupt;
    misrouted += a.misrouted;
  }
  EXPECT_EQ(imbalance.load(), 0u) << "a barrier returned with messages still in flight";
  EXPECT_EQ(sent, handled);
  EXPECT_EQ(corrupt, 0u);
  EXPECT_EQ(misrouted, 0u);
  EXPECT_GE(sent, per_app / kPhases * kPhases * kApps);
  EXPECT_EQ(routers[0]->epoch(), static_cast<std::uint32_t>(kPhases));
  const RouterStats rs = load_router_stats(mailbox);
  EXPECT_EQ(rs.frames_routed, sent);  // every shard published its share
  std::printf("%u router thread(s) moved %llu messages in %d phases; held up to %llu buffers of runs\n",
              shards, static_cast<unsigned long long>(sent), kPhases,
              static_cast<unsigned long long>(rs.pending_max));
}

TEST(RouteRingFuzz, QuiescenceIsRealUnderConcurrency) {
  run_fuzz(1);
}

TEST(RouteRingFuzz, QuiescenceIsRealWithSeveralRouterThreads) {
  run_fuzz(2);
}

}  // namespace
}  // namespace ferry::route::detail
