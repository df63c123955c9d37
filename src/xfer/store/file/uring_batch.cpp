#include "xfer/store/file/uring_batch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/log.h"

namespace ferry::xfer::store {

void advance_iov(iovec* iov, int* count, std::size_t n) {
  int i = 0;
  while (i < *count && n >= iov[i].iov_len) n -= iov[i++].iov_len;
  if (i < *count) {
    iov[i].iov_base = static_cast<std::byte*>(iov[i].iov_base) + n;
    iov[i].iov_len -= n;
  }
  std::move(iov + i, iov + *count, iov);
  *count -= i;
}

void submit_and_reap(Uring& ring, std::vector<std::pair<std::size_t, int>>* done) {
  for (int tries = 0;; ++tries) {
    const int rc = ring.submit_and_wait();
    if (rc == 0) break;
    if (tries == 0) log::app().error("file tier: io_uring submit failed: {}; retrying", std::strerror(-rc));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  done->clear();
  unsigned head;
  io_uring_cqe* cqe;
  unsigned seen = 0;
  io_uring_for_each_cqe(ring.get(), head, cqe) {
    done->emplace_back(static_cast<std::size_t>(cqe->user_data), cqe->res);
    ++seen;
  }
  io_uring_cq_advance(ring.get(), seen);
}

}  // namespace ferry::xfer::store
