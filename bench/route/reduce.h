#pragma once
// All-reduce helpers over an MPI communicator, for the route applications'
// verification and reports (Ferry's and the peer libraries').

#include <mpi.h>

#include <cstdint>

namespace ferry::route::bench {

inline std::uint64_t sum_u64(MPI_Comm comm, std::uint64_t v) {
  std::uint64_t out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, comm);
  return out;
}

inline double sum_f64(MPI_Comm comm, double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm);
  return out;
}

inline bool all_true(MPI_Comm comm, bool v) {
  int in = v ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

}  // namespace ferry::route::bench
