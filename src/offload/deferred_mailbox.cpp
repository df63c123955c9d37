#include "offload/deferred_mailbox.h"

#include <unistd.h>

namespace ferry::offload {

void PendingResponse::complete(std::function<Framing::Response()> build) {
  if (completed_.exchange(true, std::memory_order_acq_rel) || abandoned()) return;
  mailbox_->post({shared_from_this(), std::move(build)});
}

void DeferredMailbox::post(Done done) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  items_.push_back(std::move(done));
  // Only the post that finds the mailbox empty wakes the owner: the owner
  // reads its eventfd before take(), so mail posted since that read is in the
  // take, and mail posted after it finds the mailbox empty again. One write
  // per batch of mail, not per response: the batcher that completes a whole
  // batch of requests would otherwise make a syscall for each of them.
  if (has_mail_.exchange(true, std::memory_order_acq_rel)) return;
  // Under the lock: close() may not let the owner close the fd in between.
  const std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

std::vector<DeferredMailbox::Done> DeferredMailbox::take() {
  std::vector<Done> out;
  std::lock_guard lock(mutex_);
  out.swap(items_);
  has_mail_.store(false, std::memory_order_relaxed);
  return out;
}

void DeferredMailbox::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  items_.clear();
}

}  // namespace ferry::offload
