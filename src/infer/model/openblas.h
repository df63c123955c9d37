#pragma once
// OpenBLAS, loaded (dlopen) when the first CPU model is made rather than linked.
// Its pthread build starts a thread pool as soon as it is loaded; a process
// that blocks signals for a signalfd (every ferry command does, first thing)
// must do so before any thread exists, or SIGINT lands on a pool thread and
// kills the process. Loading it late also keeps the pool out of processes
// that never embed on the CPU.

#include <cblas.h>

namespace ferry::infer {

struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_num_threads) get_num_threads = nullptr;
  decltype(&openblas_get_parallel) get_parallel = nullptr;  // 0: a serial build, 1: pthreads, 2: OpenMP
};

// Loads libopenblas.so.0 once; throws ferry::Error naming the package when it cannot.
const OpenBlas& openblas();

}  // namespace ferry::infer
