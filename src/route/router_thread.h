#pragma once
// Thread mode's progress thread: a Router with one client (its own rank's
// application thread) over a private mailbox, whose peers are the other ranks'
// progress threads. It is the only thread of the rank that calls MPI for the
// data path (the application may still call MPI itself: MPI_THREAD_MULTIPLE).

#include <mpi.h>

#include <memory>
#include <thread>

#include "route/buffer_pool.h"
#include "route/mailbox.h"
#include "route/router.h"
#include "route/topology.h"
#include "route/transport.h"

namespace ferry::route::detail {

class RouterThread {
 public:
  // Collective over comm (the Transport duplicates it).
  RouterThread(MPI_Comm comm, const Options& options, const Topology& topology);
  ~RouterThread();

  Mailbox& mailbox() noexcept { return mailbox_; }
  // Starts the thread, pinned to `cpu` when cpu >= 0.
  void start(int cpu);
  // Waits for the thread: it ends once the client detached.
  void join();

 private:
  Mailbox mailbox_;
  BufferPool pool_;
  WireStats wire_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Router> router_;
  std::thread thread_;
};

}  // namespace ferry::route::detail
