#include "route/router_thread.h"

namespace ferry::route::detail {

RouterThread::RouterThread(MPI_Comm comm, const Options& options, const Topology& topology)
    : mailbox_(Mailbox::create_private(Mailbox::Geometry{1, options.ring_slots, options.ring_slot_bytes, 1})),
      pool_(options.buffer_bytes) {
  if (topology.app_size > 1) transport_ = std::make_unique<Transport>(comm, options, &pool_, &wire_);
  RouterConfig cfg;
  cfg.options = options;
  cfg.mailbox = &mailbox_;
  cfg.client_of_app.assign(static_cast<std::size_t>(topology.app_size), -1);
  cfg.client_of_app[static_cast<std::size_t>(topology.app_rank)] = 0;
  cfg.peer_of_app.resize(static_cast<std::size_t>(topology.app_size));
  for (int d = 0; d < topology.app_size; ++d)
    cfg.peer_of_app[static_cast<std::size_t>(d)] = topology.next_hop(d, options.routing);
  cfg.transport = transport_.get();
  cfg.check_client_pids = false;
  cfg.name = "progress thread";
  cfg.cpu_time = &thread_cpu_ns;
  router_ = std::make_unique<Router>(std::move(cfg), &pool_, &wire_);
  ClientSlot c = mailbox_.client(0);
  c.app->app_rank = static_cast<std::uint32_t>(topology.app_rank);
  c.app->state = static_cast<std::uint32_t>(ClientState::Attached);
}

void RouterThread::start(int cpu) {
  thread_ = std::thread([this, cpu] {
    if (cpu >= 0) pin_this_thread(cpu, "progress thread");
    router_->run();
  });
}

void RouterThread::join() {
  if (thread_.joinable()) thread_.join();
}

RouterThread::~RouterThread() {
  join();
  router_.reset();
  transport_.reset();  // after the thread: MPI calls from this thread are fine (MPI_THREAD_MULTIPLE)
}

}  // namespace ferry::route::detail
