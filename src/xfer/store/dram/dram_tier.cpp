#include "xfer/store/dram/dram_tier.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/xfer/checksum.h"
#include "xfer/store/quote_key.h"
#include "xfer/store/sizes.h"

namespace ferry::xfer::store {
namespace {

std::uint64_t page_round(std::uint64_t n) {
  return (n + kDramAlign - 1) & ~(kDramAlign - 1);
}

}  // namespace

// One stored object's pool range. Readers hold a reference while they copy; the
// range returns to the allocator when the index and every reader have let go.
struct DramTier::Block {
  DramTier* owner;
  std::uint64_t offset;
  std::uint64_t size;
  std::uint64_t checksum;
  // Set by put() when it returns the range itself, batched with the others it
  // overwrote: the destructor then leaves the range alone.
  mutable bool released = false;

  Block(DramTier* o, std::uint64_t off, std::uint64_t n, std::uint64_t sum)
      : owner(o), offset(off), size(n), checksum(sum) {}
  Block(const Block&) = delete;  // a copy would free the range twice
  Block& operator=(const Block&) = delete;

  std::uint8_t* data() const { return static_cast<std::uint8_t*>(owner->base_) + offset; }
  ~Block() {
    if (size > 0 && !released) owner->release_range(offset, size);
  }
};

DramTier::DramTier(std::uint64_t capacity, std::string spec)
    : spec_(spec.empty() ? "dram:" + format_size(capacity) : std::move(spec)),
      capacity_(capacity),
      alloc_(page_round(capacity), kDramAlign, page_round(capacity) / 4) {
  if (capacity == 0) throw Error("dram tier: capacity must be more than 0 bytes");
  if (page_round(capacity) < capacity)
    throw Error("dram tier: capacity " + std::to_string(capacity) + " is too large");
  pool_size_ = page_round(capacity);
  // MAP_NORESERVE: the pool is a reservation of address space; pages are
  // committed when an object first lands on them.
  base_ =
      mmap(nullptr, pool_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw_errno("dram tier: cannot map a pool of " + format_size(pool_size_));
  }
  // Huge pages where the kernel offers them: a first put into fresh pool memory
  // takes one fault per 2 MiB instead of 512 (docs/bench/store.md has first
  // puts before and after). Advice only: ignoring a refusal is correct.
  (void)madvise(base_, pool_size_, MADV_HUGEPAGE);
}

DramTier::~DramTier() {
  {
    std::lock_guard lock(mu_);
    index_.clear();  // every Block must be gone before the pool is unmapped
    lru_.clear();
  }
  if (base_ != nullptr) munmap(base_, pool_size_);
}

std::uint64_t DramTier::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

std::uint64_t DramTier::free_bytes() const {
  std::lock_guard lock(alloc_mu_);
  return alloc_.free_bytes();
}

std::uint64_t DramTier::largest_free() const {
  std::lock_guard lock(alloc_mu_);
  return alloc_.largest_free();
}

void DramTier::release_range(std::uint64_t offset, std::uint64_t len) noexcept {
  std::lock_guard lock(alloc_mu_);
  alloc_.free(offset, len);
}

// An empty pointer when the pool has no free range of that size: the chain then
// moves older objects down, or puts this one in the next tier (NoSpace is an
// answer here, not a fault).
std::shared_ptr<const DramTier::Block> DramTier::make_block(std::uint64_t size, std::uint64_t sum) noexcept {
  std::uint64_t offset = 0;
  if (size > 0) {
    std::lock_guard lock(alloc_mu_);
    const auto at = alloc_.allocate(size);
    if (!at) return nullptr;
    offset = *at;
  }
  return std::make_shared<const Block>(this, offset, size, sum);
}

void DramTier::reserve(std::span<const std::uint64_t> sizes, std::span<Reserved> out) noexcept {
  auto* base = static_cast<std::uint8_t*>(base_);
  std::lock_guard lock(alloc_mu_);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    out[i] = Reserved{};
    if (sizes[i] == 0) continue;
    const auto at = alloc_.allocate(sizes[i]);
    if (!at) continue;
    const std::uint64_t ticket = next_ticket_++;
    reserved_.emplace(*at, Reservation{sizes[i], ticket});
    out[i] = Reserved{MutableByteView{base + *at, static_cast<std::size_t>(sizes[i])}, ticket};
  }
}

void DramTier::release(std::span<const Reserved> ranges) noexcept {
  const auto* base = static_cast<const std::uint8_t*>(base_);
  std::lock_guard lock(alloc_mu_);
  for (const Reserved& r : ranges) {
    if (r.range.data == nullptr) continue;
    auto it = reserved_.find(static_cast<std::uint64_t>(r.range.data - base));
    // Absent: adopted by put(). Another ticket: adopted, freed, and reserved
    // again by another caller, whose range this must not free.
    if (it == reserved_.end() || it->second.ticket != r.ticket) continue;
    alloc_.free(it->first, it->second.size);
    reserved_.erase(it);
  }
}

void DramTier::borrow(std::span<const std::string_view> keys, std::span<std::optional<Borrowed>> out) noexcept {
  // References taken under the lock, the Borrowed built outside it.
  thread_local std::vector<std::shared_ptr<const Block>> blocks;
  blocks.assign(keys.size(), nullptr);
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto it = index_.find(keys[i]);
      if (it == index_.end()) continue;
      blocks[i] = it->second.block;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!blocks[i]) {
      out[i].reset();
      continue;
    }
    Borrowed& b = out[i].emplace();
    b.bytes = ByteView{blocks[i]->data(), static_cast<std::size_t>(blocks[i]->size)};
    b.checksum = blocks[i]->checksum;
    b.hold = std::move(blocks[i]);
  }
}

std::uint64_t DramTier::offset_of(const std::uint8_t* p) const noexcept {
  return static_cast<std::uint64_t>(p - static_cast<const std::uint8_t*>(base_));
}

// Whether the item's bytes are exactly a reserved range; if so the range is no
// longer reserved (the caller makes it a Block). Caller holds alloc_mu_.
bool DramTier::take_reserved(const PutItem& item) noexcept {
  const auto* base = static_cast<const std::uint8_t*>(base_);
  if (item.data.size == 0 || item.data.data < base || item.data.data >= base + pool_size_) return false;
  auto it = reserved_.find(offset_of(item.data.data));
  if (it == reserved_.end() || it->second.size != item.data.size) return false;
  reserved_.erase(it);
  return true;
}

void DramTier::put(std::span<PutItem> items, Fault& fault) noexcept {
  // Place and copy every item first, without the index lock (nobody can see the
  // new blocks yet), then publish the whole batch under one acquisition of mu_:
  // the agent's lanes put batches of many small blocks concurrently, and a lock
  // per block is where they would queue.
  thread_local std::vector<std::shared_ptr<const Block>> blocks;
  thread_local std::vector<std::uint8_t> adopted;
  blocks.assign(items.size(), nullptr);
  adopted.assign(items.size(), 0);
  {
    // Reserved ranges (the agent's zero-copy pushes) change hands under one
    // acquisition of the allocator's lock for the whole batch.
    std::lock_guard lock(alloc_mu_);
    for (std::size_t i = 0; i < items.size(); ++i)
      adopted[i] = !items[i].key.empty() && take_reserved(items[i]);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    PutItem& item = items[i];
    if (item.key.empty()) {
      item.status = fault.raise(XferStatus::InvalidDesc, "dram tier: empty key");
      continue;
    }
    std::shared_ptr<const Block> block;
    if (adopted[i]) {
      block = std::make_shared<const Block>(this, offset_of(item.data.data), item.data.size, item.checksum);
    } else {
      block = make_block(item.data.size, item.checksum);
      if (!block) {
        item.status = XferStatus::NoSpace;
        continue;
      }
      if (item.data.size > 0) std::memcpy(block->data(), item.data.data, item.data.size);
    }
    blocks[i] = std::move(block);
  }
  // Overwritten blocks, released after the lock, so a free never runs under mu_.
  thread_local std::vector<std::shared_ptr<const Block>> old;
  old.clear();
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!blocks[i]) continue;
      PutItem& item = items[i];
      auto it = index_.find(item.key);
      if (it == index_.end()) {
        lru_.emplace_front(item.key);
        index_.emplace(std::string(item.key), Entry{std::move(blocks[i]), lru_.begin()});
      } else {
        used_ -= it->second.block->size;
        old.push_back(std::exchange(it->second.block, std::move(blocks[i])));
        lru_.splice(lru_.begin(), lru_, it->second.lru);
      }
      used_ += item.data.size;
      item.status = XferStatus::Ok;
    }
  }
  blocks.clear();
  release_overwritten(old);
}

// The agent's pushes overwrite the same keys over and over, so most puts free
// a range. Ranges that nobody borrows go back to the allocator under one
// acquisition of alloc_mu_ for the whole batch: a lock per block queued each
// lane behind the others' batch reserves (which hold alloc_mu_ for a whole
// batch). A borrowed block still frees its range when its last reader lets go.
void DramTier::release_overwritten(std::vector<std::shared_ptr<const Block>>& old) noexcept {
  thread_local std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  ranges.clear();
  for (auto& b : old) {
    // Exact, not approximate: the block has left the index, so no new
    // reference can appear; only existing ones can go away (then the
    // destructor frees the range as usual).
    if (b->size == 0 || b.use_count() != 1) continue;
    ranges.emplace_back(b->offset, b->size);
    b->released = true;
  }
  // Pairs with the release half of the last reader's reference drop (libstdc++
  // decrements acq_rel): its reads of the range happen before we reuse it.
  std::atomic_thread_fence(std::memory_order_acquire);
  old.clear();
  if (ranges.empty()) return;
  std::lock_guard lock(alloc_mu_);
  for (const auto& [offset, len] : ranges) alloc_.free(offset, len);
}

void DramTier::get(std::span<GetItem> items, Fault& fault) noexcept {
  for (auto& item : items) get_one(item, fault);
}

void DramTier::get_one(GetItem& item, Fault& fault) noexcept {
  std::shared_ptr<const Block> block;
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(item.key);
    if (it == index_.end()) {
      item.status = XferStatus::NotFound;
      return;
    }
    block = it->second.block;  // the reference keeps the range alive during the copy
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  item.size = block->size;
  if (item.out.size < block->size) {
    item.status = fault.raise(XferStatus::TooLarge,
                              "dram tier: object " + quote_key(item.key) + " has " + std::to_string(block->size) +
                                  " bytes, the buffer holds " + std::to_string(item.out.size),
                              item.key);
    return;
  }
  if (block->size > 0) std::memcpy(item.out.data, block->data(), block->size);
  // Verify what the caller received, so a pool corrupted by a stray write (or a
  // bad DMA) is reported rather than returned.
  const std::uint64_t got = checksum({item.out.data, block->size});
  if (got != block->checksum) {
    item.status = fault.raise(XferStatus::ChecksumMismatch,
                              "dram tier: object " + quote_key(item.key) + " fails its checksum (stored " +
                                  checksum_hex(block->checksum) + ", computed " + checksum_hex(got) + ")",
                              item.key);
    return;
  }
  item.status = XferStatus::Ok;
}

std::optional<ObjectMeta> DramTier::stat(std::string_view key) noexcept {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return ObjectMeta{it->second.block->size, it->second.block->checksum};
}

XferStatus DramTier::remove(std::string_view key, Fault& /*fault*/) noexcept {
  std::shared_ptr<const Block> old;  // released after the lock: the last reference frees the range
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return XferStatus::NotFound;
  used_ -= it->second.block->size;
  old = std::move(it->second.block);
  lru_.erase(it->second.lru);
  index_.erase(it);
  return XferStatus::Ok;
}

XferStatus DramTier::list(std::vector<std::pair<std::string, ObjectMeta>>* out, Fault& /*fault*/) noexcept {
  std::lock_guard lock(mu_);
  out->clear();
  out->reserve(index_.size());
  for (const auto& [key, e] : index_) out->emplace_back(key, ObjectMeta{e.block->size, e.block->checksum});
  return XferStatus::Ok;
}

std::vector<std::string> DramTier::lru_victims(std::uint64_t bytes) noexcept {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  std::uint64_t sum = 0;
  for (auto it = lru_.rbegin(); it != lru_.rend() && sum < bytes; ++it) {
    out.push_back(*it);
    sum += index_.find(*it)->second.block->size;
  }
  return out;
}

}  // namespace ferry::xfer::store
