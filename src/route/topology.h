#pragma once
// Which application rank lives on which node, and the next hop of a message
// under each routing. Built once at start from one "node key" per rank; pure
// data afterwards, so the routing arithmetic is unit-tested without MPI.

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "ferry/route/options.h"

namespace ferry::route::detail {

struct Topology {
  int app_rank = 0;
  int app_size = 1;
  int num_nodes = 1;
  std::vector<int> node_of;               // app rank -> dense node id (ordered by first rank)
  std::vector<int> local_of;              // app rank -> index among its node's apps
  std::vector<std::vector<int>> apps_of;  // node id -> its app ranks, ascending

  // node_key[r] is any integer shared by exactly the ranks of one node.
  static Topology from_keys(const std::vector<int>& node_key, int app_rank);

  int my_node() const noexcept { return node_of[app_rank]; }

  // The rank this rank hands a message for `dest` to. Direct: dest itself.
  // NodeLocalRemote: dest when it shares our node or when we are the rank of
  // our node that serves dest's local index (local index of dest modulo our
  // node's size); otherwise that serving rank, which passes it on.
  int next_hop(int dest, Routing routing) const noexcept;
};

// This rank's node key within `comm`: rank / node_size for virtual nodes, else
// the lowest rank of its MPI_COMM_TYPE_SHARED group. Collective over comm.
int node_key(MPI_Comm comm, std::uint32_t node_size);

// Node keys of every rank of comm (collective): allgather of node_key().
std::vector<int> all_node_keys(MPI_Comm comm, std::uint32_t node_size);

// This rank's index among the ranks of comm on the same host (MPI's
// shared-memory split, ignoring virtual nodes): what CPU lists are indexed by,
// so that virtual nodes on one machine never share cores. Collective over comm.
int host_local_rank(MPI_Comm comm);

// Pins the calling thread to `cpu`; logs a warning and carries on when the
// kernel refuses (a CPU outside the allowed set is a setup mistake, not a crash).
void pin_this_thread(int cpu, const char* who);

}  // namespace ferry::route::detail
