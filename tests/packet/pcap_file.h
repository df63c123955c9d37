#pragma once
// Classic pcap files (microsecond timestamps, Ethernet link type), as net_pcap
// reads and writes them: what the packet-path tests feed ferry l2fwd and check.

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::test {

using Frame = std::vector<std::uint8_t>;

void write_pcap(const std::string& path, const std::vector<Frame>& frames);
// Every frame of the file, in order. Throws std::runtime_error on a malformed file.
std::vector<Frame> read_pcap(const std::string& path);

// The mixed traffic of the deterministic tests: minimum-size (60-byte) frames,
// VLAN-tagged IPv4, IPv6, odd lengths up to 1514 bytes, each with distinct MACs
// and a payload that names its index. Seeded, so every run sends the same.
std::vector<Frame> mixed_frames(std::size_t count, std::uint32_t seed);

// The frame with its destination and source MAC addresses swapped.
Frame mac_swapped(const Frame& f);

}  // namespace ferry::test
