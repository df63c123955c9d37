#include "ports.h"

#include <rte_dev.h>
#include <rte_ethdev.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <utility>

#include "ferry/core/status.h"

namespace ferry::packet {
namespace {

// RTE_ETH_RSS_* by name; bits not named here print in hex.
constexpr std::pair<std::uint64_t, const char*> kRssHashes[] = {
    {RTE_ETH_RSS_IPV4, "ipv4"},
    {RTE_ETH_RSS_FRAG_IPV4, "ipv4-frag"},
    {RTE_ETH_RSS_NONFRAG_IPV4_TCP, "ipv4-tcp"},
    {RTE_ETH_RSS_NONFRAG_IPV4_UDP, "ipv4-udp"},
    {RTE_ETH_RSS_NONFRAG_IPV4_SCTP, "ipv4-sctp"},
    {RTE_ETH_RSS_NONFRAG_IPV4_OTHER, "ipv4-other"},
    {RTE_ETH_RSS_IPV6, "ipv6"},
    {RTE_ETH_RSS_FRAG_IPV6, "ipv6-frag"},
    {RTE_ETH_RSS_NONFRAG_IPV6_TCP, "ipv6-tcp"},
    {RTE_ETH_RSS_NONFRAG_IPV6_UDP, "ipv6-udp"},
    {RTE_ETH_RSS_NONFRAG_IPV6_SCTP, "ipv6-sctp"},
    {RTE_ETH_RSS_NONFRAG_IPV6_OTHER, "ipv6-other"},
    {RTE_ETH_RSS_L2_PAYLOAD, "l2-payload"},
    {RTE_ETH_RSS_IPV6_EX, "ipv6-ex"},
    {RTE_ETH_RSS_IPV6_TCP_EX, "ipv6-tcp-ex"},
    {RTE_ETH_RSS_IPV6_UDP_EX, "ipv6-udp-ex"},
    {RTE_ETH_RSS_PORT, "port"},
    {RTE_ETH_RSS_VXLAN, "vxlan"},
    {RTE_ETH_RSS_GENEVE, "geneve"},
    {RTE_ETH_RSS_NVGRE, "nvgre"},
    {RTE_ETH_RSS_GTPU, "gtpu"},
    {RTE_ETH_RSS_ETH, "eth"},
    {RTE_ETH_RSS_S_VLAN, "s-vlan"},
    {RTE_ETH_RSS_C_VLAN, "c-vlan"},
    {RTE_ETH_RSS_ESP, "esp"},
    {RTE_ETH_RSS_AH, "ah"},
    {RTE_ETH_RSS_L2TPV3, "l2tpv3"},
    {RTE_ETH_RSS_PFCP, "pfcp"},
    {RTE_ETH_RSS_PPPOE, "pppoe"},
    {RTE_ETH_RSS_ECPRI, "ecpri"},
    {RTE_ETH_RSS_MPLS, "mpls"},
    {RTE_ETH_RSS_IPV4_CHKSUM, "ipv4-chksum"},
    {RTE_ETH_RSS_L4_CHKSUM, "l4-chksum"},
    {RTE_ETH_RSS_L3_SRC_ONLY, "l3-src-only"},
    {RTE_ETH_RSS_L3_DST_ONLY, "l3-dst-only"},
    {RTE_ETH_RSS_L4_SRC_ONLY, "l4-src-only"},
    {RTE_ETH_RSS_L4_DST_ONLY, "l4-dst-only"},
};

// What several pipelines ask of RSS: flows told apart by their IPv4 or IPv6
// addresses and TCP or UDP ports.
constexpr std::uint64_t kFlowHashes = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;

// Drivers whose queues get their share of the flows some other way than the
// RSS they report to ethdev (most report none), and how (docs/packet.md,
// "Ports and drivers"). Ferry configures no RSS on them.
constexpr std::pair<const char*, const char*> kOwnSpreading[] = {
    {"net_af_packet",
     "the kernel's PACKET_FANOUT_HASH: each frame's flow hash (addresses and ports) picks a queue's socket, "
     "and a "
     "full socket rolls frames over to the next"},
    {"net_af_xdp", "the NIC's own RSS in its kernel driver (ethtool -X), a queue per XDP socket"},
    {"net_tap",
     "the kernel's tun driver: each frame's flow hash picks the queue (the RSS net_tap reports is eBPF "
     "behind an "
     "rte_flow rule, which Ferry does not make)"},
    {"net_null", "each queue makes packets of its own"},
    {"net_ring", "each queue is a ring of its own"},
    {"net_pcap", "each queue reads a file of its own"},
    {"net_memif", "the peer picks the queue"},
};

std::string rss_names(std::uint64_t hashes) {
  std::string out;
  for (const auto& [bit, name] : kRssHashes)
    if (hashes & bit) {
      out += out.empty() ? "" : " ";
      out += name;
      hashes &= ~bit;
    }
  if (hashes != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%s0x%llx", out.empty() ? "" : " ",
                  static_cast<unsigned long long>(hashes));
    out += hex;
  }
  return out.empty() ? "none" : out;
}

template <typename NameOf>
std::string offload_names(std::uint64_t offloads, NameOf name_of) {
  std::string out;
  for (; offloads != 0; offloads &= offloads - 1) {
    out += out.empty() ? "" : " ";
    out += name_of(offloads & -offloads);
  }
  return out.empty() ? "none" : out;
}

std::string port_label(const PortInfo& p) {
  return "port " + std::to_string(p.port) + " (" + p.device + ", driver " + p.driver + ")";
}

std::string queue_hint(const PortInfo& p, std::uint32_t pipelines) {
  const std::string n = std::to_string(pipelines);
  const std::string fewer = "or fewer pipelines (-p " +
                            std::to_string(std::max<int>(1, std::min(p.max_rx_queues, p.max_tx_queues))) +
                            " at most)";
  if (p.driver == "net_af_packet") return "add qpairs=" + n + " to its --vdev, " + fewer;
  if (p.driver == "net_pcap")
    return "give its --vdev " + n + " rx_pcap= and tx_pcap= (a queue each), " + fewer;
  return "give the port more queues (a NIC's kernel driver: ethtool -L), " + fewer;
}

// A PCI address as DPDK names the device: domain:bus:device.function, lower case.
std::string full_pci_address(std::string a) {
  std::transform(a.begin(), a.end(), a.begin(), [](unsigned char c) { return std::tolower(c); });
  if (std::count(a.begin(), a.end(), ':') == 1) a = "0000:" + a;
  return a;
}

struct NamedDevice {
  std::string flag;  // --vdev, -a or --allow
  std::string name;  // as DPDK names the device
};

// The devices the EAL arguments name, each without its driver arguments.
std::vector<NamedDevice> named_devices(const std::vector<std::string>& args) {
  std::vector<NamedDevice> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string flag, value;
    if ((a == "--vdev" || a == "-a" || a == "--allow") && i + 1 < args.size()) {
      flag = a;
      value = args[++i];
    } else if (a.rfind("--vdev=", 0) == 0 || a.rfind("--allow=", 0) == 0) {
      flag = a.substr(0, a.find('='));
      value = a.substr(a.find('=') + 1);
    } else if (a.size() > 2 && a.rfind("-a", 0) == 0) {
      flag = "-a";
      value = a.substr(2);
    } else {
      continue;
    }
    std::string name = value.substr(0, value.find(','));
    out.push_back({flag, flag == "--vdev" ? name : full_pci_address(name)});
  }
  return out;
}

}  // namespace

std::string dpdk_drivers_note() {
#if FERRY_DPDK_SHARED
  struct stat st {};
  const bool there = stat(FERRY_DPDK_PMD_DIR, &st) == 0 && S_ISDIR(st.st_mode);
  return std::string("This ferry links DPDK shared, and its EAL loads every driver in " FERRY_DPDK_PMD_DIR) +
         (there ? " (Debian's librte-net-* packages; -d FILE loads one more)"
                : ", which does not exist here: install DPDK's runtime packages (libdpdk-dev pulls in every "
                  "one)");
#else
  return "This ferry links DPDK statically, with only the virtual drivers net_pcap, net_af_packet, net_null, "
         "net_ring and net_memif; build it with -DFERRY_DPDK_LINK=shared for every driver Debian ships";
#endif
}

PortInfo port_info(std::uint16_t port) {
  if (!rte_eth_dev_is_valid_port(port))
    throw Error("port " + std::to_string(port) + " does not exist: the EAL found " +
                std::to_string(rte_eth_dev_count_avail()) +
                " (--vdev, -a, or a NIC bound to its driver; list_ports() lists them)");
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0) throw Error("cannot query port " + std::to_string(port));
  PortInfo p;
  p.port = port;
  p.device = info.device != nullptr ? rte_dev_name(info.device) : "?";
  p.driver = info.driver_name != nullptr ? info.driver_name : "?";
  p.max_rx_queues = info.max_rx_queues;
  p.max_tx_queues = info.max_tx_queues;
  p.rss_hashes = info.flow_type_rss_offloads;
  p.rx_offloads = info.rx_offload_capa;
  p.tx_offloads = info.tx_offload_capa;
  return p;
}

std::vector<PortInfo> list_ports() {
  std::vector<PortInfo> out;
  std::uint16_t p = 0;
  RTE_ETH_FOREACH_DEV(p) {
    out.push_back(port_info(p));
  }
  return out;
}

std::string describe(const PortInfo& p) {
  return port_label(p) + ": queues rx " + std::to_string(p.max_rx_queues) + " tx " +
         std::to_string(p.max_tx_queues) + " | RSS " + rss_names(p.rss_hashes) + " | rx offloads " +
         offload_names(p.rx_offloads, rte_eth_dev_rx_offload_name) + " | tx offloads " +
         offload_names(p.tx_offloads, rte_eth_dev_tx_offload_name);
}

QueuePlan plan_queues(const PortInfo& p, std::uint32_t pipelines) {
  if (p.max_rx_queues < pipelines || p.max_tx_queues < pipelines)
    throw Error(port_label(p) + " has " + std::to_string(p.max_rx_queues) + " RX and " +
                std::to_string(p.max_tx_queues) + " TX queues, and -p " + std::to_string(pipelines) +
                " needs one of each per pipeline: " + queue_hint(p, pipelines));
  QueuePlan plan;
  if (pipelines == 1) {
    plan.spreading = "one queue pair";
    return plan;
  }
  for (const auto& [driver, how] : kOwnSpreading)
    if (p.driver == driver) {
      plan.spreading = std::string("no RSS configured; ") + how;
      return plan;
    }
  if (const std::uint64_t flows = p.rss_hashes & kFlowHashes; flows != 0) {
    plan.rss_hashes = flows;
    plan.spreading = "flows spread by RSS over " + rss_names(flows);
    return plan;
  }
  if (p.rss_hashes != 0)
    throw Error(port_label(p) + " hashes only on " + rss_names(p.rss_hashes) +
                ", not on IPv4 or IPv6 addresses and ports, so -p " + std::to_string(pipelines) +
                " would not spread flows over its queues: use -p 1");
  throw Error(
      port_label(p) + " has no RSS, so -p " + std::to_string(pipelines) +
      " would leave every flow on queue 0 and the other pipelines idle: use -p 1, or a port that spreads "
      "flows (docs/packet.md, \"Ports and drivers\")");
}

void check_devices_probed(const std::vector<std::string>& eal_args) {
  std::vector<std::string> probed;
  for (const PortInfo& p : list_ports()) probed.push_back(p.device);
  std::string missing;
  for (const NamedDevice& d : named_devices(eal_args)) {
    if (std::find(probed.begin(), probed.end(), d.name) != probed.end()) continue;
    missing += missing.empty() ? "" : "; ";
    if (d.flag == "--vdev")
      missing += "--vdev " + d.name +
                 " made no port: its driver is not loaded, or refused its arguments (DPDK's messages above "
                 "say which)";
    else
      missing +=
          d.flag + " " + d.name + " made no port: no driver took the device. Bind it to vfio-pci " +
          "(dpdk-devbind.py -b vfio-pci " + d.name +
          "), or for a ConnectX (mlx5) leave it on mlx5_core with rdma-core installed (docs/packet.md)";
  }
  if (!missing.empty()) throw Error(missing + ". " + dpdk_drivers_note());
}

}  // namespace ferry::packet
