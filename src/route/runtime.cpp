#include "ferry/route/runtime.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "ferry/core/status.h"
#include "route/fatal.h"
#include "route/idle.h"
#include "route/router_process.h"
#include "route/runtime_state.h"

namespace ferry::route {
namespace {

// mpirun answers a failed rank by sending SIGTERM to the others. Without a word
// from them, their logs just stop; this line says why (async-signal-safe: a
// preformatted buffer and write(2)), then the signal takes its default course.
char g_sigterm_message[256];
std::size_t g_sigterm_length = 0;

extern "C" void on_sigterm(int sig) {
  ssize_t ignored = write(STDERR_FILENO, g_sigterm_message, g_sigterm_length);
  (void)ignored;
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_sigterm_message(int world_rank) {
  const int n =
      std::snprintf(g_sigterm_message, sizeof g_sigterm_message,
                    "ferry route: world rank %d (pid %d) terminated by SIGTERM: the MPI job is being "
                    "aborted, most likely because another rank failed (see its message above)\n",
                    world_rank, static_cast<int>(getpid()));
  g_sigterm_length =
      n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof g_sigterm_message - 1) : 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

// router_threads=auto: one router thread for every kAppsPerRouterThread
// applications of the largest node (fewer threads fell behind inline mode at 8 applications:
// docs/bench/route.md holds the measurement) (every rank computes the same
// from the keys; shard k of every router must exist, so all routers agree). Outside process mode the value is
// unused.
constexpr std::size_t kAppsPerRouterThread = 2;

std::uint32_t auto_router_threads(const std::vector<int>& keys) {
  std::map<int, std::size_t> per_node;
  for (int k : keys) ++per_node[k];
  std::size_t apps = 1;
  for (const auto& [key, count] : per_node) apps = std::max(apps, count > 1 ? count - 1 : 1);
  return static_cast<std::uint32_t>(
      std::clamp<std::size_t>((apps + kAppsPerRouterThread - 1) / kAppsPerRouterThread, 1, 8));
}

}  // namespace

Runtime::Runtime(int* argc, char*** argv) : state_(std::make_unique<detail::RuntimeState>()) {
  using namespace detail;
  RuntimeState& st = *state_;
  // Options first, before MPI: a bad flag fails every rank alike, with a message.
  st.options = Options::from_env();
  st.options.apply_args(argc, argv);
  st.options.validate();

  // Threads that call MPI: thread mode's progress thread beside the app, or a
  // router process's threads (each has its own communicator).
  const bool threads_call_mpi =
      st.options.mode == Mode::Thread || (st.options.mode == Mode::Process && st.options.router_threads != 1);
  const int required = threads_call_mpi ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, required, &provided) != MPI_SUCCESS) throw Error("MPI_Init_thread failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &st.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &st.world_size);
  install_sigterm_message(st.world_rank);
  // router_threads=auto asks for MPI_THREAD_MULTIPLE and settles for one
  // router thread without it; every rank must settle alike (the lowest level
  // any rank got decides).
  const bool auto_threads = st.options.mode == Mode::Process && st.options.router_threads == 0;
  int lowest = provided;
  if (auto_threads)
    FERRY_MPI_CHECK(MPI_Allreduce(&provided, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                    "agreeing on the MPI thread level");
  if (lowest < required && !auto_threads)
    fatal(std::string("route mode ") + to_string(st.options.mode) + " needs MPI thread level " +
          std::to_string(required) + ", this MPI provides " + std::to_string(provided));

  const std::vector<int> keys = all_node_keys(MPI_COMM_WORLD, st.options.node_size);
  if (st.options.router_threads == 0)
    st.options.router_threads = lowest < MPI_THREAD_MULTIPLE ? 1 : auto_router_threads(keys);
  // Pollers per node: every rank, plus a progress thread per rank in thread mode
  // (process mode's routers are ranks already).
  {
    std::map<int, std::size_t> per_node;
    for (int k : keys) ++per_node[k];
    const std::size_t ranks = per_node[keys[static_cast<std::size_t>(st.world_rank)]];
    std::size_t pollers = ranks * (st.options.mode == Mode::Thread ? 2 : 1);
    if (st.options.mode == Mode::Process) pollers += st.options.router_threads - 1;
    resolve_idle_spins(st.options, pollers);
  }
  if (st.options.mode != Mode::Process) {
    FERRY_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &st.app_comm), "creating the application communicator");
    st.topology = Topology::from_keys(keys, st.world_rank);
    st.host_local = host_local_rank(st.app_comm);
  } else {
    // The last world rank of every node is its router; the others are apps.
    std::map<int, int> last, members;
    for (int w = 0; w < st.world_size; ++w) {
      last[keys[static_cast<std::size_t>(w)]] = w;
      ++members[keys[static_cast<std::size_t>(w)]];
    }
    for (const auto& [key, count] : members)
      if (count < 2)
        fatal("process mode: a node (key " + std::to_string(key) +
              ") has a single rank, which would be its router with no application beside it; launch at least "
              "two ranks per node (applications + 1 router)");
    const int my_key = keys[static_cast<std::size_t>(st.world_rank)];
    const bool is_router = last[my_key] == st.world_rank;
    std::vector<int> app_keys;
    int app_rank = 0;
    for (int w = 0; w < st.world_size; ++w) {
      const int k = keys[static_cast<std::size_t>(w)];
      if (last[k] == w) continue;
      if (w == st.world_rank) app_rank = static_cast<int>(app_keys.size());
      app_keys.push_back(k);
    }
    st.topology = Topology::from_keys(app_keys, app_rank);
    // Node ids follow the apps' order; the router of a node takes the id of its apps.
    int node = 0;
    for (std::size_t a = 0; a < app_keys.size(); ++a)
      if (app_keys[a] == my_key) {
        node = st.topology.node_of[a];
        break;
      }
    MPI_Comm split = MPI_COMM_NULL, node_comm = MPI_COMM_NULL;
    FERRY_MPI_CHECK(
        MPI_Comm_split(MPI_COMM_WORLD, is_router ? 1 : 0, is_router ? node : st.world_rank, &split),
        "separating routers from applications");
    FERRY_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, node, st.world_rank, &node_comm),
                    "grouping a node's ranks");
    // CPU lists are indexed per host, over applications and routers separately.
    const int host_local = host_local_rank(split);
    if (is_router) {
      RouterProcessPlan plan;
      plan.host_local = host_local;
      plan.options = st.options;
      plan.node_comm = node_comm;
      plan.router_comm = split;
      plan.node = node;
      plan.num_nodes = st.topology.num_nodes;
      plan.node_of_app = st.topology.node_of;
      plan.local_of_app = st.topology.local_of;
      plan.world_rank = st.world_rank;
      const int rc = run_router_process(plan);
      MPI_Comm_free(&node_comm);
      MPI_Comm_free(&split);
      MPI_Finalize();
      std::exit(rc);  // a router rank never returns into the application
    }
    st.app_comm = split;
    st.host_local = host_local;
    st.mailbox = attach_node_mailbox(node_comm);
    MPI_Comm_free(&node_comm);
    st.client = static_cast<std::uint32_t>(st.topology.local_of[static_cast<std::size_t>(app_rank)]);
    ClientSlot c = st.mailbox.client(st.client);
    c.app->pid = static_cast<std::uint32_t>(getpid());
    c.app->app_rank = static_cast<std::uint32_t>(app_rank);
    std::atomic_ref<std::uint32_t>(c.app->state)
        .store(static_cast<std::uint32_t>(ClientState::Attached), std::memory_order_release);
  }
  if (!st.options.app_cpus.empty())
    pin_this_thread(st.options.app_cpus[static_cast<std::size_t>(st.host_local) % st.options.app_cpus.size()],
                    "application rank");
}

Runtime::~Runtime() {
  using namespace detail;
  RuntimeState& st = *state_;
  if (st.mailbox.valid() && !st.engine_created) {
    // No Engine ever ran here: let the router go without a last barrier.
    ClientSlot c = st.mailbox.client(st.client);
    std::atomic_ref<std::uint32_t>(c.app->state)
        .store(static_cast<std::uint32_t>(ClientState::Detached), std::memory_order_release);
  }
  if (st.app_comm != MPI_COMM_NULL) MPI_Comm_free(&st.app_comm);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Comm Runtime::comm() const noexcept {
  return state_->app_comm;
}
int Runtime::rank() const noexcept {
  return state_->topology.app_rank;
}
int Runtime::size() const noexcept {
  return state_->topology.app_size;
}
const Options& Runtime::options() const noexcept {
  return state_->options;
}

}  // namespace ferry::route
