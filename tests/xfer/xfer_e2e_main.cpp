// The transfer engine's end-to-end tests: a real `ferry agent` process, real
// tiers (files, a real redis-server), and the application API.
//   --mem=dram          application memory is shared host memory
//   --mem=vram          Vram buffers: emulated (memfd) where there is no GPU
//   --mem=vram --gpu    Vram must be real GPU memory (CUDA IPC): exits 77 without a GPU
//   --copy=METHOD       every agent copies device memory by METHOD (auto, batch, loop, kernel)
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "ferry/xfer/buffer.h"
#include "support/ferry_processes.h"
#include "xfer_test_env.h"

namespace ferry::test {
XferTestEnv& xfer_env() {
  static XferTestEnv env;
  return env;
}
}  // namespace ferry::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bool require_gpu = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mem=dram") ferry::test::xfer_env().mem = ferry::xfer::MemType::Dram;
    if (a == "--mem=vram") ferry::test::xfer_env().mem = ferry::xfer::MemType::Vram;
    if (a == "--gpu") require_gpu = true;
    if (a.starts_with("--copy=")) ferry::test::agent_flags_under_test() = {"--copy", a.substr(7)};
  }
  if (require_gpu) {
    if (!ferry::xfer::vram_is_gpu()) {
      std::fprintf(stderr, "no GPU here: skipping the CUDA IPC run\n");
      return 77;
    }
  } else if (ferry::test::xfer_env().mem == ferry::xfer::MemType::Vram) {
    setenv("FERRY_XFER_EMULATE_VRAM", "1", 1);  // the CPU-mode stand-in, as in CI
  }
  return RUN_ALL_TESTS();
}
