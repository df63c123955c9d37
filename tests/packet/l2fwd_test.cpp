// ferry l2fwd end to end on DPDK's virtual ports, with the CPU worker: net_pcap
// for exact checks of what comes out, net_null for a source faster than the
// worker. The GPU modes run the same checks in l2fwd_gpu_test.

#include <gtest/gtest.h>

#include <csignal>

#include "l2fwd_runner.h"

namespace ferry::test {
namespace {

constexpr std::size_t kFrames = 2000;

TEST(L2fwd, CpuModeSwapsTheMacsOfEveryFrameInOrder) {
  L2fwdRunner r;
  const auto frames = mixed_frames(kFrames, 1);
  write_pcap(r.in_pcap(), frames);
  const L2fwdRun run = r.run(r.pcap_vdev(), L2fwdRunner::lossless({"--mode", "cpu", "--burst", "32", "-v", std::to_string(kFrames)}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_forwarded(frames, read_pcap(r.out_pcap()), true);
  ASSERT_TRUE(run.stats.is_object()) << run.output;
  EXPECT_EQ(run.stats["total"]["rx_packets"], kFrames);
  EXPECT_EQ(run.stats["total"]["tx_packets"], kFrames);
  EXPECT_EQ(run.stats["total"]["dropped"], 0);
  EXPECT_EQ(run.stats["mbufs_not_returned"], 0);
  EXPECT_GT(run.stats["total"]["burst_latency_p50_us"], 0.0);
}

// l2fwd-nv's own flags: -w 0 is "no workload", so frames go back unchanged.
TEST(L2fwd, AnL2fwdNvCommandLineWorksAndWorkloadZeroForwardsUnchanged) {
  L2fwdRunner r;
  const auto frames = mixed_frames(kFrames, 2);
  write_pcap(r.in_pcap(), frames);
  const L2fwdRun run = r.run(r.pcap_vdev(), L2fwdRunner::lossless({"-b", "64", "-d", "2048", "-g", "0", "-m", "0", "-p", "1",
                                                                   "-t", "0", "-w", "0", "-z", "0", "-n", "0", "-s", "0",
                                                                   "-v", std::to_string(kFrames)}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_forwarded(frames, read_pcap(r.out_pcap()), false);
}

// Packets that arrive during the warm-up are forwarded but not measured.
TEST(L2fwd, WarmUpPacketsAreForwardedButNotCounted) {
  L2fwdRunner r;
  const auto frames = mixed_frames(kFrames, 3);
  write_pcap(r.in_pcap(), frames);
  const L2fwdRun run = r.run(r.pcap_vdev(), L2fwdRunner::lossless({"-w", "1", "-b", "16", "-z", "500", "-v", std::to_string(kFrames - 500)}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_forwarded(frames, read_pcap(r.out_pcap()), true);
  EXPECT_EQ(run.stats["total"]["tx_packets"], kFrames - 500);
}

// A frame larger than one buffer arrives as a chain of mbufs, which no worker
// can handle in place: it is dropped and counted, and the others go through.
TEST(L2fwd, AFrameLargerThanABufferIsCountedAsSegmentedAndTheRestForwarded) {
  L2fwdRunner r;
  auto frames = mixed_frames(100, 4);
  Frame jumbo(4000, 0x5a);
  frames.insert(frames.begin() + 50, jumbo);
  write_pcap(r.in_pcap(), frames);
  const L2fwdRun run = r.run(r.pcap_vdev(), L2fwdRunner::lossless({"--mode", "cpu", "-d", "2048", "-v", "101"}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  frames.erase(frames.begin() + 50);
  expect_forwarded(frames, read_pcap(r.out_pcap()), true);
  EXPECT_EQ(run.stats["total"]["dropped_segmented"], 1);
  EXPECT_EQ(run.stats["mbufs_not_returned"], 0);
}

// Back-pressure: a worker that spends 100 us a packet cannot keep up with
// net_null. RX drops what does not fit in the list, counts it, and goes on; no
// mbuf is lost and nothing aborts (where l2fwd-nv quits with "burst is not free").
TEST(L2fwd, ASlowWorkerDropsCountsAndKeepsForwardingWithoutLosingMbufs) {
  L2fwdRunner r;
  const L2fwdRun run = r.run({"--vdev", "net_null0,size=64"},
                             {"--mode", "cpu", "-t", "100000", "-b", "8", "--items", "4", "-v", "2000000"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto& total = run.stats["total"];
  EXPECT_GT(total["dropped_full"], 0);
  EXPECT_GT(total["tx_packets"], 4 * 8) << "it kept forwarding after the list first filled";
  EXPECT_EQ(total["dropped_full"].get<std::uint64_t>() + total["rx_packets"].get<std::uint64_t>(), 2000000u);
  EXPECT_EQ(total["tx_packets"], total["rx_packets"]);
  EXPECT_EQ(run.stats["mbufs_not_returned"], 0);
}

TEST(L2fwd, RefusesWhatItCannotDoWithAClearReason) {
  L2fwdRunner r;
  write_pcap(r.in_pcap(), mixed_frames(10, 5));
  const L2fwdRun device = r.run(r.pcap_vdev(), {"--mode", "cpu", "--mem", "device", "-v", "10"});
  EXPECT_NE(device.exit_code, 0);
  EXPECT_NE(device.output.find("--mem device"), std::string::npos) << device.output;
  const L2fwdRun lcores = r.run({"--vdev", "net_null0"}, {"--mode", "cpu", "-p", "2", "-v", "10"});
  EXPECT_NE(lcores.exit_code, 0);
  EXPECT_NE(lcores.output.find("need 4 worker lcores"), std::string::npos) << lcores.output;
  const L2fwdRun port = r.run({"--vdev", "net_null0"}, {"--mode", "cpu", "--port", "3", "-v", "10"});
  EXPECT_NE(port.exit_code, 0);
  EXPECT_NE(port.output.find("port 3 does not exist"), std::string::npos) << port.output;
  const L2fwdRun mode = r.run({"--vdev", "net_null0"}, {"--mode", "warp"});
  EXPECT_NE(mode.exit_code, 0);
  const L2fwdRun items = r.run({"--vdev", "net_null0"}, {"--items", "48", "-v", "10"});
  EXPECT_NE(items.exit_code, 0);
  EXPECT_NE(items.output.find("power of two"), std::string::npos) << items.output;
}

// What a user needs to pick a port and -p: each port's driver, queues and RSS
// hashes; and the reason, by name, when a device made no port or a port cannot
// carry the pipelines asked of it.
TEST(L2fwd, ListsPortsAndNamesMissingDriversTooFewQueuesAndNoRss) {
  L2fwdRunner r;
  write_pcap(r.in_pcap(), mixed_frames(10, 5));
  std::vector<std::string> two_ports = r.pcap_vdev();
  two_ports.insert(two_ports.end(), {"--vdev", "net_null0"});
  const L2fwdRun list = r.run_as_given(two_ports, {"--list-ports"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("2 port(s)"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("port 0 (net_pcap0, driver net_pcap): queues rx 1 tx 1 | RSS none"),
            std::string::npos)
      << list.output;
  EXPECT_NE(list.output.find("port 1 (net_null0, driver net_null): queues rx 1024 tx 1024 | RSS ipv4"),
            std::string::npos)
      << list.output;

  const L2fwdRun missing = r.run_as_given({"--vdev", "net_nosuchdriver0"}, {"--list-ports"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("A --vdev names a driver that is not loaded"), std::string::npos)
      << missing.output;
  const L2fwdRun refused = r.run_as_given({"--vdev", "net_af_packet0,iface=no-such-if"}, {"--list-ports"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("--vdev net_af_packet0 made no port"), std::string::npos) << refused.output;

  const L2fwdRun queues = r.run(r.pcap_vdev(), {"--mode", "cpu", "-p", "2", "-v", "10"}, 5);
  EXPECT_NE(queues.exit_code, 0);
  EXPECT_NE(queues.output.find("has 1 RX and 1 TX queues, and -p 2 needs one of each per pipeline"),
            std::string::npos)
      << queues.output;
  // net_vhost has queues, reports no RSS and spreads nothing itself. A static
  // build (FERRY_DPDK_LINK=static) has no net_vhost, and says so.
  const std::string vhost = "net_vhost0,iface=" + (r.dir() / "vhost.sock").string() + ",queues=2";
  const L2fwdRun rss = r.run({"--vdev", vhost}, {"--mode", "cpu", "-p", "2", "-v", "10"}, 5);
  EXPECT_NE(rss.exit_code, 0);
  const bool static_build = rss.output.find("links DPDK statically") != std::string::npos;
  EXPECT_TRUE(static_build ||
              rss.output.find("(net_vhost0, driver net_vhost) has no RSS, so -p 2 would leave "
                              "every flow on queue 0") != std::string::npos)
      << rss.output;
}

// A pool that cannot hold what the list and the queues hold at once leaves RX
// without an mbuf for good. It is refused at start with the count needed, and
// exactly that count forwards. Here: the list's 4 items x 8 packets, the burst
// RX receives into to drop while the list is full, 1024 RX and 1024 TX descriptors.
TEST(L2fwd, APoolTooSmallForTheListAndTheQueuesIsRefusedWithTheCountNeeded) {
  L2fwdRunner r;
  const std::vector<std::string> null_port{"--vdev", "net_null0,size=64"};
  const std::vector<std::string> flags{"--mode", "cpu", "-b", "8", "--items", "4", "-v", "100000"};
  auto with_mbufs = [&](const char* n) {
    auto f = flags;
    f.insert(f.end(), {"--mbufs", n});
    return f;
  };
  const L2fwdRun small = r.run(null_port, with_mbufs("10"), 3, 30);
  EXPECT_NE(small.exit_code, 0);
  EXPECT_NE(small.output.find("--mbufs 10 is too few"), std::string::npos) << small.output;
  EXPECT_NE(small.output.find("2088"), std::string::npos) << small.output;
  const L2fwdRun one_short = r.run(null_port, with_mbufs("2087"), 3, 30);
  EXPECT_NE(one_short.exit_code, 0);
  EXPECT_NE(one_short.output.find("2088"), std::string::npos) << one_short.output;

  const L2fwdRun exact = r.run(null_port, with_mbufs("2088"), 3, 60);
  ASSERT_EQ(exact.exit_code, 0) << exact.output;
  const auto& total = exact.stats["total"];
  EXPECT_EQ(total["dropped_full"].get<std::uint64_t>() + total["rx_packets"].get<std::uint64_t>(), 100000u);
  EXPECT_EQ(total["tx_packets"], total["rx_packets"]);
  EXPECT_EQ(exact.stats["port"]["pool_dry"], 0);
  EXPECT_EQ(exact.stats["mbufs_not_returned"], 0);
}

// A driver may hold mbufs beyond its descriptors: net_pcap's infinite_rx keeps
// every frame of its file in mbufs of the pool. With 2084 frames in a pool of
// 2088, fewer than a burst are left and RX can never receive. That is counted
// and logged while it lasts, not a silent stall.
TEST(L2fwd, APoolThatRunsDryAtRunTimeIsCountedAndLogged) {
  L2fwdRunner r;
  write_pcap(r.in_pcap(), mixed_frames(2084, 6));
  Subprocess child = r.start({"--vdev", "net_pcap0,rx_pcap=" + r.in_pcap() + ",tx_pcap=" + r.out_pcap() + ",infinite_rx=1"},
                             {"--mode", "cpu", "-b", "8", "--items", "4", "--mbufs", "2088", "-v", "100"});
  EXPECT_TRUE(r.wait_for_output("packet pool ran dry", 30)) << "no warning that RX has no mbufs";
  child.signal(SIGINT);
  const L2fwdRun run = r.collect(child, 30);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.stats.is_object()) << run.output;
  EXPECT_GE(run.stats["port"]["pool_dry"].get<std::uint64_t>(), 1u) << run.output;
  EXPECT_EQ(run.stats["mbufs_not_returned"], 0);
}

// l2fwd's own duration flags refuse what is not a finite number of their unit,
// 0 or more, before the EAL starts (the other subcommands' are in cli_test.cpp).
TEST(L2fwd, DurationFlagsRefuseNanInfinityAndNegativeValues) {
  L2fwdRunner r;
  for (const char* flag : {"--stats-interval", "--burst-timeout-us", "--time-per-packet"}) {
    for (const char* value : {"nan", "inf", "-1", "1e300"}) {
      const L2fwdRun run = r.run_as_given({"--vdev", "net_null0"}, {"--mode", "cpu", "-v", "1000", flag, value}, 20);
      EXPECT_NE(run.exit_code, 0) << flag << " " << value;
      EXPECT_NE(run.output.find(std::string(flag) + ": " + value + " is not a duration"), std::string::npos)
          << flag << " " << value << ": " << run.output;
    }
  }
}

}  // namespace
}  // namespace ferry::test
