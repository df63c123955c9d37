#include "xfer/store/redis/redis_pool.h"

#include <signal.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry::xfer::store {
RedisPool::RedisPool(RedisEndpoint endpoint, unsigned size) : ep_(std::move(endpoint)), conns_(size) {
  if (size == 0) throw Error("redis tier: the connection pool needs at least one connection");
  for (std::size_t i = size; i-- > 0;) idle_.push_back(i);
  // The connections write with write(2): a server that went away would raise SIGPIPE and
  // kill the agent. Ignored unless the program installed its own handler.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

RedisPool::~RedisPool() = default;

RedisPool::Lease RedisPool::lease() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !idle_.empty(); });
  const std::size_t slot = idle_.back();
  idle_.pop_back();
  return Lease(this, slot);
}

void RedisPool::give_back(std::size_t slot) {
  {
    std::lock_guard lock(mu_);
    idle_.push_back(slot);
  }
  cv_.notify_one();
}

RedisConn* RedisPool::Lease::connect(RedisConnectError* error) noexcept {
  std::unique_ptr<RedisConn>& c = pool_->conns_[slot_];  // this slot is ours until the lease ends
  if (c == nullptr) c = RedisConn::open(pool_->ep_, error);
  return c.get();
}

RedisConn* RedisPool::Lease::connect(Fault& fault) noexcept {
  RedisConnectError error;
  RedisConn* c = connect(&error);
  if (c == nullptr)
    (void)fault.raise(XferStatus::Unavailable, error.why + "; the tier tries again on its next call");
  return c;
}

void RedisPool::Lease::drop() noexcept {
  pool_->conns_[slot_].reset();
}

}  // namespace ferry::xfer::store
