#include "route/client_port.h"

#include <signal.h>

#include <cerrno>
#include <string>

#include "route/idle.h"

namespace ferry::route::detail {

void ClientPort::check_router() const {
  const auto state = static_cast<RouterState>(
      std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(header_->router_state))
          .load(std::memory_order_acquire));
  if (state == RouterState::Failed)
    fatal("the router of this node (world rank " + std::to_string(header_->router_world_rank) +
          ") reported a failure");
  const pid_t pid = static_cast<pid_t>(header_->router_pid);
  if (pid != 0 && kill(pid, 0) != 0 && errno == ESRCH)
    fatal("the router process of this node (world rank " + std::to_string(header_->router_world_rank) +
          ", pid " + std::to_string(pid) + ") is gone");
}

void ClientPort::open_chunk(std::uint32_t len) {
  if (run_bytes(len, 1) > capacity_) [[unlikely]]  // Engine::send checks max_payload(); this guards the slot
    fatal("a " + std::to_string(len) + "-byte message does not fit a " + std::to_string(capacity_) +
          "-byte ring slot");
  if (chunk_ != nullptr) publish_chunk();  // the message does not fit: the chunk leaves as it is
  MutableByteView slot = producer_.try_claim();
  if (slot.data == nullptr) {
    // The router is behind: wait for a slot without running handlers (the
    // router never waits for us, it holds what it cannot deliver).
    ++full_waits_;
    const std::uint64_t start = now_ns();
    Backoff backoff = idle_backoff(options_);
    StallClock stall(stall_ns_);
    std::uint64_t next_check = start + 100'000'000ull;
    while ((slot = producer_.try_claim()).data == nullptr) {
      backoff.idle();
      const std::uint64_t now = now_ns();
      if (now >= next_check) {
        check_router();
        next_check = now + 100'000'000ull;
      }
      if (stall.stalled())
        fatal("the request ring to the router has been full for " + std::to_string(stall.seconds()) +
              " s: the router is not draining it");
    }
    wait_ns_ += now_ns() - start;
  }
  chunk_ = slot.data;
  used_ = 0;
  run_.reset();
  since_ = now_ns();
}

}  // namespace ferry::route::detail
