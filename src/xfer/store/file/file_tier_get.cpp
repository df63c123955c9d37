// The file tier's get (file_tier.h): reads through io_uring, verified against
// each object's checksum, retried where compaction or an overwrite moved it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/compactor.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/helper_threads.h"
#include "xfer/store/file/pack_io.h"
#include "xfer/store/file/tombstone_log.h"
#include "xfer/store/file/uring.h"
#include "xfer/store/file/uring_batch.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"
#include "xfer/store/file/file_tier.h"

namespace ferry::xfer::store {

// ---- get ----------------------------------------------------------------------

void FileTier::get(std::span<GetItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  const CallCount counted(calls_running_);
  const bool split =
      split_call(items.size(), items.size(), nullptr, [&](Uring& ring, std::size_t first, std::size_t count, unsigned depth) {
        get_part(ring, items.subspan(first, count), depth, fault);
      });
  if (split) return;
  auto ring = rings_->take_or_raise(spec_, fault);
  if (!ring) {
    for (GetItem& item : items) item.status = XferStatus::IoError;
    return;
  }
  get_part(**ring, items, opts_.queue_depth, fault);
}

void FileTier::get_part(Uring& ring, std::span<GetItem> items, unsigned depth, Fault& fault) noexcept {
  std::vector<ObjectRead> slots(std::min<std::size_t>({items.size(), ring.entries(), depth}));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  const auto queue_read = [&](ObjectRead& op) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_readv(sqe, op.fd, op.iov, op.iov_count, op.base + op.offset);
    io_uring_sqe_set_data64(sqe, op.slot);
  };
  run_batch(
      ring, slots, items.size(),
      [&](std::size_t i, ObjectRead& op) {
        op.item = &items[i];
        op.attempts = 0;
        op.relookup = true;
        op.hint = 0;
        if (!start_get(op, fault)) return false;
        queue_read(op);
        return true;
      },
      [&](ObjectRead& op, int res) {
        if (res < 0) {
          op.item->status = files_.read_failed(op, res, fault);
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        // Done at the object's end: an O_DIRECT read of the padded last page comes
        // back short there, and asking again would only return end of file.
        const std::uint64_t end = op.pack ? op.hint : kFileHeaderSize + op.hint;
        if (res > 0 && op.offset < end) {  // short read: queue the rest
          advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          queue_read(op);
          return true;
        }
        if (op.pack) {
          op.item->status = files_.finish_packed_read(op, fault);
          return false;
        }
        bool retry = false;
        const XferStatus s = files_.finish_file_read(op, &retry, fault);  // at the expected length, or at end of file
        if (!retry) {
          op.item->status = s;
          return false;
        }
        if (start_get(op, fault)) {
          queue_read(op);
          return true;
        }
        return false;
      });
}

// Looks the key up (or, on a retry, keeps the size the file's header gave),
// opens the file or takes the pack's descriptor, and lays out the read. Returns
// false when the item is settled.
bool FileTier::start_get(ObjectRead& op, Fault& fault) noexcept {
  GetItem& item = *op.item;
  op.fd = -1;
  op.offset = 0;
  op.lease.reset();
  op.pack.reset();
  op.base = 0;
  if (item.key.empty()) {
    item.status = fault.raise(XferStatus::InvalidDesc, "file tier: empty key");
    return false;
  }
  std::shared_ptr<PackFile> pack;
  if (op.relookup) {
    std::lock_guard lock(mu_);
    IndexEntry* e = index_.find(item.key);
    if (e == nullptr) {
      item.status = XferStatus::NotFound;
      return false;
    }
    op.hint = e->size;
    op.generation = e->generation;
    op.sum = e->checksum;
    op.whole_sum = e->whole_sum;
    pack = e->pack;
    op.base = e->offset;
    if (op.attempts == 0) index_.touch(*e);
    op.relookup = false;
  }
  ++op.attempts;
  item.size = op.hint;
  if (item.out.size < op.hint) {
    item.status = too_large(item.key, op.hint, item.out.size, fault);
    return false;
  }
  if (pack && op.hint == 0) {  // nothing to read
    op.pack = std::move(pack);
    op.body = 0;
    item.status = files_.finish_packed_read(op, fault);
    return false;
  }
  if (pack) {
    // Packed: the descriptor stays open while op holds its lease, even if
    // compaction or a remove unlinks the pack meanwhile.
    op.lease = pack_fds_->acquire(*pack);
    if (op.lease.fd() < 0) {
      const int err = op.lease.error();
      if (err == ENOENT) return moved_or_gone(op, pack, fault);
      item.status = fault.raise(XferStatus::IoError,
                                "file tier " + opts_.dir + ": cannot open " + pack->name + " for key " +
                                    quote_key(item.key) + ": " + std::strerror(err),
                                item.key);
      return false;
    }
    op.fd = op.lease.fd();
    op.pack = std::move(pack);
  } else {
    op.base = 0;
    const XferStatus s = files_.open_file(op, fault);
    if (s == XferStatus::NotFound) return moved_or_gone(op, nullptr, fault);
    if (s != XferStatus::Ok) {
      item.status = s;
      return false;
    }
  }
  files_.lay_out_read(op);
  return true;
}

bool FileTier::moved_or_gone(ObjectRead& op, const std::shared_ptr<PackFile>& pack, Fault& fault) noexcept {
  GetItem& item = *op.item;
  // A pack unlinked between the lookup and the open: the object moved to
  // another pack (compaction) or died. A file gone: replaced by a packed
  // version, removed meanwhile, or deleted behind our back. When it moved,
  // read where the index says it is now.
  bool moved = false;
  {
    std::lock_guard lock(mu_);
    const IndexEntry* e = index_.find(item.key);
    moved = e != nullptr && (e->generation != op.generation || (pack && e->pack != pack));
  }
  if (moved && op.attempts < kMaxReadAttempts) {
    op.relookup = true;
    return start_get(op, fault);
  }
  if (!pack) forget_vanished(item.key, op.generation);
  item.status = XferStatus::NotFound;
  return false;
}

void FileTier::forget_vanished(std::string_view key, std::uint64_t generation) noexcept {
  std::lock_guard key_lock(stripes_.of(key));
  std::lock_guard lock(mu_);
  const IndexEntry* e = index_.find(key);
  if (e == nullptr || e->generation != generation || e->pack) return;  // moved on
  if (files_.file_exists(key)) return;
  log::app().warn("file tier {}: {} vanished from the directory; dropping key {}", opts_.dir,
                  object_file_name(key), quote_key(key));
  EmptiedPacks none;
  index_.erase(key, &none);
}

}  // namespace ferry::xfer::store
