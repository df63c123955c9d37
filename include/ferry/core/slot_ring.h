#pragma once
// Single-producer single-consumer slot ring in caller-supplied memory.
//
// The layout is an ABI between processes and the GPU: fixed-width fields,
// offsets instead of pointers, and every word written by exactly one side.
//
//   ring start
//   +0    RingHeader      magic 'FRNG', version, capacity n, slot_size, offsets  (64 B)
//   +64   ProducerLine    (reserved for producer-owned words, its own cache line) (64 B)
//   +128  ConsumerLine    tail: next index the consumer will release          (64 B)
//   +192  SlotDesc[n]     {seq, len, cookie} — 16 B each, seq written by the producer
//   +192+16n (aligned 64) data[n * slot_size]  message bytes of slot i at i * slot_size
//
// Indices are free-running uint32 values masked by n - 1. The producer of index
// k writes the payload, then publishes desc[k & mask].seq = k + 1 with release.
// The consumer acquire-loads seq and compares it to k + 1, so it never needs a
// shared head index (and a GPU consumer never needs a read-modify-write across
// PCIe). The consumer publishes `tail` (release) after it has finished with a
// slot; the producer caches tail and re-reads it only when the ring looks full.
//
// Feature bits (RingHeader::features): kRingCheckWords, set by a consumer that
// reads payloads across PCIe, asks the producer to write a check word after a
// short payload published into an empty ring (slot_check.h), so that the
// consumer can read a lone request with its poll instead of after it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ferry/core/bytes.h"
#include "ferry/core/slot_check.h"
#include "ferry/core/status.h"

namespace ferry {

inline constexpr std::uint32_t kRingMagic = 0x474e5246;  // "FRNG" little-endian
inline constexpr std::uint16_t kRingVersion = 1;
inline constexpr std::size_t kCacheLine = 64;
// The consumer asks for check words (slot_check.h). It may set the bit at any
// time: the producer reads it on every publish, and until it does, the consumer
// finds no word that matches and reads slots the usual way.
inline constexpr std::uint32_t kRingCheckWords = 1u << 0;
inline constexpr std::uint32_t kRingKnownFeatures = kRingCheckWords;

struct RingHeader {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t header_size;   // sizeof(RingHeader) + the two index lines
  std::uint32_t features;      // kRing* bits; unknown ones make attach() refuse the ring
  std::uint32_t capacity;      // n, a power of two
  std::uint32_t slot_size;     // payload bytes per slot, a multiple of 16
  std::uint32_t start_index;   // the first index (tests start near 2^32 to wrap early)
  std::uint64_t descs_offset;  // from ring start
  std::uint64_t data_offset;   // from ring start
  std::uint64_t total_size;    // memsize(n, slot_size)
  std::uint64_t reserved[2];
};
static_assert(sizeof(RingHeader) == 64);

struct alignas(kCacheLine) RingProducerLine {
  std::uint32_t reserved[16];
};

struct alignas(kCacheLine) RingConsumerLine {
  std::uint32_t tail;  // written by the consumer only
  std::uint32_t reserved[15];
};

struct SlotDesc {
  std::uint32_t seq;     // k + 1 once index k is published; written by the producer only
  std::uint32_t len;     // payload length in bytes
  std::uint64_t cookie;  // opaque to the ring; the server routes responses by it
};
static_assert(sizeof(SlotDesc) == 16);

struct RingLayout {
  RingHeader header;
  RingProducerLine producer;
  RingConsumerLine consumer;
};
static_assert(sizeof(RingLayout) == 192);
static_assert(offsetof(RingLayout, consumer) == 128);
static_assert(offsetof(RingLayout, consumer.tail) == 128);

// One message as the consumer sees it.
struct SlotMessage {
  ByteView payload;
  std::uint64_t cookie = 0;
};

// Pointers into one ring, derived from its base address. Holds no state of its
// own, so each side (and the GPU, from the device address of the same memory)
// builds one from the base.
class SlotRing {
 public:
  SlotRing() = default;

  // Bytes a ring of `capacity` slots of `slot_size` bytes occupies. Throws
  // ferry::Error unless capacity is a power of two and slot_size a multiple of 16.
  static std::size_t memsize(std::uint32_t capacity, std::uint32_t slot_size);

  // Writes a fresh ring into mem (memsize() bytes, 64-byte aligned).
  static SlotRing init(void* mem, std::uint32_t capacity, std::uint32_t slot_size,
                       std::uint32_t start_index = 0);

  // Validates the header of an existing ring of at most `bytes` bytes. Throws
  // ferry::Error naming the field that is wrong.
  static SlotRing attach(void* mem, std::size_t bytes);

  RingLayout* layout() const noexcept { return layout_; }
  std::uint32_t capacity() const noexcept { return layout_->header.capacity; }
  std::uint32_t mask() const noexcept { return layout_->header.capacity - 1; }
  std::uint32_t slot_size() const noexcept { return layout_->header.slot_size; }
  std::uint32_t start_index() const noexcept { return layout_->header.start_index; }
  // The consumer's request for check words after short payloads (slot_check.h).
  void ask_for_check_words() const noexcept {
    std::atomic_ref<std::uint32_t>(layout_->header.features)
        .fetch_or(kRingCheckWords, std::memory_order_relaxed);
  }
  bool check_words_asked() const noexcept {
    return (std::atomic_ref<std::uint32_t>(layout_->header.features).load(std::memory_order_relaxed) &
            kRingCheckWords) != 0;
  }
  SlotDesc* desc(std::uint32_t index) const noexcept { return descs_ + (index & mask()); }
  std::uint8_t* data(std::uint32_t index) const noexcept {
    return data_ + std::size_t(index & mask()) * slot_size();
  }

 private:
  explicit SlotRing(RingLayout* layout);
  RingLayout* layout_ = nullptr;
  SlotDesc* descs_ = nullptr;
  std::uint8_t* data_ = nullptr;
};

// The producing side of a ring, host code. Not thread-safe: one producer.
class RingProducer {
 public:
  RingProducer() = default;
  explicit RingProducer(SlotRing ring) noexcept
      : ring_(ring), head_(ring.start_index()), cached_tail_(ring.start_index()) {}

  // Slots the producer may still fill before the ring is full (re-reads tail).
  std::uint32_t free_slots() noexcept {
    refresh_tail();
    return ring_.capacity() - (head_ - cached_tail_);  // unsigned subtraction is modulo 2^32
  }

  // The buffer of the next slot, or an empty view when the ring is full.
  MutableByteView try_claim() noexcept {
    if (head_ - cached_tail_ >= ring_.capacity()) {
      refresh_tail();
      if (head_ - cached_tail_ >= ring_.capacity()) return {};
    }
    return {ring_.data(head_), ring_.slot_size()};
  }

  // Publishes the slot returned by the last successful try_claim().
  void publish(std::uint32_t len, std::uint64_t cookie) noexcept {
    SlotDesc* d = ring_.desc(head_);
    // Only for a request behind no other the producer knows of (every earlier
    // one consumed, by tail or observe_consumed): one the consumer is likely
    // idle for, the case the word is for. Under load the hash would cost every
    // request and serve none.
    if (head_ == cached_tail_ && has_check_word(len, ring_.slot_size()) && ring_.check_words_asked()) {
      std::uint8_t* slot = ring_.data(head_);
      const std::uint64_t word = compute_check_word(slot, len, head_ + 1, cookie);
      std::memcpy(slot + check_word_offset(len), &word, sizeof word);
    }
    d->len = len;
    d->cookie = cookie;
    // R1: release publishes the payload, its check word and len/cookie written above; pairs with
    // the consumer's acquire load of seq (A1).
    std::atomic_ref<std::uint32_t>(d->seq).store(head_ + 1, std::memory_order_release);
    ++head_;
  }

  // Copies payload into the next slot and publishes it. Full when no slot is
  // free (back-pressure: try again later); TooLarge when payload exceeds the slot.
  Status try_push(ByteView payload, std::uint64_t cookie) noexcept {
    if (payload.size > ring_.slot_size()) return Status::TooLarge;
    MutableByteView slot = try_claim();
    if (slot.data == nullptr) return Status::Full;
    if (payload.size != 0) std::memcpy(slot.data, payload.data, payload.size);
    publish(static_cast<std::uint32_t>(payload.size), cookie);
    return Status::Ok;
  }

  // Burst (DPDK's "up to n"): pushes up to n payloads in order, stopping at the
  // first that does not fit (full ring, or too large for a slot). Returns how
  // many were pushed; payloads[k] gets cookies[k].
  std::uint32_t try_push_burst(const ByteView* payloads, const std::uint64_t* cookies, std::uint32_t n) noexcept {
    std::uint32_t k = 0;
    while (k < n && try_push(payloads[k], cookies[k]) == Status::Ok) ++k;
    return k;
  }

  // Tells the producer that the consumer is done with every index below `index`,
  // learnt from a protocol above the ring rather than from tail. The server uses
  // it: a worker publishes response k only after it has read request k (the
  // release of the response's seq orders those reads first), so consuming
  // response k frees request slot k even before the worker's lazily published
  // tail says so.
  void observe_consumed(std::uint32_t index) noexcept {
    // Only move forward (unsigned subtraction is modulo 2^32): index is ahead of
    // the cached tail by at most the number of slots handed out.
    if (index - cached_tail_ <= head_ - cached_tail_) cached_tail_ = index;
  }

  std::uint32_t head() const noexcept { return head_; }
  const SlotRing& ring() const noexcept { return ring_; }

 private:
  void refresh_tail() noexcept {
    // A2: acquire pairs with the consumer's release of tail (R2): the consumer has
    // finished reading every slot below tail, so they may be overwritten.
    cached_tail_ = std::atomic_ref<std::uint32_t>(ring_.layout()->consumer.tail)
                       .load(std::memory_order_acquire);
  }

  SlotRing ring_;
  std::uint32_t head_ = 0;
  std::uint32_t cached_tail_ = 0;
};

// The consuming side of a ring, host code. Not thread-safe: one consumer.
class RingConsumer {
 public:
  RingConsumer() = default;
  explicit RingConsumer(SlotRing ring) noexcept
      : ring_(ring), next_(ring.start_index()), released_(ring.start_index()) {}

  // The message at the next unread index, without consuming it; false when empty.
  bool try_peek(SlotMessage* out) const noexcept {
    SlotDesc* d = ring_.desc(next_);
    // A1: acquire pairs with the producer's release of seq (R1); after it, len,
    // cookie and the payload bytes of this slot are visible.
    if (std::atomic_ref<std::uint32_t>(d->seq).load(std::memory_order_acquire) != next_ + 1)
      return false;
    out->payload = {ring_.data(next_), d->len};
    out->cookie = d->cookie;
    return true;
  }

  // Burst (DPDK's "up to n"): the published messages from the next unread index
  // on, up to n of them, into out[0..k); consumes nothing. Returns k (0 when empty).
  std::uint32_t peek_burst(SlotMessage* out, std::uint32_t n) const noexcept {
    std::uint32_t k = 0;
    for (; k < n; ++k) {
      SlotDesc* d = ring_.desc(next_ + k);
      // A1, per message: acquire pairs with the producer's release of its seq (R1).
      if (std::atomic_ref<std::uint32_t>(d->seq).load(std::memory_order_acquire) != next_ + k + 1) break;
      out[k] = {{ring_.data(next_ + k), d->len}, d->cookie};
    }
    return k;
  }

  // How many published messages wait from the next unread index on, up to max.
  std::uint32_t ready(std::uint32_t max) const noexcept {
    std::uint32_t k = 0;
    // A1, as in try_peek().
    while (k < max && std::atomic_ref<std::uint32_t>(ring_.desc(next_ + k)->seq).load(std::memory_order_acquire) ==
                          next_ + k + 1)
      ++k;
    return k;
  }

  // Marks the peeked message read. Its slot stays owned by the consumer (the
  // payload view stays valid) until release().
  void advance() noexcept { ++next_; }
  // Marks n peeked messages read (after peek_burst).
  void advance(std::uint32_t n) noexcept { next_ += n; }

  // Returns every advanced slot to the producer.
  void release() noexcept {
    if (released_ == next_) return;
    released_ = next_;
    // R2: release orders our reads of the slots below next_ before the producer
    // may reuse them; pairs with the producer's acquire of tail (A2).
    std::atomic_ref<std::uint32_t>(ring_.layout()->consumer.tail)
        .store(next_, std::memory_order_release);
  }

  std::uint32_t next_index() const noexcept { return next_; }
  const SlotRing& ring() const noexcept { return ring_; }

 private:
  SlotRing ring_;
  std::uint32_t next_ = 0;
  std::uint32_t released_ = 0;
};

}  // namespace ferry
