#pragma once
// Inline mode: the application thread does everything: it appends messages to
// runs in per-destination buffers, calls MPI, and runs handlers in progress()/barrier().

#include <mpi.h>

#include <cstring>
#include <vector>

#include "route/backend.h"
#include "route/buffer_pool.h"
#include "route/quiescence.h"
#include "route/run.h"
#include "route/topology.h"
#include "route/transport.h"

namespace ferry::route::detail {

class InlineBackend final : public Backend {
 public:
  InlineBackend(Engine& engine, MPI_Comm comm, const Options& options, const Topology& topology);

  void send(int dest, std::uint16_t handler, const void* payload, std::uint32_t len) override {
    std::uint8_t* at = transport_.append(next_hop_[static_cast<std::size_t>(dest)],
                                         static_cast<std::uint32_t>(dest), me_, handler, len);
    std::memcpy(at, payload, len);
    ++stats_.msgs_sent;
    stats_.bytes_sent += len;
  }
  void progress() override;
  void barrier() override;
  void finish() override { barrier(); }
  Stats stats() const override;

 private:
  bool run_received(int max_buffers);
  void run_buffer(const Transport::Received& r);

  Options options_;
  std::uint32_t me_;
  std::vector<int> next_hop_;
  std::uint64_t flush_ns_;
  std::uint64_t stall_ns_;
  Stats stats_;
  BufferPool pool_;
  Transport transport_;
};

}  // namespace ferry::route::detail
