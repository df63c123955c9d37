#pragma once
// A small pool of connections (redis_conn.h) to one Redis server. A batch call leases one
// connection for its whole pipeline; concurrent callers lease different ones (at
// most `size`, then they wait). A connection that failed is dropped, and the next
// lease connects again, so the tier recovers on its own when Redis comes back.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/xfer/fault.h"
#include "xfer/store/redis/redis_conn.h"

namespace ferry::xfer::store {

class RedisPool {
 public:
  RedisPool(RedisEndpoint endpoint, unsigned size);
  ~RedisPool();
  RedisPool(const RedisPool&) = delete;
  RedisPool& operator=(const RedisPool&) = delete;

  class Lease {
   public:
    Lease(RedisPool* pool, std::size_t slot) : pool_(pool), slot_(slot) {}
    ~Lease() { pool_->give_back(slot_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    // The connection, connecting first if it has none; nullptr when Redis cannot
    // be reached or refuses AUTH or SELECT, after raising Unavailable into `fault`.
    RedisConn* connect(Fault& fault) noexcept;
    // The same, without raising: nullptr with *error filled (for a caller that
    // will try elsewhere or again, and raises only if it gives up).
    RedisConn* connect(RedisConnectError* error) noexcept;
    // Drops the connection after an I/O error: the next lease reconnects.
    void drop() noexcept;

   private:
    RedisPool* pool_;
    std::size_t slot_;
  };

  Lease lease();
  const RedisEndpoint& endpoint() const { return ep_; }
  std::string address() const { return ep_.host + ":" + std::to_string(ep_.port); }

 private:
  void give_back(std::size_t slot);

  RedisEndpoint ep_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<RedisConn>> conns_;  // nullptr: not connected
  std::vector<std::size_t> idle_;
};

}  // namespace ferry::xfer::store
