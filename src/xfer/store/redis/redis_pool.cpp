#include "xfer/store/redis/redis_pool.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry::xfer::store {
namespace {

timeval to_timeval(int ms) {
  return timeval{ms / 1000, (ms % 1000) * 1000};
}

}  // namespace

RedisPool::RedisPool(RedisEndpoint endpoint, unsigned size) : ep_(std::move(endpoint)), conns_(size) {
  if (size == 0) throw Error("redis tier: the connection pool needs at least one connection");
  for (std::size_t i = size; i-- > 0;) idle_.push_back(i);
  // hiredis writes with write(2): a server that went away would raise SIGPIPE and
  // kill the agent. Ignored unless the program installed its own handler.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

RedisPool::~RedisPool() {
  for (auto& c : conns_)
    if (c.ctx != nullptr) redisFree(c.ctx);
}

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

redisContext* RedisPool::Lease::connect(Fault& fault) noexcept {
  redisContext*& c = pool_->conns_[slot_].ctx;  // this slot is ours until the lease ends
  if (c != nullptr && c->err == 0) return c;
  drop();
  const RedisEndpoint& ep = pool_->ep_;
  c = redisConnectWithTimeout(ep.host.c_str(), ep.port, to_timeval(ep.timeout_ms));
  if (c == nullptr || c->err != 0) {
    std::string why = "cannot connect to redis " + pool_->address() + ": " +
                      (c != nullptr ? c->errstr : "out of memory") +
                      "; the tier tries again on its next call";
    drop();
    (void)fault.raise(XferStatus::Unavailable, std::move(why));
    return nullptr;
  }
  redisSetTimeout(c, to_timeval(ep.timeout_ms));
  redisEnableKeepAlive(c);
  if (ep.db != 0) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "SELECT %d", ep.db));
    const bool ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
    if (!ok) {
      const std::string reply = r == nullptr
                                    ? std::string(c->errstr)
                                    : (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len)
                                                                    : std::string("unexpected reply"));
      std::string why = "redis " + pool_->address() + ": SELECT " + std::to_string(ep.db) +
                        " failed: " + reply + "; the tier tries again on its next call";
      if (r != nullptr) freeReplyObject(r);
      drop();
      (void)fault.raise(XferStatus::Unavailable, std::move(why));
      return nullptr;
    }
    freeReplyObject(r);
  }
  return c;
}

void RedisPool::Lease::drop() noexcept {
  redisContext*& c = pool_->conns_[slot_].ctx;
  if (c != nullptr) redisFree(c);
  c = nullptr;
  pool_->conns_[slot_].reader.clear();
}

}  // namespace ferry::xfer::store
