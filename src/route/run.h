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

constexpr std::uint32_t pad8(std::uint32_t n) noexcept {
  return (n + 7u) & ~7u;
}

// Bytes a run of `count` payloads of `len` bytes occupies.
constexpr std::uint64_t run_bytes(std::uint32_t len, std::uint32_t count) noexcept {
  return kRunHeaderBytes + ((std::uint64_t{len} * count + 7u) & ~std::uint64_t{7});
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
  return static_cast<std::uint32_t>(run_bytes(h.len(), count));  // at most the room the caller had
}

// Copies payloads; the usual sizes as fixed-size copies the compiler inlines
// (a router moves runs of one or two small messages most of the time).
inline void copy_payloads(std::uint8_t* dst, const std::uint8_t* src, std::uint32_t bytes) noexcept {
  switch (bytes) {
    case 8: std::memcpy(dst, src, 8); return;
    case 16: std::memcpy(dst, src, 16); return;
    case 24: std::memcpy(dst, src, 24); return;
    case 32: std::memcpy(dst, src, 32); return;
    default: std::memcpy(dst, src, bytes);
  }
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
// filled (an aggregation buffer, a request chunk, a router's delivery chunk);
// reset whenever the buffer leaves or bytes are written into it by other means.
//
// The key is the header's first 14 bytes as two words (dest, src | len, magic,
// handler), compared against the open run's header in the buffer itself.
class RunCursor {
 public:
  void reset() noexcept { open_ = false; }

  // Room for one payload of `len` bytes in base[0, capacity), whose content
  // ends at *used (8-aligned): joins the last run when the key matches, else
  // starts a run. Returns where to write the payload, or nullptr when the
  // buffer lacks room (the caller lets it leave and resets the cursor).
  std::uint8_t* append(std::uint8_t* base, std::uint32_t* used, std::uint32_t capacity, std::uint32_t dest,
                       std::uint32_t src, std::uint16_t handler, std::uint32_t len) noexcept {
    const std::uint64_t k0 = key0(dest, src), k1 = key1(len | kRunMagic, handler);
    if (open_ && matches(base, k0, k1) && count_ < kMaxRunCount) [[likely]] {
      const std::uint32_t end = end_ + len;
      if (pad8(end) > capacity) return nullptr;
      std::uint8_t* at = base + end_;
      grow(base, used, end, 1);
      return at;
    }
    const std::uint32_t start = *used;
    if (start + kRunHeaderBytes + pad8(len) > capacity) return nullptr;
    open(base, used, start, k0, k1, len, 1);
    return base + start + kRunHeaderBytes;
  }

  // Appends up to `count` payloads of run `h` (read from `payloads`) to
  // base[0, capacity), joining the last run when the key matches, else in new
  // runs; returns how many fit (the caller lets the buffer leave and appends
  // the rest to the next). Routers and two-hop forwarding merge runs with it.
  // Inline for the common cases, which need no division: all of them join the
  // last run, or all of them fit one new run.
  [[gnu::always_inline]] std::uint32_t append_payloads(std::uint8_t* base, std::uint32_t* used,
                                                       std::uint32_t capacity, const RunHeader& h,
                                                       const std::uint8_t* payloads,
                                                       std::uint32_t count) noexcept {
    const std::uint32_t len = h.len();
    const std::uint64_t bytes = std::uint64_t{len} * count;
    std::uint64_t k0, k1;
    std::memcpy(&k0, &h, 8);
    std::memcpy(&k1, reinterpret_cast<const std::uint8_t*>(&h) + 8, 8);
    if (open_ && matches(base, k0, k1)) {
      if (count_ + count <= kMaxRunCount && end_ + bytes <= capacity) [[likely]] {
        copy_payloads(base + end_, payloads, static_cast<std::uint32_t>(bytes));
        grow(base, used, end_ + static_cast<std::uint32_t>(bytes), count);
        return count;
      }
      return append_payloads_in_pieces(base, used, capacity, h, payloads, count);
    }
    if (count <= kMaxRunCount && *used + kRunHeaderBytes + bytes <= capacity) [[likely]] {
      const std::uint32_t start = *used;
      std::memcpy(base + start, &h, kRunHeaderBytes);  // count is h.count: the whole run
      if (count != h.count) {
        const auto c = static_cast<std::uint16_t>(count);
        std::memcpy(base + start + offsetof(RunHeader, count), &c, sizeof c);
      }
      copy_payloads(base + start + kRunHeaderBytes, payloads, static_cast<std::uint32_t>(bytes));
      open_ = true;
      header_ = start;
      end_ = start + kRunHeaderBytes + static_cast<std::uint32_t>(bytes);
      count_ = count;
      *used = pad8(end_);
      return count;
    }
    return append_payloads_in_pieces(base, used, capacity, h, payloads, count);
  }

 private:
  static constexpr std::uint64_t kKey1Mask = 0x0000FFFFFFFFFFFFull;  // the count's bytes left out

  // Whether the open run's header (in cache: the last thing written to this
  // buffer) has key (k0, k1); k1's count bytes are ignored.
  bool matches(const std::uint8_t* base, std::uint64_t k0, std::uint64_t k1) const noexcept {
    std::uint64_t h0, h1;
    std::memcpy(&h0, base + header_, 8);
    std::memcpy(&h1, base + header_ + 8, 8);
    return h0 == k0 && ((h1 ^ k1) & kKey1Mask) == 0;
  }

  static std::uint64_t key0(std::uint32_t dest, std::uint32_t src) noexcept {
    return std::uint64_t{dest} | (std::uint64_t{src} << 32);
  }
  static std::uint64_t key1(std::uint32_t len_magic, std::uint16_t handler) noexcept {
    return std::uint64_t{len_magic} | (std::uint64_t{handler} << 32);
  }

  // Writes a run header at `start` holding `count` payloads (already there or
  // written next) and makes it the open run.
  void open(std::uint8_t* base, std::uint32_t* used, std::uint32_t start, std::uint64_t k0, std::uint64_t k1,
            std::uint32_t len, std::uint32_t count) noexcept {
    const std::uint64_t w1 = (k1 & kKey1Mask) | (std::uint64_t{count} << 48);
    std::memcpy(base + start, &k0, 8);
    std::memcpy(base + start + 8, &w1, 8);
    open_ = true;
    header_ = start;
    end_ = start + kRunHeaderBytes + len * count;
    count_ = count;
    *used = pad8(end_);
  }

  // The open run now ends at `end` and holds `added` more payloads.
  void grow(std::uint8_t* base, std::uint32_t* used, std::uint32_t end, std::uint32_t added) noexcept {
    end_ = end;
    count_ += added;
    const auto c = static_cast<std::uint16_t>(count_);
    std::memcpy(base + header_ + offsetof(RunHeader, count), &c, sizeof c);
    *used = pad8(end);
  }

  // The rest of append_payloads: runs that fill the buffer or a run's count.
  [[gnu::noinline]] std::uint32_t append_payloads_in_pieces(std::uint8_t* base, std::uint32_t* used,
                                                            std::uint32_t capacity, const RunHeader& h,
                                                            const std::uint8_t* payloads,
                                                            std::uint32_t count) noexcept {
    std::uint64_t k0, k1;
    std::memcpy(&k0, &h, 8);
    std::memcpy(&k1, reinterpret_cast<const std::uint8_t*>(&h) + 8, 8);
    const std::uint32_t len = h.len();
    std::uint32_t done = 0;
    while (done < count) {
      if (!open_ || !matches(base, k0, k1) || count_ == kMaxRunCount) {
        const std::uint32_t start = *used;
        if (start + kRunHeaderBytes + pad8(len) > capacity) break;
        open(base, used, start, k0, k1, len, 0);
      }
      // capacity is a multiple of 8, so the padded end fits when the end does.
      std::uint32_t n = std::min(count - done, kMaxRunCount - count_);
      if (len != 0) n = std::min(n, (capacity - end_) / len);
      if (n == 0) break;
      std::memcpy(base + end_, payloads + std::size_t{done} * len, std::size_t{n} * len);
      grow(base, used, end_ + n * len, n);
      done += n;
    }
    return done;
  }

  bool open_ = false;
  std::uint32_t header_ = 0;  // offset of the open run's header (its key)
  std::uint32_t end_ = 0;     // its unpadded end
  std::uint32_t count_ = 0;   // its payloads
};

}  // namespace ferry::route::detail
