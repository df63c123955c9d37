// The file tier's put (file_tier.h): packs for small objects, a file each for
// the rest, through io_uring.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

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
namespace {

bool has_duplicate_keys(std::span<PutItem* const> items) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(items.size());
  for (const PutItem* item : items)
    if (!seen.insert(item->key).second) return true;
  return false;
}

}  // namespace

// ---- put ----------------------------------------------------------------------

void FileTier::put(std::span<PutItem> items, Fault& fault) noexcept {
  if (items.empty()) return;
  std::vector<PutItem*> files, packed;
  for (auto& item : items) {
    if (item.key.empty()) {
      item.status = fault.raise(XferStatus::InvalidDesc, "file tier: empty key");
    } else if (item.key.size() > kMaxFileKeyLength) {
      item.status = fault.raise(XferStatus::InvalidDesc,
                                "file tier: a key of " + std::to_string(item.key.size()) +
                                    " bytes exceeds the limit of " + std::to_string(kMaxFileKeyLength),
                                item.key);
    } else {
      (opts_.pack_threshold > 0 && item.data.size <= opts_.pack_threshold ? packed : files).push_back(&item);
    }
  }
  const CallCount counted(calls_running_);
  const bool any_packed = !packed.empty();
  // A buffered pack write is a copy into the page cache, one worker per file
  // (writes to one file hold its lock): split, the call writes a pack per
  // thread. Only with enough bytes for packs that are not small (compaction
  // would merge them, writing them twice), and never when a key comes twice:
  // the later must win, and two packs would publish in either order.
  if (any_packed && helpers_) {
    std::uint64_t bytes = 0;
    for (const PutItem* item : packed) bytes += item->data.size;
    const std::span<PutItem*> all(packed);
    const auto max_parts =
        static_cast<std::size_t>(bytes / std::max<std::uint64_t>(1, index_.packs().small_pack_bytes()));
    if (max_parts >= 2 && !has_duplicate_keys(all) &&
        split_call(
            all.size(), max_parts, [&](std::size_t i) { return all[i]->data.size; },
            [&](Uring& ring, std::size_t first, std::size_t count, unsigned depth) {
              put_packed(ring, all.subspan(first, count), depth, fault);
            }))
      packed.clear();
  }
  auto ring = rings_->take_or_raise(spec_, fault);
  if (!ring) {
    for (PutItem* item : packed) item->status = XferStatus::IoError;
    for (PutItem* item : files) item->status = XferStatus::IoError;
    return;
  }
  if (!packed.empty()) put_packed(**ring, packed, opts_.queue_depth, fault);
  if (!files.empty()) put_files(**ring, files, fault);
  if (any_packed) compactor_->wake_if_due();
}

void FileTier::put_packed(Uring& ring, std::span<PutItem*> items, unsigned depth, Fault& fault) noexcept {
  std::vector<PutItem*> group;
  std::vector<PackItem> pack_items;
  EmptiedPacks emptied;
  for (std::size_t i = 0; i < items.size();) {
    group.clear();
    pack_items.clear();
    std::uint64_t bytes = 0;
    for (; i < items.size(); ++i) {
      PutItem& item = *items[i];
      const std::uint64_t padded = io_round_up(item.data.size);
      if (!group.empty() && bytes + padded > opts_.pack_max) break;
      if (!reserve(item)) continue;
      group.push_back(&item);
      pack_items.push_back(PackItem{item.key, item.data, item.checksum, 0, 0});
      bytes += padded;
    }
    if (group.empty()) continue;
    const std::uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
    for (auto& p : pack_items) p.seq = seq;
    PackWriteResult w = write_pack(ring, dir_fd_, opts_.dir, seq, pack_items, opts_.direct, opts_.fsync,
                                   files_.spares(), depth);
    if (w.fd < 0) {
      // Nothing of this pack was published: exactly its items fail, with one
      // message for the pack.
      const XferStatus status = fault.raise(
          write_errno_status(w.err),
          w.error + " (pack of " + std::to_string(group.size()) + " object(s), the first " +
              quote_key(group.front()->key) + ")",
          group.front()->key);
      for (PutItem* item : group) {
        unreserve(item->data.size);
        item->status = status;
      }
      continue;
    }
    auto file = std::make_shared<PackFile>(pack_fds_.get(), seq, pack_file_name(seq), w.fd, w.file_size);
    {
      std::lock_guard lock(mu_);
      index_.packs().add_new(file, pack_items);
    }
    for (std::size_t k = 0; k < group.size(); ++k) {
      PutItem& item = *group[k];
      std::lock_guard key_lock(stripes_.of(item.key));
      bool unlink_file = false;
      {
        std::lock_guard lock(mu_);
        index_.unreserve(item.data.size);
        if (!index_.superseded(item.key, seq)) {
          index_.install(item.key, file, pack_items[k].offset, item.data.size, item.checksum, seq, &unlink_file,
                         &emptied);
        } else {
          // A newer version won meanwhile, so this record is dead at birth; but it
          // stays in the pack, and a remove of the newer version (an object file,
          // say) must leave a tombstone that hides it after a restart.
          index_.shadow(item.key, seq);
        }
      }
      if (unlink_file) {
        if (const int err = files_.unlink_file(item.key); err != 0)
          log::app().warn("file tier {}: cannot remove {} (replaced by a packed version): {}", opts_.dir,
                          object_file_name(item.key), std::strerror(err));
      }
      item.status = XferStatus::Ok;
    }
    {
      std::lock_guard lock(mu_);
      index_.packs().unpin(seq, &emptied);
    }
    retire_packs(dir_fd_, opts_.dir, emptied, files_.spares());
    emptied.clear();
  }
}

void FileTier::put_files(Uring& ring, std::span<PutItem*> items, Fault& fault) noexcept {
  std::vector<ObjectWrite> slots(std::min<std::size_t>(items.size(), ring.entries()));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  run_batch(
      ring, slots, items.size(),
      [&](std::size_t i, ObjectWrite& op) {
        op.item = items[i];
        if (!start_put(op, fault)) return false;
        io_uring_sqe* sqe = next_sqe(ring);
        io_uring_prep_writev(sqe, op.fd, op.iov, op.iov_count, 0);
        io_uring_sqe_set_data64(sqe, op.slot);
        return true;
      },
      [&](ObjectWrite& op, int res) {
        if (res <= 0) {
          fail_put(op, files_.write_failed(op, res, fault));
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        if (op.offset < op.total) {  // short write: queue the rest
          advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(res));
          io_uring_sqe* sqe = next_sqe(ring);
          io_uring_prep_writev(sqe, op.fd, op.iov, op.iov_count, op.offset);
          io_uring_sqe_set_data64(sqe, op.slot);
          return true;
        }
        finish_put(op, fault);
        return false;
      });
}

// Reserves room, takes the version's seq and creates the temporary; false when
// the item is settled.
bool FileTier::start_put(ObjectWrite& op, Fault& fault) noexcept {
  op.reserved = false;
  op.tmp.clear();
  op.fd = -1;
  if (!reserve(*op.item)) return false;
  op.reserved = true;
  op.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  if (const XferStatus s = files_.open_write(op, fault); s != XferStatus::Ok) {
    fail_put(op, s);
    return false;
  }
  return true;  // the caller queues the write
}

void FileTier::fail_put(ObjectWrite& op, XferStatus status) noexcept {
  files_.discard(op);
  if (op.reserved) {
    unreserve(op.item->data.size);
    op.reserved = false;
  }
  op.item->status = status;
}

void FileTier::finish_put(ObjectWrite& op, Fault& fault) noexcept {
  PutItem& item = *op.item;
  const std::uint64_t size = item.data.size;
  if (const XferStatus s = files_.close_write(op, fault); s != XferStatus::Ok) return fail_put(op, s);

  // Rename and index update under the key's stripe: two puts of one key publish
  // in seq order on disk and in the index, so the index always describes the
  // version a restart would pick.
  EmptiedPacks emptied;
  {
    std::lock_guard key_lock(stripes_.of(item.key));
    bool stale = false;
    {
      std::lock_guard lock(mu_);
      stale = index_.superseded(item.key, op.seq);
    }
    if (stale) {
      // A put of this key that started later has already published: it wins,
      // as it would after a restart. This one ends as if overwritten at once.
      fail_put(op, XferStatus::Ok);
      return;
    }
    if (const XferStatus s = files_.publish(op, fault); s != XferStatus::Ok) return fail_put(op, s);
    std::lock_guard lock(mu_);
    index_.unreserve(size);
    op.reserved = false;
    bool unused = false;
    index_.install(item.key, nullptr, 0, size, item.checksum, op.seq, &unused, &emptied);
  }
  retire_packs(dir_fd_, opts_.dir, emptied, files_.spares());
  item.status = files_.sync_dir_after(op, fault);
  if (op.bounce.size() > kKeepBounce) op.bounce.reset();
}

}  // namespace ferry::xfer::store
