#pragma once
// Process mode's router rank: creates the node's mailbox, hands its name to the
// node's application ranks, routes until they detach, then returns so the
// runtime can finalise MPI and exit.

#include <mpi.h>

#include <vector>

#include "ferry/route/options.h"
#include "route/mailbox.h"

namespace ferry::route::detail {

// node_comm: this node's ranks, the router last. router_comm: one rank per
// node, ranked by node id.
struct RouterProcessPlan {
  Options options;
  MPI_Comm node_comm = MPI_COMM_NULL;
  MPI_Comm router_comm = MPI_COMM_NULL;
  int node = 0;  // this router's node id (= its rank in router_comm)
  int num_nodes = 1;
  std::vector<int> node_of_app;   // app rank -> node id
  std::vector<int> local_of_app;  // app rank -> client index within its node
  int world_rank = 0;
  int host_local = 0;  // index among this host's routers (router_cpus)
};

// Returns the process exit status (0 on success); fatal() on data-path failures.
int run_router_process(const RouterProcessPlan& plan);

// The application side of the same handshake: receives the mailbox name from
// the node's router and maps it. Collective over node_comm.
Mailbox attach_node_mailbox(MPI_Comm node_comm);

}  // namespace ferry::route::detail
