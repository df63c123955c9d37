#pragma once
// The CLI's side of a hosted service: it owns the signals. SIGINT or SIGTERM
// asks the service to stop; a service that stops by itself (the peer's
// shutdown) ends the wait too. Returns the service's exit code.

#include <poll.h>

#include <chrono>
#include <functional>
#include <string_view>

#include "core/log.h"
#include "core/signal_fd.h"
#include "flag_names.h"

namespace ferry::app {

// `signals` must have been made before the service (and anything it is made
// with, such as a CUDA backend), so that every thread they start has the
// signals blocked and a signal can only reach the signalfd.
// `role` is the subcommand, whose flags the service's first error is told in
// (flag_names.h). `tick`, if given, runs on every turn of the wait (about every
// 100 ms): a command's periodic output.
template <typename Service>
int run_until_signal(Service& service, SignalFd& signals, std::string_view role,
                     const std::function<void()>& tick = {}) {
  for (;;) {
    if (tick) tick();
    pollfd p{signals.fd(), POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      log::app().info("{} received: shutting down", signals.read_name());
      service.stop();
      break;
    }
    if (service.wait_for(std::chrono::milliseconds(0))) break;
  }
  const int code = service.wait();
  if (const std::string why = service.first_error(); !why.empty())
    log::app().error("{}", in_flag_terms(why, role));
  return code;
}

}  // namespace ferry::app
