#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <atomic>
#include <string>
#include <vector>

#include "ferry/packet/l2fwd.h"

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
    throw Error(std::string("DPDK's EAL did not start: ") + rte_strerror(rte_errno) +
                " (its own messages above say which argument or resource)");
  }
}

Eal::~Eal() {
  rte_eal_cleanup();
  g_eal_up = false;
}

unsigned Eal::worker_lcores() const { return rte_lcore_count() - 1; }

}  // namespace ferry::packet
