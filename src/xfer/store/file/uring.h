#pragma once
// io_uring rings for the file tier. A batch call borrows one ring for its whole
// run, so concurrent callers never share a submission queue (no lock around
// io_uring_submit) and each keeps up to `queue_depth` operations in flight.

#include <liburing.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "ferry/xfer/fault.h"

namespace ferry::xfer::store {

class Uring {
 public:
  // Throws ferry::Error when the kernel refuses io_uring (seccomp, old kernel).
  explicit Uring(unsigned entries);
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  io_uring* get() { return &ring_; }
  unsigned entries() const { return entries_; }

  // Submits what is queued and waits for at least one completion. Returns 0 or
  // -errno (EINTR is retried).
  int submit_and_wait();

 private:
  io_uring ring_{};
  unsigned entries_;
};

// Rings made on demand, kept for reuse: as many as calls ever ran at once.
class UringPool {
 public:
  explicit UringPool(unsigned entries) : entries_(entries) {}

  class Lease {
   public:
    Lease(UringPool* pool, std::unique_ptr<Uring> ring) : pool_(pool), ring_(std::move(ring)) {}
    ~Lease() {
      if (ring_) pool_->put_back(std::move(ring_));
    }
    Lease(Lease&& other) noexcept : pool_(other.pool_), ring_(std::move(other.ring_)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Uring& operator*() const { return *ring_; }
    Uring* operator->() const { return ring_.get(); }

   private:
    UringPool* pool_;
    std::unique_ptr<Uring> ring_;
  };

  // Throws ferry::Error when a new ring cannot be made.
  Lease take();
  // take() on the data path: none, raised naming `who`, when a new ring cannot
  // be made (too many open files); the caller fails its call's items.
  std::optional<Lease> take_or_raise(std::string_view who, Fault& fault) noexcept;

 private:
  void put_back(std::unique_ptr<Uring> ring);

  unsigned entries_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Uring>> idle_;
};

}  // namespace ferry::xfer::store
