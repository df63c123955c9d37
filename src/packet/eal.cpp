#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include "ferry/packet/l2fwd.h"
#include "ports.h"

namespace ferry::packet {
namespace {
std::atomic<bool> g_eal_up{false};
}

Eal::Eal(const std::vector<std::string>& args) {
  if (g_eal_up.exchange(true)) throw Error("DPDK's EAL is already initialised in this process");
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(copy.size()), argv.data()) < 0) {
    g_eal_up = false;
    const int why = rte_errno;
    std::string message = std::string("DPDK's EAL did not start: ") + rte_strerror(why) +
                          " (its own messages above say which argument or resource)";
    // The vdev bus refuses a --vdev whose driver it does not know while parsing.
    if (why == ENODEV) message += ". A --vdev names a driver that is not loaded: " + dpdk_drivers_note();
    throw Error(message);
  }
  try {
    check_devices_probed(args);
  } catch (...) {
    rte_eal_cleanup();
    g_eal_up = false;
    throw;
  }
}

Eal::~Eal() {
  rte_eal_cleanup();
  g_eal_up = false;
}

unsigned Eal::worker_lcores() const { return rte_lcore_count() - 1; }

}  // namespace ferry::packet
