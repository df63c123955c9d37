#pragma once
// The wire unit: a run of messages from one sender to one destination for one
// handler, all of one payload size. A run is a 16-byte header and its payloads
// back to back, unpadded; the run as a whole is padded to 8 bytes, so every
// header and every run's first payload stays 8-byte aligned. Sending appends to
// the buffer's last run when the next message has the same key, so a stream of
// 8-byte updates to one rank costs 8 bytes a message plus 16 a run. The same
// bytes travel app -> router -> MPI -> router -> app: routers copy runs and
// never re-encode their payloads.
//
//   +0   dest     u32   destination application rank
//   +4   src      u32   sending application rank
//   +8   len      u32   payload bytes of each message (low 24 bits) | kRunMagic (high 8)
//   +12  handler  u16   index into the destination's handler table
//   +14  count    u16   messages in the run, at least 1
//   +16  payloads count x len bytes, then padding to a multiple of 8

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ferry::route::detail {

inline constexpr std::uint32_t kRunMagic = 0xF7000000u;  // a parser that lost its place stops at once
inline constexpr std::uint32_t kMaxItemBytes = 0x00FFFFFFu;
inline constexpr std::uint32_t kRunHeaderBytes = 16;
inline constexpr std::uint32_t kMaxRunCount = 0xFFFFu;

struct RunHeader {
  std::uint32_t dest;
  std::uint32_t src;
  std::uint32_t len_magic;
  std::uint16_t handler;
  std::uint16_t count;
  std::uint32_t len() const noexcept { return len_magic & kMaxItemBytes; }
};
static_assert(sizeof(RunHeader) == kRunHeaderBytes);
static_assert(offsetof(RunHeader, count) == 14);

constexpr std::uint32_t pad8(std::uint32_t n) noexcept { return (n + 7u) & ~7u; }

// Bytes a run of `count` payloads of `len` bytes occupies.
constexpr std::uint32_t run_bytes(std::uint32_t len, std::uint32_t count) noexcept {
  return kRunHeaderBytes + pad8(len * count);
}

// Payloads of `len` bytes that fit one run in `room` bytes (at most kMaxRunCount).
constexpr std::uint32_t items_that_fit(std::uint32_t len, std::uint32_t room) noexcept {
  if (room < kRunHeaderBytes + pad8(len)) return 0;
  if (len == 0) return kMaxRunCount;
  return std::min((room - kRunHeaderBytes) / len, kMaxRunCount);
}

inline void write_run_header(std::uint8_t* at, std::uint32_t dest, std::uint32_t src, std::uint16_t handler,
                             std::uint32_t len, std::uint32_t count) noexcept {
  const RunHeader h{dest, src, len | kRunMagic, handler, static_cast<std::uint16_t>(count)};
  std::memcpy(at, &h, sizeof h);
}

// Reads the run at data[off] of a buffer of `size` bytes; returns its total
// size, or 0 when the bytes there are not a whole, valid run.
inline std::uint32_t read_run(const std::uint8_t* data, std::size_t size, std::size_t off,
                              RunHeader* h) noexcept {
  if (size - off < kRunHeaderBytes) return 0;
  std::memcpy(h, data + off, sizeof *h);
  if ((h->len_magic & ~kMaxItemBytes) != kRunMagic || h->count == 0) return 0;
  const std::uint64_t rb = kRunHeaderBytes + ((std::uint64_t{h->len()} * h->count + 7u) & ~std::uint64_t{7});
  if (rb > size - off) return 0;
  return static_cast<std::uint32_t>(rb);
}

// Writes a run of `count` of h's payloads, taken from `payloads`, at `at`
// (which has run_bytes(h.len(), count) bytes of room); returns its size.
// Routers split runs with it where one does not fit a delivery slot.
inline std::uint32_t put_run(std::uint8_t* at, const RunHeader& h, const std::uint8_t* payloads,
                             std::uint32_t count) noexcept {
  write_run_header(at, h.dest, h.src, h.handler, h.len(), count);
  if (count != 0) std::memcpy(at + kRunHeaderBytes, payloads, std::size_t{h.len()} * count);
  return run_bytes(h.len(), count);
}

// Copies `bytes` (a multiple of 8). Short runs, the common case in the ring
// modes, go by words the compiler keeps inline, instead of a call into memcpy.
inline void copy_words(std::uint8_t* dst, const std::uint8_t* src, std::uint32_t bytes) noexcept {
  if (bytes <= 64) {
    for (std::uint32_t i = 0; i < bytes; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, src + i, 8);
      std::memcpy(dst + i, &w, 8);
    }
    return;
  }
  std::memcpy(dst, src, bytes);
}

// The writer's end of a buffer of runs: where the last run starts and ends, and
// its key, so that a message with the same key joins it. One per buffer being
// filled (an aggregation buffer, a request chunk); reset whenever the buffer
// leaves or bytes are written into it by other means.
class RunCursor {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  void reset() noexcept { header_ = kNone; }

  // Appends up to `count` payloads of run `h` (read from `payloads`) to
  // base[0, capacity), joining the last run when the key matches, else in new
  // runs; returns how many fit (the caller lets the buffer leave and appends
  // the rest to the next). Routers and two-hop forwarding merge runs with it.
  std::uint32_t append_payloads(std::uint8_t* base, std::uint32_t* used, std::uint32_t capacity,
                                const RunHeader& h, const std::uint8_t* payloads, std::uint32_t count) noexcept {
    const std::uint32_t len = h.len();
    std::uint32_t done = 0;
    while (done < count) {
      if (header_ == kNone || h.dest != dest_ || h.handler != handler_ || len != len_ || h.src != src_ ||
          count_ == kMaxRunCount) {
        const std::uint32_t start = *used;
        if (start + kRunHeaderBytes + pad8(len) > capacity) break;
        write_run_header(base + start, h.dest, h.src, h.handler, len, 0);
        header_ = start;
        end_ = start + kRunHeaderBytes;
        dest_ = h.dest;
        src_ = h.src;
        handler_ = h.handler;
        len_ = len;
        count_ = 0;
      }
      // capacity is a multiple of 8, so the padded end fits when the end does.
      std::uint32_t n = std::min(count - done, kMaxRunCount - count_);
      if (len != 0) n = std::min(n, (capacity - end_) / len);
      if (n == 0) break;
      std::memcpy(base + end_, payloads + std::size_t{done} * len, std::size_t{n} * len);
      end_ += n * len;
      count_ = static_cast<std::uint16_t>(count_ + n);
      std::memcpy(base + header_ + offsetof(RunHeader, count), &count_, sizeof count_);
      *used = pad8(end_);
      done += n;
    }
    return done;
  }

  // Room for one payload of `len` bytes in base[0, capacity), whose content
  // ends at *used (8-aligned): joins the last run when the key matches, else
  // starts a run. Returns where to write the payload, or nullptr when the
  // buffer lacks room (the caller lets it leave and resets the cursor).
  std::uint8_t* append(std::uint8_t* base, std::uint32_t* used, std::uint32_t capacity, std::uint32_t dest,
                       std::uint32_t src, std::uint16_t handler, std::uint32_t len) noexcept {
    if (header_ != kNone && dest == dest_ && handler == handler_ && len == len_ && src == src_ &&
        count_ < kMaxRunCount) [[likely]] {
      const std::uint32_t end = end_ + len;
      if (pad8(end) > capacity) return nullptr;
      std::uint8_t* at = base + end_;
      end_ = end;
      *used = pad8(end);
      ++count_;
      std::memcpy(base + header_ + offsetof(RunHeader, count), &count_, sizeof count_);
      return at;
    }
    const std::uint32_t start = *used;
    if (start + kRunHeaderBytes + pad8(len) > capacity) return nullptr;
    write_run_header(base + start, dest, src, handler, len, 1);
    header_ = start;
    end_ = start + kRunHeaderBytes + len;
    *used = pad8(end_);
    dest_ = dest;
    src_ = src;
    handler_ = handler;
    len_ = len;
    count_ = 1;
    return base + start + kRunHeaderBytes;
  }

 private:
  std::uint32_t header_ = kNone;  // offset of the last run's header
  std::uint32_t end_ = 0;         // its unpadded end
  std::uint32_t dest_ = 0, src_ = 0, len_ = 0;
  std::uint16_t handler_ = 0;
  std::uint16_t count_ = 0;
};

}  // namespace ferry::route::detail
