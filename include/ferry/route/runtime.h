#pragma once
// MPI start-up for the router: initialises MPI at the thread level the mode
// needs, reads the options (FERRY_ROUTE_* and --route-* flags), and in process
// mode turns one rank per node into that node's router.
//
// Process mode reserves the last world rank of every node (or virtual node, see
// Options::node_size) as a router, the way Casper reserves "ghost" processes:
// on those ranks the constructor runs the router until the node's applications
// have detached, finalises MPI and exits the process; it returns only on
// application ranks. So `mpirun -np 5` in process mode on one node runs four
// application ranks and one router, and comm() holds the four.

#include <mpi.h>

#include <memory>

#include "ferry/route/options.h"

namespace ferry::route {

namespace detail {
struct RuntimeState;
}

class Runtime {
 public:
  // Throws ferry::Error for bad options (before MPI_Init, so every rank fails alike)
  // or a process-mode layout without an application rank on some node.
  Runtime(int* argc, char*** argv);
  ~Runtime();  // MPI_Finalize
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The application ranks: MPI_COMM_WORLD without the routers.
  MPI_Comm comm() const noexcept;
  int rank() const noexcept;
  int size() const noexcept;
  const Options& options() const noexcept;

  detail::RuntimeState& state() noexcept { return *state_; }

 private:
  std::unique_ptr<detail::RuntimeState> state_;
};

}  // namespace ferry::route
