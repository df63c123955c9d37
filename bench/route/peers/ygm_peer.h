#pragma once
// YGM for the peer applications: its comm, and its settings in words for the
// report (YGM reads them from YGM_* environment variables when a comm is built;
// the comm keeps them private, so this reads them again the same way).

#include <ygm/comm.hpp>  // brings ygm/version.hpp, which has no include guard

#include <sstream>
#include <string>

namespace ferry::route::bench::peers {

inline std::string ygm_config(const ygm::comm& world) {
  const ygm::detail::comm_environment env(world.layout());
  const char* routing = env.routing == ygm::detail::routing_type::NONE ? "NONE"
                        : env.routing == ygm::detail::routing_type::NR ? "NR"
                                                                       : "NLNR";
  std::ostringstream s;
  s << "ygm " << ygm::ygm_version << " routing=" << routing << " nodes=" << world.layout().node_size()
    << " local_buffer_kib=" << env.local_buffer_size / 1024
    << " remote_buffer_kib=" << env.remote_buffer_size / 1024 << " irecvs=" << env.num_irecvs << "x"
    << env.irecv_size / 1024 << "KiB issend_every=" << env.freq_issend;
  return s.str();
}

}  // namespace ferry::route::bench::peers
