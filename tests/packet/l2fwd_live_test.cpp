// ferry l2fwd on a live link: a veth pair in a network namespace the test makes,
// with net_af_packet on one end and a generator on the other. The generator
// sends frames of a local-experimental EtherType (which the kernel ignores), and
// checks every reply: its MACs swapped, its payload unchanged, in order.
// Skipped with the reason where this process may not make a namespace.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>

#include "l2fwd_runner.h"

namespace ferry::test {
namespace {

constexpr std::uint16_t kEtherType = 0x88b5;  // IEEE 802 local experimental
constexpr int kFrames = 2000;
constexpr int kWindow = 32;  // frames in flight at most
constexpr int kSkip = 77;

// What the child reports through its exit status.
int fail(const char* what) {
  std::fprintf(stderr, "live l2fwd: %s (errno %s)\n", what, std::strerror(errno));
  return 1;
}

bool set_up_link() {
  // fa: ferry's end (net_af_packet); fb: the generator's. IPv6 off where
  // /proc/sys allows, so the kernel sends little of its own; the generator
  // ignores any other EtherType anyway.
  return std::system("ip link add fa type veth peer name fb && "
                     "{ for i in fa fb; do echo 1 > /proc/sys/net/ipv6/conf/$i/disable_ipv6; done; } 2>/dev/null; "
                     "ip link set fa up && ip link set fb up") == 0;
}

Frame make_frame(int i, std::mt19937& rng) {
  Frame f(60 + rng() % 1455);
  const std::uint8_t dst[6] = {0x02, 0, 0, 0, 0, 0x01}, src[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(&f[0], dst, 6);
  std::memcpy(&f[6], src, 6);
  f[12] = kEtherType >> 8;
  f[13] = kEtherType & 0xff;
  for (std::size_t b = 14; b < f.size(); ++b) f[b] = static_cast<std::uint8_t>(rng());
  std::memcpy(&f[14], &i, sizeof i);
  return f;
}

// Sends kFrames, at most kWindow unanswered, and checks each reply in turn.
int generate(int fd, int ifindex) {
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = ifindex;
  to.sll_halen = 6;
  std::mt19937 rng(7);
  std::vector<Frame> sent;
  int answered = 0;
  std::vector<std::uint8_t> buf(4096);
  while (answered < kFrames) {
    while (static_cast<int>(sent.size()) < kFrames && static_cast<int>(sent.size()) - answered < kWindow) {
      sent.push_back(make_frame(static_cast<int>(sent.size()), rng));
      if (sendto(fd, sent.back().data(), sent.back().size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0)
        return fail("sendto on fb failed");
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) {
      std::fprintf(stderr, "live l2fwd: no reply within 5 s after %d of %d\n", answered, kFrames);
      return 1;
    }
    sockaddr_ll from{};
    socklen_t len = sizeof from;
    const ssize_t n = recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) return fail("recvfrom on fb failed");
    if (from.sll_pkttype == PACKET_OUTGOING) continue;  // our own frames, seen leaving
    const Frame reply(buf.begin(), buf.begin() + n);
    const Frame want = mac_swapped(sent[answered]);
    if (reply != want) {
      std::fprintf(stderr, "live l2fwd: reply %d (%zd bytes) is not frame %d with its MACs swapped\n", answered, n,
                   answered);
      return 1;
    }
    ++answered;
  }
  return 0;
}

int live_run() {
  if (unshare(CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "network namespaces are not permitted here: unshare(CLONE_NEWNET): %s\n",
                 std::strerror(errno));
    return kSkip;
  }
  if (!set_up_link()) {
    std::fprintf(stderr, "cannot make a veth pair in the new namespace (ip link add): no CAP_NET_ADMIN, or no iproute2\n");
    return kSkip;
  }
  const int fd = socket(AF_PACKET, SOCK_RAW, htons(kEtherType));
  if (fd < 0) return fail("a raw socket on fb");
  sockaddr_ll at{};
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(kEtherType);
  at.sll_ifindex = static_cast<int>(if_nametoindex("fb"));
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) return fail("binding to fb");

  L2fwdRunner r;
  Subprocess ferry = r.start({"--vdev", "net_af_packet0,iface=fa"},
                             {"--mode", "cpu", "--burst", "32", "--burst-timeout-us", "20", "--when-full", "wait"});
  // The port is up once ferry says which pipelines it runs.
  if (!r.wait_for_output("pipeline(s) on port", 60)) {
    ferry.kill();
    std::fprintf(stderr, "live l2fwd: ferry l2fwd did not bring the port up within 60 s\n");
    return 1;
  }
  const int generated = generate(fd, at.sll_ifindex);
  ferry.signal(SIGINT);
  const L2fwdRun run = r.collect(ferry, 60);
  close(fd);
  if (generated != 0) return generated;
  if (run.exit_code != 0) return 1;
  if (!run.stats.is_object() || run.stats["mbufs_not_returned"] != 0 ||
      run.stats["total"]["tx_packets"].get<std::uint64_t>() < kFrames) {
    std::fprintf(stderr, "live l2fwd: statistics do not add up:\n%s\n", run.stats.dump(2).c_str());
    return 1;
  }
  return 0;
}

TEST(L2fwdLive, AVethPairThroughAfPacketGetsEveryFrameBackSwappedAndInOrder) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(live_run());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the namespace's child died by a signal";
  if (WEXITSTATUS(status) == kSkip) GTEST_SKIP() << "no network namespace with a veth pair here (see the log above)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the log above";
}

}  // namespace
}  // namespace ferry::test
