#include "route/router_process.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "ferry/core/status.h"
#include "route/fatal.h"
#include "route/mailbox.h"
#include "route/router.h"
#include "route/topology.h"
#include "route/transport.h"

namespace ferry::route::detail {
namespace {

constexpr int kNameBytes = 128;

}  // namespace

int run_router_process(const RouterProcessPlan& plan) {
  int node_size = 0, node_rank = 0;
  MPI_Comm_size(plan.node_comm, &node_size);
  MPI_Comm_rank(plan.node_comm, &node_rank);
  const auto clients = static_cast<std::uint32_t>(node_size - 1);

  // The name is unique per router process; it is unlinked as soon as every
  // app has mapped it, so a crash later leaves nothing behind in /dev/shm.
  const std::string name =
      "/ferry-route-" + std::to_string(getpid()) + "-" + std::to_string(plan.world_rank) + "-" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
  Mailbox mailbox;
  char buf[kNameBytes] = {};
  try {
    mailbox = Mailbox::create_shared(
        name, Mailbox::Geometry{clients, plan.options.ring_slots, plan.options.ring_slot_bytes,
                                plan.options.router_threads});
    mailbox.header()->router_pid = static_cast<std::uint32_t>(getpid());
    mailbox.header()->router_world_rank = static_cast<std::uint32_t>(plan.world_rank);
    name.copy(buf, kNameBytes - 1);
  } catch (const Error& e) {
    ferry::log::app().critical("ferry route: router of node {}: {}", plan.node, e.what());
    // An empty name tells the apps to fail too, rather than hang in the broadcast.
  }
  FERRY_MPI_CHECK(MPI_Bcast(buf, kNameBytes, MPI_CHAR, node_rank, plan.node_comm),
                  "sending the mailbox name");
  if (!mailbox.valid())
    fatal("the router of node " + std::to_string(plan.node) + " could not create its mailbox");
  FERRY_MPI_CHECK(MPI_Barrier(plan.node_comm), "waiting for the apps to map the mailbox");
  Mailbox::unlink(name);

  // The router's threads ("shards", router.h): shard k reads the request rings
  // of apps k, k+K, ..., writes delivery ring k of every app, and has its own
  // Transport (an MPI communicator of its own) to shard k of the other routers.
  const std::uint32_t shards = plan.options.router_threads;
  struct Shard {
    explicit Shard(std::uint32_t bytes) : pool(bytes) {}
    BufferPool pool;
    WireStats wire;
    std::unique_ptr<Transport> transport;
    std::unique_ptr<Router> router;
  };
  std::vector<std::unique_ptr<Shard>> shard;
  const std::size_t apps = plan.node_of_app.size();
  for (std::uint32_t k = 0; k < shards; ++k) {
    auto sh = std::make_unique<Shard>(plan.options.buffer_bytes);
    if (plan.num_nodes > 1)  // collective over router_comm, in the same order on every router
      sh->transport = std::make_unique<Transport>(plan.router_comm, plan.options, &sh->pool, &sh->wire);
    RouterConfig cfg;
    cfg.options = plan.options;
    cfg.mailbox = &mailbox;
    cfg.client_of_app.assign(apps, -1);
    cfg.peer_of_app.assign(apps, -1);
    for (std::size_t a = 0; a < apps; ++a) {
      if (plan.node_of_app[a] == plan.node) cfg.client_of_app[a] = plan.local_of_app[a];
      cfg.peer_of_app[a] = plan.node_of_app[a];  // routers are ranked by node id in router_comm
    }
    cfg.transport = sh->transport.get();
    cfg.check_client_pids = true;
    cfg.name = "router";
    cfg.shard = k;
    cfg.shards = shards;
    cfg.cpu_time = &thread_cpu_ns;
    sh->router = std::make_unique<Router>(std::move(cfg), &sh->pool, &sh->wire);
    sh->router->set_world_rank(plan.world_rank);
    shard.push_back(std::move(sh));
  }
  auto pin = [&](std::uint32_t k) {
    if (plan.options.router_cpus.empty()) return;
    const std::size_t i = static_cast<std::size_t>(plan.host_local) * shards + k;
    pin_this_thread(plan.options.router_cpus[i % plan.options.router_cpus.size()], "router");
  };
  std::atomic_ref<std::uint32_t>(mailbox.header()->router_state)
      .store(static_cast<std::uint32_t>(RouterState::Running), std::memory_order_release);
  std::vector<std::thread> threads;
  for (std::uint32_t k = 1; k < shards; ++k)
    threads.emplace_back([&, k] {
      pin(k);
      shard[k]->router->run();
    });
  pin(0);
  shard[0]->router->run();
  for (std::thread& t : threads) t.join();
  const RouterStats s = load_router_stats(mailbox);
  ferry::log::app().info(
      "ferry route: router of node {} (world rank {}, {} threads): {} clients, {} messages routed, {} chunks "
      "in, "
      "{} out, {} MPI buffers sent ({} bytes), {} received, cpu {:.3f} s",
      plan.node, plan.world_rank, shards, s.clients, s.frames_routed, s.chunks_in, s.chunks_out,
      s.wire.buffers_sent, s.wire.bytes_sent, s.wire.buffers_received, static_cast<double>(s.cpu_ns) / 1e9);
  std::atomic_ref<std::uint32_t>(mailbox.header()->router_state)
      .store(static_cast<std::uint32_t>(RouterState::Stopped), std::memory_order_release);
  for (auto& sh : shard) {
    sh->router.reset();
    sh->transport.reset();
  }
  return 0;
}

Mailbox attach_node_mailbox(MPI_Comm node_comm) {
  int node_size = 0;
  MPI_Comm_size(node_comm, &node_size);
  char buf[kNameBytes] = {};
  FERRY_MPI_CHECK(MPI_Bcast(buf, kNameBytes, MPI_CHAR, node_size - 1, node_comm),
                  "receiving the mailbox name");
  if (buf[0] == '\0') fatal("this node's router could not create its mailbox (see its message)");
  Mailbox m;
  try {
    m = Mailbox::attach_shared(buf);
  } catch (const Error& e) {
    fatal(std::string("cannot map the router's mailbox: ") + e.what());
  }
  FERRY_MPI_CHECK(MPI_Barrier(node_comm), "telling the router the mailbox is mapped");
  return m;
}

}  // namespace ferry::route::detail
