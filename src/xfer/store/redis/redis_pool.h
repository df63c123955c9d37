#pragma once
// A small pool of hiredis connections to one Redis server. A batch call leases one
// connection for its whole pipeline; concurrent callers lease different ones (at
// most `size`, then they wait). A connection that failed is dropped, and the next
// lease connects again, so the tier recovers on its own when Redis comes back.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "xfer/base/fault.h"
#include "xfer/store/redis/resp_io.h"

struct redisContext;

namespace ferry::xfer::store {

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  int timeout_ms = 2000;  // connect, and every read or write on the socket
};

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
    // be reached or refuses SELECT, after raising Unavailable into `fault`.
    redisContext* connect(Fault& fault) noexcept;
    // Drops the connection after an I/O error: the next lease reconnects.
    void drop() noexcept;
    // The reply reader of this connection (resp_io.h).
    RespReader& reader() { return pool_->conns_[slot_].reader; }

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
  struct Conn {
    redisContext* ctx = nullptr;  // nullptr: not connected
    RespReader reader;
  };
  std::vector<Conn> conns_;
  std::vector<std::size_t> idle_;
};

}  // namespace ferry::xfer::store
