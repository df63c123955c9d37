#pragma once
// Thread and process mode, the application's side: runs go into the request
// ring of a mailbox, handlers run on delivery chunks, barriers are a handshake
// with the router. In thread mode this backend also owns the router thread.

#include <cstring>
#include <memory>
#include <thread>

#include "ferry/route/options.h"
#include "route/backend.h"
#include "route/client_port.h"
#include "route/mailbox.h"
#include "route/run.h"

namespace ferry::route::detail {

class RouterThread;

class RingBackend final : public Backend {
 public:
  // Process mode: the runtime's mailbox (router in another process).
  RingBackend(Engine& engine, const Options& options, int app_rank, const Mailbox& mailbox,
              std::uint32_t client);
  // Thread mode: a private mailbox served by `router` (started here, stopped in finish()).
  RingBackend(Engine& engine, const Options& options, int app_rank, std::unique_ptr<RouterThread> router);
  ~RingBackend() override;

  void send(int dest, std::uint16_t handler, const void* payload, std::uint32_t len) override {
    std::uint8_t* at = port_.append(static_cast<std::uint32_t>(dest), me_, handler, len);
    std::memcpy(at, payload, len);
    port_.count_sent();
    ++stats_.msgs_sent;
    stats_.bytes_sent += len;
  }
  void progress() override;
  void barrier() override;
  void finish() override;
  Stats stats() const override;
  bool router_stats(RouterStats* out) const override;

 private:
  bool run_deliveries(int max_chunks);

  Options options_;
  std::uint32_t me_;
  std::unique_ptr<RouterThread> router_;  // thread mode only
  const Mailbox* mailbox_;
  ClientPort port_;
  std::uint64_t flush_ns_;
  std::uint64_t stall_ns_;
  std::uint32_t epoch_ = 0;
  bool finished_ = false;
  Stats stats_;
};

}  // namespace ferry::route::detail
