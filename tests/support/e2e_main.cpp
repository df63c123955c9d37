// main() of the end-to-end suite: --backend=cpu|cuda and --launch=METHOD pick
// the workers under test; a cuda run exits 77 (ctest: skipped) without a GPU.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "ferry/worker/backend.h"
#include "support/ferry_processes.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto& b = ferry::test::backend_under_test();
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--backend=", 10) == 0) b.backend = argv[i] + 10;
    if (std::strncmp(argv[i], "--launch=", 9) == 0) b.launch = argv[i] + 9;
  }
  if (b.backend == "cuda" && !ferry::worker::cuda_available()) {
    std::printf("no CUDA device here: skipping the %s/%s end-to-end suite\n", b.backend.c_str(), b.launch.c_str());
    return 77;
  }
  std::printf("end-to-end suite with %s workers (%s)\n", b.backend.c_str(), b.launch.c_str());
  return RUN_ALL_TESTS();
}
