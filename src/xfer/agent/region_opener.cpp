#include "xfer/agent/region_opener.h"

#include <exception>
#include <thread>
#include <utility>

#include "ferry/core/status.h"

namespace ferry::xfer::agent {

std::shared_ptr<RegionOpener::Ticket> RegionOpener::start(std::function<std::shared_ptr<ImportedRegion>()> open,
                                                         std::function<void()> on_done) {
  // Claimed before the thread exists, so that no more than max_ are ever out.
  std::size_t now = out_->load(std::memory_order_relaxed);
  do {
    if (now >= max_) return nullptr;
  } while (!out_->compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
  auto ticket = std::make_shared<Ticket>();
  try {
    // Detached: a thread stuck in the kernel on a peer's page cannot be joined
    // or cancelled; it ends when the page answers or the agent exits.
    std::thread([ticket, out = out_, open = std::move(open), on_done = std::move(on_done)] {
      std::shared_ptr<ImportedRegion> region;
      std::string error;
      try {
        region = open();
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "registration failed";
      }
      {
        std::lock_guard lk(ticket->mu);
        ticket->region = std::move(region);
        ticket->error = std::move(error);
        ticket->done = true;
      }
      out->fetch_sub(1, std::memory_order_relaxed);
      on_done();
    }).detach();
  } catch (const std::system_error&) {
    out_->fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  return ticket;
}

void LoopWaker::attach(std::function<void(std::uint64_t)> fn) {
  std::lock_guard lk(mu_);
  fn_ = std::move(fn);
}

void LoopWaker::detach() noexcept {
  std::lock_guard lk(mu_);
  fn_ = nullptr;
}

void LoopWaker::wake(std::uint64_t session) {
  std::lock_guard lk(mu_);
  if (fn_) fn_(session);
}

}  // namespace ferry::xfer::agent
