// ferry l2fwd's GPU modes, end to end: the pcap checks of l2fwd_test with each
// launch method, and back-pressure with a slow kernel. Exits 77 (skipped)
// where there is no CUDA device.

#include <gtest/gtest.h>

#include <cstdio>

#include "ferry/worker/cuda_backend.h"
#include "l2fwd_runner.h"

namespace ferry::test {
namespace {

constexpr std::size_t kFrames = 4000;

class L2fwdGpu : public ::testing::TestWithParam<const char*> {};

TEST_P(L2fwdGpu, SwapsTheMacsOfEveryFrameInOrder) {
  L2fwdRunner r;
  const auto frames = mixed_frames(kFrames, 11);
  write_pcap(r.in_pcap(), frames);
  for (const char* burst : {"1", "32", "256"}) {
    SCOPED_TRACE(std::string("burst ") + burst);
    const L2fwdRun run = r.run(r.pcap_vdev(), L2fwdRunner::lossless({"--mode", GetParam(), "--burst", burst, "-v", std::to_string(kFrames)}));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    expect_forwarded(frames, read_pcap(r.out_pcap()), true);
    EXPECT_EQ(run.stats["total"]["tx_packets"], kFrames);
    EXPECT_EQ(run.stats["mbufs_not_returned"], 0);
  }
}

TEST_P(L2fwdGpu, ASlowKernelDropsCountsAndKeepsForwarding) {
  L2fwdRunner r;
  const L2fwdRun run = r.run({"--vdev", "net_null0,size=64"},
                             {"--mode", GetParam(), "-t", "50000", "-b", "32", "--items", "16", "-v", "1000000"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GT(run.stats["total"]["dropped_full"], 0);
  EXPECT_GT(run.stats["total"]["tx_packets"], 0);
  EXPECT_EQ(run.stats["mbufs_not_returned"], 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, L2fwdGpu, ::testing::Values("burst", "persistent", "graph", "memops"));

}  // namespace
}  // namespace ferry::test

int main(int argc, char** argv) {
  if (ferry::worker::cuda_device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
