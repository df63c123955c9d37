#include "xfer/store/file/uring.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "ferry/core/status.h"

namespace ferry::xfer::store {

Uring::Uring(unsigned entries) : entries_(entries) {
  const int rc = io_uring_queue_init(entries, &ring_, 0);
  if (rc < 0)
    throw Error("file tier: io_uring_queue_init(" + std::to_string(entries) + ") failed: " +
                std::strerror(-rc) + " (is io_uring disabled by the kernel or a seccomp profile?)");
}

Uring::~Uring() {
  io_uring_queue_exit(&ring_);
}

int Uring::submit_and_wait() {
  for (;;) {
    const int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc >= 0) return 0;
    if (rc != -EINTR) return rc;
  }
}

UringPool::Lease UringPool::take() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto ring = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(ring));
    }
  }
  return Lease(this, std::make_unique<Uring>(entries_));
}

void UringPool::put_back(std::unique_ptr<Uring> ring) {
  if (!ring) return;
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(ring));
}

std::optional<UringPool::Lease> UringPool::take_or_raise(std::string_view who, Fault& fault) noexcept {
  try {
    return take();
  } catch (const std::exception& e) {
    static_cast<void>(fault.raise(XferStatus::IoError, std::string(who) + ": " + e.what()));
    return std::nullopt;
  }
}

}  // namespace ferry::xfer::store
