#pragma once
// bale's conveyors for the peer applications: the C API, the start-up of a
// conveyor library built for MPI (not SHMEM or UPC), and its settings
// and counters for the report.

#include <mpi.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

extern "C" {
#include <convey.h>  // no extern "C" of its own

// A conveyor library on raw MPI (convey's mpp2mpi.c) keeps the rank and size
// in these globals, which only xmpi_init() sets: it calls MPI_Init. convey.h
// does not declare them; convey's own MPI examples (examples/example.h)
// declare them alike. A SHMEM or UPC build of libconvey has none of them.
extern long xmpi_my_proc, xmpi_n_procs;
int xmpi_init(int argc, char* argv[]);

// What convey_new() chooses (exported by libconvey.a, declared only in its
// private headers), for the report.
void convey_parameters(size_t max_bytes, size_t n_local, size_t* capacity, size_t* n_buffers, int* sync,
                       int* order);
size_t convey_procs_per_node(void);
}

namespace ferry::route::bench::peers {

// MPI for a raw-MPI conveyor library: xmpi_init() at the start (it calls
// MPI_Init and sets the globals above), MPI_Finalize at every way out.
struct ConveyMpi {
  ConveyMpi(int argc, char** argv) { xmpi_init(argc, argv); }
  ~ConveyMpi() { MPI_Finalize(); }
  ConveyMpi(const ConveyMpi&) = delete;
  ConveyMpi& operator=(const ConveyMpi&) = delete;
  int rank() const noexcept { return static_cast<int>(xmpi_my_proc); }
  int size() const noexcept { return static_cast<int>(xmpi_n_procs); }
};

// A conveyor or die: convey_new() returns NULL when it cannot build one.
inline convey_t* convey_or_abort(convey_t* c, const char* what) {
  if (c == nullptr) {
    std::fprintf(stderr, "%s: convey_new failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return c;
}

// Negative returns are misuse or internal errors (convey_FAIL is 0).
inline void convey_check(convey_t* c, int rc, const char* what) {
  if (rc < 0) {
    std::fprintf(stderr, "%s: %s\n", what, convey_error_string(c, rc));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

// convey_new(SIZE_MAX, 0, ...)'s choice: CONVEY_BUFFER_SIZE (bytes) or the
// configured default (MSGBYTES, 10000), CONVEY_NLOCAL or the ranks per host.
// Call after a convey_new() (the ranks per host are found collectively once).
inline std::string convey_config() {
  const std::size_t n_local = convey_procs_per_node();
  std::size_t capacity = 0, n_buffers = 0;
  int sync = 0, order = 0;
  convey_parameters(SIZE_MAX, n_local, &capacity, &n_buffers, &sync, &order);
  char text[200];
  std::snprintf(text, sizeof text,
                "convey %s mpi %s order=%d buffer_bytes=%zu buffers_per_link=%zu n_local=%zu", convey_version,
                sync ? "simple" : "tensor", order, capacity, n_buffers, n_local);
  return text;
}

// A conveyor's lifetime counters (call after convey_reset, which folds the
// session's into them).
inline nlohmann::json convey_stats(convey_t* c) {
  auto stat = [c](int which) { return convey_statistic(c, which + convey_CUMULATIVE); };
  return {{"begins", stat(convey_BEGINS)},     {"pushes", stat(convey_PUSHES)},
          {"pulls", stat(convey_PULLS)},       {"unpulls", stat(convey_UNPULLS)},
          {"advances", stat(convey_ADVANCES)}, {"buffers_sent", stat(convey_COMMS)},
          {"syncs", stat(convey_SYNCS)},       {"bytes_sent", stat(convey_BYTES)}};
}

}  // namespace ferry::route::bench::peers
