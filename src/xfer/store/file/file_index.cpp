#include "xfer/store/file/file_index.h"

#include <algorithm>

namespace ferry::xfer::store {

IndexEntry* FileIndex::find(std::string_view key) {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

const IndexEntry* FileIndex::find(std::string_view key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

bool FileIndex::superseded(std::string_view key, std::uint64_t seq) const {
  auto it = map_.find(key);
  return it != map_.end() && it->second.seq > seq;
}

void FileIndex::install(std::string_view key, const std::shared_ptr<PackFile>& pack, std::uint64_t offset,
                        std::uint64_t size, std::uint64_t checksum, std::uint64_t seq, bool* unlink_file,
                        EmptiedPacks* emptied) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    lru_.emplace_front(key);
    it = map_.emplace(std::string(key), IndexEntry{}).first;
    it->second.lru = lru_.begin();
  } else {
    IndexEntry& old = it->second;
    used_ -= old.size;
    if (old.pack) {
      packs_.object_died(old.pack->seq, old.size, emptied);
      old.shadow_seq = std::max(old.shadow_seq, old.seq);
    } else if (pack) {
      *unlink_file = true;  // a newer packed version replaces the object file
    }
    lru_.splice(lru_.begin(), lru_, old.lru);
  }
  IndexEntry& e = it->second;
  e.size = size;
  e.checksum = checksum;
  e.whole_sum = false;  // puts and compaction store checksum()'s sums
  e.generation = next_generation_++;
  e.seq = seq;
  e.pack = pack;
  e.offset = offset;
  used_ += size;
  if (pack) packs_.object_lives(pack->seq, size);
}

void FileIndex::shadow(std::string_view key, std::uint64_t seq) {
  IndexEntry& newer = map_.find(key)->second;
  newer.shadow_seq = std::max(newer.shadow_seq, seq);
}

void FileIndex::erase(std::string_view key, EmptiedPacks* emptied) {
  auto it = map_.find(key);
  used_ -= it->second.size;
  if (it->second.pack) packs_.object_died(it->second.pack->seq, it->second.size, emptied);
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void FileIndex::relocate(IndexEntry& e, const std::shared_ptr<PackFile>& pack, std::uint64_t offset,
                         std::uint64_t checksum, EmptiedPacks* emptied) {
  packs_.object_died(e.pack->seq, e.size, emptied);
  e.pack = pack;
  e.offset = offset;
  e.checksum = checksum;
  e.whole_sum = false;
  packs_.object_lives(pack->seq, e.size);
}

void FileIndex::load(const std::string& key, IndexEntry e) {
  e.generation = next_generation_++;
  lru_.emplace_front(key);
  e.lru = lru_.begin();
  used_ += e.size;
  map_.emplace(key, std::move(e));
}

bool FileIndex::try_reserve(std::uint64_t size, std::uint64_t capacity) {
  if (capacity != kUnbounded && (size > capacity || used_ + reserved_ + size > capacity)) return false;
  reserved_ += size;
  return true;
}

std::optional<ObjectMeta> FileIndex::meta(std::string_view key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return ObjectMeta{it->second.size, it->second.checksum, it->second.whole_sum};
}

void FileIndex::list(std::vector<std::pair<std::string, ObjectMeta>>* out) const {
  out->reserve(out->size() + map_.size());
  for (const auto& [key, e] : map_) out->emplace_back(key, ObjectMeta{e.size, e.checksum, e.whole_sum});
}

std::vector<std::string> FileIndex::lru_victims(std::uint64_t bytes) const {
  std::vector<std::string> out;
  std::uint64_t sum = 0;
  for (auto it = lru_.rbegin(); it != lru_.rend() && sum < bytes; ++it) {
    out.push_back(*it);
    sum += map_.find(*it)->second.size;
  }
  return out;
}

void FileIndex::clear() {
  map_.clear();
  lru_.clear();
  packs_.clear();
}

}  // namespace ferry::xfer::store
