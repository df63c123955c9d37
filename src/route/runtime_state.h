#pragma once
// What ferry::route::Runtime learnt at start and the Engine builds on.

#include <mpi.h>

#include <cstdint>

#include "ferry/route/options.h"
#include "route/mailbox.h"
#include "route/topology.h"

namespace ferry::route::detail {

struct RuntimeState {
  Options options;
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm app_comm = MPI_COMM_NULL;  // world without the routers
  Topology topology;                  // of the application ranks
  int host_local = 0;                 // index among this host's application ranks (CPU lists)
  // Process mode, application side: this node's mailbox and our client in it.
  Mailbox mailbox;
  std::uint32_t client = 0;
  bool engine_created = false;
};

}  // namespace ferry::route::detail
