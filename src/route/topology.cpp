#include "route/topology.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/log.h"
#include "route/fatal.h"

namespace ferry::route::detail {

Topology Topology::from_keys(const std::vector<int>& node_key, int app_rank) {
  Topology t;
  t.app_rank = app_rank;
  t.app_size = static_cast<int>(node_key.size());
  std::map<int, int> dense;  // key -> node id, in order of first rank (keys appear in rank order)
  t.node_of.resize(node_key.size());
  t.local_of.resize(node_key.size());
  for (std::size_t r = 0; r < node_key.size(); ++r) {
    auto [it, inserted] = dense.try_emplace(node_key[r], static_cast<int>(dense.size()));
    if (inserted) t.apps_of.emplace_back();
    const int node = it->second;
    t.node_of[r] = node;
    t.local_of[r] = static_cast<int>(t.apps_of[node].size());
    t.apps_of[node].push_back(static_cast<int>(r));
  }
  t.num_nodes = static_cast<int>(t.apps_of.size());
  return t;
}

int Topology::next_hop(int dest, Routing routing) const noexcept {
  if (routing == Routing::Direct) return dest;
  const int a = node_of[app_rank];
  if (node_of[dest] == a) return dest;
  const auto& here = apps_of[a];
  const int serving = local_of[dest] % static_cast<int>(here.size());
  if (local_of[app_rank] == serving) return dest;
  return here[serving];
}

int node_key(MPI_Comm comm, std::uint32_t node_size) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (node_size > 0) return rank / static_cast<int>(node_size);
  MPI_Comm shared;
  FERRY_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared),
                  "grouping ranks by node");
  int lowest = rank;
  FERRY_MPI_CHECK(MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, shared), "naming the node");
  MPI_Comm_free(&shared);
  return lowest;
}

std::vector<int> all_node_keys(MPI_Comm comm, std::uint32_t node_size) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  int mine = node_key(comm, node_size);
  std::vector<int> keys(static_cast<std::size_t>(size));
  FERRY_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, keys.data(), 1, MPI_INT, comm), "sharing node keys");
  return keys;
}

int host_local_rank(MPI_Comm comm) {
  int rank = 0, local = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm shared;
  FERRY_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared),
                  "finding the ranks of this host");
  MPI_Comm_rank(shared, &local);
  MPI_Comm_free(&shared);
  return local;
}

void pin_this_thread(int cpu, const char* who) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) {
    ferry::log::app().warn("ferry route: cannot pin the {} to cpu {}: {}", who, cpu, std::strerror(rc));
  } else {
    ferry::log::app().debug("ferry route: {} pinned to cpu {}", who, cpu);
  }
}

}  // namespace ferry::route::detail
