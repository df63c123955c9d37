#include "xfer/store/file/pack_io.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "xfer/store/file/aligned_buffer.h"
#include "xfer/store/file/file_names.h"
#include "xfer/store/file/spare_files.h"
#include "xfer/store/file/uring_batch.h"

namespace ferry::xfer::store {
namespace {

// Why 1 MiB writes: large enough that the per-request cost vanishes (fio's own
// throughput is flat from 1 MiB up on the disks measured), small enough that a
// pack of a few MiB still fills a queue of 32. Smaller packs use smaller pieces
// (never under 64 KiB) so that the whole queue depth is busy.
constexpr std::uint64_t kMaxChunk = 1 << 20;
constexpr std::uint64_t kMinChunk = 64 << 10;
constexpr int kMaxChunkIov = 512;  // under IOV_MAX (1024)
constexpr std::size_t kKeepStaging = 4 << 20;

alignas(kIoAlign) const std::byte kZeroPage[kIoAlign] = {};

struct Chunk {
  std::uint64_t offset = 0;
  std::size_t iov_begin = 0;
  int iov_count = 0;
  std::uint64_t length = 0;
};

struct WriteOp {
  std::size_t slot = 0;
  iovec* iov = nullptr;
  int iov_count = 0;
  std::uint64_t offset = 0;
  std::uint64_t left = 0;
};

// Cuts the pack's contiguous segments into chunks of about `chunk` bytes. With
// O_DIRECT every segment and `chunk` are whole pages, so every cut is too.
void cut(const std::vector<iovec>& segs, std::uint64_t chunk, std::vector<iovec>* iovs,
         std::vector<Chunk>* chunks) {
  std::uint64_t file_off = 0;
  Chunk cur;
  const auto close_chunk = [&] {
    if (cur.iov_count > 0) chunks->push_back(cur);
    cur = Chunk{file_off, iovs->size(), 0, 0};
  };
  for (const iovec& seg : segs) {
    auto* p = static_cast<std::byte*>(seg.iov_base);
    std::uint64_t left = seg.iov_len;
    while (left > 0) {
      if (cur.length == chunk || cur.iov_count == kMaxChunkIov) close_chunk();
      const std::uint64_t n = std::min(left, chunk - cur.length);
      iovs->push_back({p, n});
      ++cur.iov_count;
      cur.length += n;
      file_off += n;
      p += n;
      left -= n;
    }
  }
  close_chunk();
}

}  // namespace

PackWriteResult write_pack(Uring& ring, int dir_fd, const std::string& dir, std::uint64_t seq,
                           std::span<PackItem> items, bool direct, bool fsync, SpareFiles* spares,
                           unsigned depth) {
  PackWriteResult r;
  // Layout and index first: every byte's place is known before anything is written.
  std::uint64_t at = kPackHeaderSize;
  std::uint64_t bounce = 0;
  for (auto& item : items) {
    item.offset = at;
    at += io_round_up(item.data.size);
    if (direct) bounce += io_aligned(item.data.data) ? (item.data.size % kIoAlign ? kIoAlign : 0)
                                                     : io_round_up(item.data.size);
  }
  const std::uint64_t index_offset = at;
  std::vector<std::byte> index;
  for (const auto& item : items)
    encode_pack_record(item.key, item.seq, item.offset, item.data.size, item.checksum, &index);
  const std::uint64_t index_pages = io_round_up(index.size());
  r.file_size = index_offset + index_pages;

  // Staging: the header page, the index pages, then bounce pages (O_DIRECT).
  thread_local AlignedBuffer staging;
  staging.resize(kPackHeaderSize + index_pages + bounce);
  std::byte* const header = staging.data();
  std::byte* const index_pages_at = header + kPackHeaderSize;
  std::byte* bounce_at = index_pages_at + index_pages;
  encode_pack_header(seq, static_cast<std::uint32_t>(items.size()), index_offset, index.data(), index.size(),
                     header);
  std::memcpy(index_pages_at, index.data(), index.size());
  std::memset(index_pages_at + index.size(), 0, index_pages - index.size());

  std::vector<iovec> segs;
  segs.reserve(2 * items.size() + 2);
  const auto add = [&](const void* p, std::uint64_t n) {
    if (n > 0) segs.push_back({const_cast<void*>(p), n});
  };
  add(header, kPackHeaderSize);
  for (const auto& item : items) {
    const std::uint64_t size = item.data.size, padded = io_round_up(size);
    if (!direct) {
      add(item.data.data, size);
      add(kZeroPage, padded - size);
    } else if (io_aligned(item.data.data)) {
      const std::uint64_t body = size & ~(kIoAlign - 1);
      add(item.data.data, body);
      if (body < size) {
        std::memcpy(bounce_at, item.data.data + body, size - body);
        std::memset(bounce_at + (size - body), 0, kIoAlign - (size - body));
        add(bounce_at, kIoAlign);
        bounce_at += kIoAlign;
      }
    } else {
      if (size > 0) std::memcpy(bounce_at, item.data.data, size);
      std::memset(bounce_at + size, 0, padded - size);
      add(bounce_at, padded);
      bounce_at += padded;
    }
  }
  add(index_pages_at, index_pages);

  const unsigned qd = depth == 0 ? ring.entries() : std::min(depth, ring.entries());
  const std::uint64_t chunk =
      std::clamp<std::uint64_t>(io_round_up((r.file_size + qd - 1) / qd), kMinChunk, kMaxChunk);
  std::vector<iovec> iovs;
  std::vector<Chunk> chunks;
  iovs.reserve(segs.size() + r.file_size / chunk + 1);
  cut(segs, chunk, &iovs, &chunks);

  const std::string name = pack_file_name(seq);
  std::string tmp;
  std::uint64_t spare_size = 0;
  const auto fail = [&](int err, const std::string& what) {
    r.err = err;
    r.error = "file tier " + dir + ": " + what + " " + tmp + ": " + std::strerror(err);
    if (err == EMFILE || err == ENFILE)
      r.error += " (every pack holds an open file; raise the open files limit, ulimit -n)";
  };
  if (spares != nullptr && direct) {
    if (auto spare = spares->take(r.file_size)) {
      r.fd = openat(dir_fd, spare->name.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT);
      if (r.fd >= 0) {
        tmp = std::move(spare->name);
        spare_size = spare->size;
      } else {
        unlinkat(dir_fd, spare->name.c_str(), 0);
      }
    }
  }
  if (r.fd < 0) {
    tmp = temp_file_name(name);
    r.fd = openat(dir_fd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
  }
  if (r.fd < 0) {
    fail(errno, "cannot create");
    if (staging.size() > kKeepStaging) staging.reset();
    return r;
  }

  // Allocate the whole file first (a spare's blocks already are). Without it
  // every write extends the file, and ext4 serialises extending (and
  // hole-filling) O_DIRECT writes under the inode's lock: the pack's writes in
  // flight would run one at a time. Within i_size, into allocated (unwritten)
  // blocks, they run in parallel, as fio's do in its laid-out file. It also
  // fails a pack on a full disk before anything is written.
  int first_err = 0;
  if (spare_size == 0 && fallocate(r.fd, 0, 0, static_cast<off_t>(r.file_size)) != 0 && errno != EOPNOTSUPP)
    first_err = errno;
  std::vector<WriteOp> slots(std::min<std::size_t>(chunks.size(), qd));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  const auto queue = [&](WriteOp& op) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_writev(sqe, r.fd, op.iov, op.iov_count, op.offset);
    io_uring_sqe_set_data64(sqe, op.slot);
  };
  run_batch(
      ring, slots, chunks.size(),
      [&](std::size_t i, WriteOp& op) {
        if (first_err != 0) return false;  // the pack is lost anyway
        op.iov = iovs.data() + chunks[i].iov_begin;
        op.iov_count = chunks[i].iov_count;
        op.offset = chunks[i].offset;
        op.left = chunks[i].length;
        queue(op);
        return true;
      },
      [&](WriteOp& op, int res) {
        if (res <= 0) {
          if (first_err == 0) first_err = res < 0 ? -res : EIO;
          return false;
        }
        op.offset += static_cast<std::uint64_t>(res);
        op.left -= static_cast<std::uint64_t>(res);
        if (op.left == 0 || first_err != 0) return false;
        advance_iov(op.iov, &op.iov_count, static_cast<std::size_t>(res));  // short write: the rest
        queue(op);
        return true;
      });
  if (staging.size() > kKeepStaging) staging.reset();

  if (first_err == 0 && spare_size > r.file_size && ftruncate(r.fd, static_cast<off_t>(r.file_size)) != 0)
    first_err = errno;
  if (first_err == 0 && fsync && ::fsync(r.fd) != 0) first_err = errno;
  if (first_err == 0 && renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    fail(errno, "renaming");
  } else if (first_err != 0) {
    fail(first_err, "writing");
  }
  if (r.err != 0) {
    close(r.fd);
    r.fd = -1;
    unlinkat(dir_fd, tmp.c_str(), 0);  // never leave a half-written pack behind
    return r;
  }
  if (fsync) ::fsync(dir_fd);
  return r;
}

std::string read_pack_index(int fd, std::uint64_t file_size, PackHeader* header, std::vector<PackRecord>* records) {
  if (file_size < kPackHeaderSize) return "shorter than a header (" + std::to_string(file_size) + " bytes)";
  AlignedBuffer buf(kPackHeaderSize);
  const ssize_t n = pread(fd, buf.data(), kPackHeaderSize, 0);
  if (n < 0) return std::strerror(errno);
  if (n != static_cast<ssize_t>(kPackHeaderSize)) return "short read of the header";
  if (auto why = decode_pack_header(buf.data(), header); !why.empty()) return why;
  if (header->index_offset + header->index_size > file_size)
    return "the index ends at byte " + std::to_string(header->index_offset + header->index_size) +
           ", the file holds " + std::to_string(file_size);
  const std::uint64_t pages = io_round_up(header->index_size);
  buf.resize(pages);
  std::uint64_t got = 0;
  while (got < pages) {
    const ssize_t m = pread(fd, buf.data() + got, pages - got, static_cast<off_t>(header->index_offset + got));
    if (m < 0 && errno == EINTR) continue;
    if (m < 0) return std::string("reading the index: ") + std::strerror(errno);
    if (m == 0) break;  // end of file inside the index's last page
    got += static_cast<std::uint64_t>(m);
  }
  if (got < header->index_size) return "the index is cut off";
  return decode_pack_index(*header, buf.data(), records);
}

void read_ranges(Uring& ring, int fd, std::span<ReadRange> ranges) {
  struct ReadOp {
    std::size_t slot = 0;
    ReadRange* range = nullptr;
    std::uint64_t done = 0;
  };
  std::vector<ReadOp> slots(std::min<std::size_t>(ranges.size(), ring.entries()));
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s].slot = s;
  const auto queue = [&](ReadOp& op) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_read(sqe, fd, op.range->out + op.done, static_cast<unsigned>(op.range->length - op.done),
                       op.range->offset + op.done);
    io_uring_sqe_set_data64(sqe, op.slot);
  };
  run_batch(
      ring, slots, ranges.size(),
      [&](std::size_t i, ReadOp& op) {
        op.range = &ranges[i];
        op.done = 0;
        if (op.range->length == 0) {
          op.range->result = 0;
          return false;
        }
        queue(op);
        return true;
      },
      [&](ReadOp& op, int res) {
        if (res < 0) {
          op.range->result = res;
          return false;
        }
        op.done += static_cast<std::uint64_t>(res);
        if (res > 0 && op.done < op.range->length) {
          queue(op);
          return true;
        }
        op.range->result = static_cast<std::int64_t>(op.done);
        return false;
      });
}

}  // namespace ferry::xfer::store
