#pragma once
// The ports ferry l2fwd may use: what each can do, and the checks that say
// plainly why one cannot carry the pipelines asked of it (docs/packet.md,
// "Ports and drivers").

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/packet/l2fwd.h"

namespace ferry::packet {

// The port's capabilities. Throws naming the port, and how many the EAL found,
// when it does not exist.
PortInfo port_info(std::uint16_t port);

// How `pipelines` pipelines share the port's queues.
struct QueuePlan {
  std::uint64_t rss_hashes = 0;  // RTE_ETH_RSS_* to configure; 0: no RSS
  std::string spreading;         // how flows reach the queues, for the log
};
// Throws, naming the port and its driver, when the port has fewer queues than
// the pipelines need, or, with several pipelines, spreads no flows over them
// (no RSS over IPv4/IPv6 addresses and ports, and no spreading of its own).
QueuePlan plan_queues(const PortInfo& port, std::uint32_t pipelines);

// Throws naming every device of the EAL arguments (--vdev, -a, --allow) that
// made no port, with where this build's drivers come from. The EAL must be up.
void check_devices_probed(const std::vector<std::string>& eal_args);

}  // namespace ferry::packet
