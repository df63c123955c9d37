// ferry l2fwd on a live link: a veth pair in a network namespace the test makes,
// with net_af_packet on one end and a generator on the other.
// - One pipeline: frames of a local-experimental EtherType (which the kernel
//   ignores), every reply checked in order: its MACs swapped, its payload unchanged.
// - Several pipelines (net_af_packet's qpairs, which the kernel's PACKET_FANOUT_HASH
//   spreads by flow): IPv4 and IPv6 UDP and TCP frames of many 5-tuples, every
//   reply matched to its frame, swapped and intact; each pipeline got flows, the
//   pipelines' counters add up to the total, and nothing was dropped under
//   --when-full wait.
// - The same on net_tap, whose queues the kernel's tun driver picks by flow hash:
//   ferry makes the interface, and the generator sends into its kernel side.
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
#include <fstream>
#include <optional>
#include <random>
#include <string>

#include "l2fwd_runner.h"

namespace ferry::test {
namespace {

constexpr std::uint16_t kEtherType = 0x88b5;  // IEEE 802 local experimental
// "FRRY": the generators' frames end with it and their index, so that a reply
// names the frame it answers.
constexpr std::uint32_t kMagic = 0x46525259;
constexpr int kFrames = 2000;
constexpr int kWindow = 32;  // frames in flight at most
constexpr int kSkip = 77;

// What the child reports through its exit status.
int fail(const char* what) {
  std::fprintf(stderr, "live l2fwd: %s (errno %s)\n", what, std::strerror(errno));
  return 1;
}

// fa: ferry's end (net_af_packet); fb: the generator's. IPv6 off where
// /proc/sys allows, so the kernel sends little of its own; the generators
// ignore frames that are not theirs anyway.
bool set_up_link(unsigned queues) {
  const std::string q = std::to_string(queues);
  const std::string cmd = "ip link add fa numtxqueues " + q + " numrxqueues " + q +
                          " type veth peer name fb && " +
                          "{ for i in fa fb; do echo 1 > /proc/sys/net/ipv6/conf/$i/disable_ipv6; done; } "
                          "2>/dev/null; ip link set fa up && ip link set fb up";
  return std::system(cmd.c_str()) == 0;
}

// A private network namespace: as root, or as root of a user namespace of its
// own where unprivileged ones are allowed (as `unshare -rn` does). 0, or kSkip
// with the reason.
int enter_namespace() {
  if (unshare(CLONE_NEWNET) == 0) return 0;
  const int why = errno;
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
    std::ofstream("/proc/self/setgroups") << "deny";
    std::ofstream("/proc/self/uid_map") << "0 " << uid << " 1";
    std::ofstream("/proc/self/gid_map") << "0 " << gid << " 1";
    return 0;
  }
  std::fprintf(
      stderr,
      "network namespaces are not permitted here: unshare(CLONE_NEWNET): %s; with a user namespace: %s\n",
      std::strerror(why), std::strerror(errno));
  return kSkip;
}

// A raw socket on interface `name` for `protocol` (network order), or -1.
int open_generator(const std::string& name, std::uint16_t protocol, int& ifindex) {
  const int fd = socket(AF_PACKET, SOCK_RAW, protocol);
  if (fd < 0) return -1;
  sockaddr_ll at{};
  at.sll_family = AF_PACKET;
  at.sll_protocol = protocol;
  at.sll_ifindex = ifindex = static_cast<int>(if_nametoindex(name.c_str()));
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_frame(int fd, int ifindex, const Frame& f) {
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = ifindex;
  to.sll_halen = 6;
  return sendto(fd, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) >= 0;
}

// The next frame that arrives on fb (not one leaving it), or nullopt after 5 s.
std::optional<Frame> receive_frame(int fd, std::vector<std::uint8_t>& buf) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) return std::nullopt;
    sockaddr_ll from{};
    socklen_t len = sizeof from;
    const ssize_t n = recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 0) return std::nullopt;
    if (from.sll_pkttype == PACKET_OUTGOING) continue;  // our own frames, seen leaving
    return Frame(buf.begin(), buf.begin() + n);
  }
}

void put_mac_pair(Frame& f) {
  const std::uint8_t dst[6] = {0x02, 0, 0, 0, 0, 0x01}, src[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(&f[0], dst, 6);
  std::memcpy(&f[6], src, 6);
}

void end_with_index(Frame& f, int i) {
  std::memcpy(&f[f.size() - 8], &kMagic, 4);
  std::memcpy(&f[f.size() - 4], &i, 4);
}

Frame make_frame(int i, std::mt19937& rng) {
  Frame f(60 + rng() % 1455);
  put_mac_pair(f);
  f[12] = kEtherType >> 8;
  f[13] = kEtherType & 0xff;
  for (std::size_t b = 14; b < f.size(); ++b) f[b] = static_cast<std::uint8_t>(rng());
  end_with_index(f, i);
  return f;
}

// Flows: IPv4 and IPv6, UDP and TCP, each of its own addresses and ports.
constexpr int kFlows = 96;

void put16(Frame& f, std::size_t at, std::uint16_t v) {
  f[at] = static_cast<std::uint8_t>(v >> 8);
  f[at + 1] = static_cast<std::uint8_t>(v);
}

// Frame i of flow i % kFlows: Ethernet, IPv4 or IPv6, UDP or TCP, random bytes,
// then kMagic and i.
Frame make_flow_frame(int i, std::mt19937& rng) {
  const int flow = i % kFlows;
  const bool v6 = flow % 2 == 1, tcp = flow / 2 % 2 == 1;
  const std::size_t l3 = v6 ? 40 : 20, l4 = tcp ? 20 : 8;
  const std::size_t payload = 8 + rng() % 1200;
  Frame f(14 + l3 + l4 + payload);
  put_mac_pair(f);
  put16(f, 12, v6 ? 0x86dd : 0x0800);
  const std::uint8_t proto = tcp ? 6 : 17;
  std::size_t at = 14;
  if (v6) {
    f[at] = 0x60;
    put16(f, at + 4, static_cast<std::uint16_t>(l4 + payload));
    f[at + 6] = proto;
    f[at + 7] = 64;
    f[at + 8] = f[at + 24] = 0xfd;  // fd00::/8, unique local
    f[at + 23] = static_cast<std::uint8_t>(flow);
    f[at + 39] = static_cast<std::uint8_t>(flow * 7 + 1);
  } else {
    f[at] = 0x45;
    put16(f, at + 2, static_cast<std::uint16_t>(l3 + l4 + payload));
    f[at + 8] = 64;
    f[at + 9] = proto;
    const std::uint8_t src[4] = {10, 0, 0, static_cast<std::uint8_t>(flow)};
    const std::uint8_t dst[4] = {10, 1, static_cast<std::uint8_t>(flow), 1};
    std::memcpy(&f[at + 12], src, 4);
    std::memcpy(&f[at + 16], dst, 4);
    std::uint32_t sum = 0;
    for (std::size_t b = 0; b < 20; b += 2) sum += (f[at + b] << 8) | f[at + b + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    put16(f, at + 10, static_cast<std::uint16_t>(~sum));
  }
  at += l3;
  put16(f, at, static_cast<std::uint16_t>(10000 + flow));
  put16(f, at + 2, static_cast<std::uint16_t>(20000 + flow * 13));
  if (tcp) {
    f[at + 12] = 5 << 4;  // data offset: 5 words
    f[at + 13] = 0x10;    // ACK
  } else {
    put16(f, at + 4, static_cast<std::uint16_t>(l4 + payload));
  }
  at += l4;
  for (std::size_t b = at; b < f.size() - 8; ++b) f[b] = static_cast<std::uint8_t>(rng());
  end_with_index(f, i);
  return f;
}

using MakeFrame = Frame (*)(int i, std::mt19937& rng);

// Sends kFrames made by `make`, at most kWindow unanswered. Each reply must be a
// frame sent and not yet answered (the next one, if `in_order`), its MACs
// swapped and every other byte unchanged. Several pipelines answer in any order
// across flows.
int generate(int fd, int ifindex, MakeFrame make, bool in_order) {
  std::mt19937 rng(11);
  std::vector<Frame> sent;
  std::vector<bool> back(kFrames, false);
  int answered = 0;
  std::vector<std::uint8_t> buf(4096);
  while (answered < kFrames) {
    while (static_cast<int>(sent.size()) < kFrames && static_cast<int>(sent.size()) - answered < kWindow) {
      sent.push_back(make(static_cast<int>(sent.size()), rng));
      if (!send_frame(fd, ifindex, sent.back())) return fail("sendto on fb failed");
    }
    const std::optional<Frame> reply = receive_frame(fd, buf);
    if (!reply) {
      std::fprintf(stderr, "live l2fwd: no reply within 5 s after %d of %d\n", answered, kFrames);
      return 1;
    }
    std::uint32_t magic = 0;
    int i = -1;
    if (reply->size() >= 22) {
      std::memcpy(&magic, &(*reply)[reply->size() - 8], 4);
      std::memcpy(&i, &(*reply)[reply->size() - 4], 4);
    }
    if (magic != kMagic) continue;  // the kernel's own, forwarded
    if (i < 0 || i >= static_cast<int>(sent.size()) || back[i] || (in_order && i != answered)) {
      std::fprintf(stderr, "live l2fwd: reply %d names frame %d: not sent, back already, or out of order\n",
                   answered, i);
      return 1;
    }
    if (*reply != mac_swapped(sent[i])) {
      std::fprintf(stderr, "live l2fwd: reply to frame %d (%zu bytes) is not it with its MACs swapped\n", i,
                   reply->size());
      return 1;
    }
    back[i] = true;
    ++answered;
  }
  return 0;
}

// The statistics of a run of `pipelines`: each pipeline's counters add up to
// the total, nothing dropped, every mbuf back, at least `frames` forwarded,
// and (with several pipelines) every pipeline got some.
int check_stats(const L2fwdRun& run, unsigned pipelines) {
  const nlohmann::json& s = run.stats;
  bool ok = s.is_object() && s["mbufs_not_returned"] == 0 && s["pipelines"].size() == pipelines;
  if (ok) {
    for (const char* key : {"rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "dropped"}) {
      std::uint64_t sum = 0;
      for (const auto& p : s["pipelines"]) sum += p[key].get<std::uint64_t>();
      ok = ok && sum == s["total"][key].get<std::uint64_t>();
    }
    for (const auto& p : s["pipelines"])
      ok = ok && (pipelines == 1 || p["rx_packets"].get<std::uint64_t>() > 0);
    ok = ok && s["total"]["dropped"] == 0 && s["total"]["tx_packets"].get<std::uint64_t>() >= kFrames &&
         s["total"]["tx_packets"] == s["total"]["rx_packets"];
  }
  if (!ok) {
    std::fprintf(stderr, "live l2fwd: statistics do not add up:\n%s\n", s.dump(2).c_str());
    return 1;
  }
  std::string spread;
  for (const auto& p : s["pipelines"]) spread += " " + std::to_string(p["rx_packets"].get<std::uint64_t>());
  std::fprintf(stderr, "live l2fwd: %u pipeline(s) received%s frames\n", pipelines, spread.c_str());
  return 0;
}

// The port ferry forwards on, and where the generator sends from.
enum class Link {
  AfPacket,  // net_af_packet on fa, one end of a veth pair; the generator on fb
  Tap,       // net_tap makes ft; the generator sends into ft's kernel side
};

// ferry l2fwd with `pipelines` pipelines, and a generator on the other side.
int live_run(unsigned pipelines, Link link) {
  if (const int r = enter_namespace(); r != 0) return r;
  std::string vdev, generator_if;
  if (link == Link::AfPacket) {
    if (!set_up_link(pipelines)) {
      std::fprintf(stderr,
                   "cannot make a veth pair in the new namespace (ip link add): no CAP_NET_ADMIN, or no "
                   "iproute2\n");
      return kSkip;
    }
    vdev = "net_af_packet0,iface=fa,qpairs=" + std::to_string(pipelines);
    generator_if = "fb";
  } else {
    // Interfaces made from now on start without IPv6, so ft sends little of its own.
    std::ofstream("/proc/sys/net/ipv6/conf/default/disable_ipv6") << "1";
    vdev = "net_tap0,iface=ft";
    generator_if = "ft";
  }

  L2fwdRunner r;
  const std::string p = std::to_string(pipelines);
  Subprocess ferry =
      r.start({"--vdev", vdev},
              {"--mode", "cpu", "-p", p, "--burst", "32", "--burst-timeout-us", "20", "--when-full", "wait"},
              2 * pipelines + 1);
  // The port is up once ferry says which pipelines it runs.
  if (!r.wait_for_output("pipeline(s) on port", 60)) {
    ferry.kill();
    const L2fwdRun failed = r.collect(ferry, 10);
    if (failed.output.find("links DPDK statically") != std::string::npos) {
      std::fprintf(stderr, "live l2fwd: this ferry links DPDK statically, without %s\n", vdev.c_str());
      return kSkip;
    }
    std::fprintf(stderr, "live l2fwd: ferry l2fwd did not bring the port up within 60 s\n");
    return 1;
  }
  int ifindex = 0;
  const int fd = open_generator(generator_if, pipelines == 1 ? htons(kEtherType) : htons(ETH_P_ALL), ifindex);
  if (fd < 0) {
    ferry.kill();
    return fail("a raw socket for the generator");
  }
  const int generated = pipelines == 1 ? generate(fd, ifindex, make_frame, true)
                                       : generate(fd, ifindex, make_flow_frame, false);
  ferry.signal(SIGINT);
  const L2fwdRun run = r.collect(ferry, 60);
  close(fd);
  if (generated != 0) return generated;
  if (run.exit_code != 0) return 1;
  return check_stats(run, pipelines);
}

// Runs live_run in a child, whose namespace goes with it.
void expect_live(unsigned pipelines, Link link = Link::AfPacket) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(live_run(pipelines, link));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the namespace's child died by a signal";
  if (WEXITSTATUS(status) == kSkip)
    GTEST_SKIP() << "no network namespace with a veth pair here (see the log above)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the log above";
}

TEST(L2fwdLive, AVethPairThroughAfPacketGetsEveryFrameBackSwappedAndInOrder) {
  expect_live(1);
}

TEST(L2fwdLive, TwoPipelinesSpreadIpv4AndIpv6FlowsAndEveryFrameComesBackSwapped) {
  expect_live(2);
}

TEST(L2fwdLive, ThreePipelinesSpreadIpv4AndIpv6FlowsAndEveryFrameComesBackSwapped) {
  expect_live(3);
}

TEST(L2fwdLive, TwoPipelinesOnATapInterfaceSpreadFlowsAndEveryFrameComesBackSwapped) {
  expect_live(2, Link::Tap);
}

}  // namespace
}  // namespace ferry::test
