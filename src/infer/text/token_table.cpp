#include "infer/text/token_table.h"

#include <utility>

#include "ferry/core/status.h"

namespace ferry::infer::text {

namespace {
std::size_t slots_for(std::size_t expected) {
  std::size_t n = 16;
  while (n < 2 * expected) n *= 2;
  return n;
}
}  // namespace

TokenTable::TokenTable(std::size_t expected) : slots_(slots_for(expected)), mask_(slots_.size() - 1) {}

void TokenTable::insert(std::string_view token, std::int32_t id) {
  if (keys_.size() + token.size() > UINT32_MAX) throw Error("vocabulary too large: its tokens exceed 4 GiB");
  if (2 * (count_ + 1) > slots_.size()) grow();
  const std::uint64_t h = token_hash(token);
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s = {static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(token.size()),
           static_cast<std::uint32_t>(h), id};
      keys_.append(token);
      ++count_;
      return;
    }
    if (s.hash == static_cast<std::uint32_t>(h) && key(s) == token) {
      s.id = id;
      return;
    }
  }
}

std::int32_t TokenTable::find(std::string_view token) const noexcept {
  const std::uint64_t h = token_hash(token);
  // Terminates: the load factor stays <= 1/2, so an empty slot exists.
  for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.hash == static_cast<std::uint32_t>(h) && key(s) == token) return s.id;
  }
}

void TokenTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    for (std::size_t i = token_hash(key(s)) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].id < 0) {
        slots_[i] = s;
        break;
      }
    }
  }
}

}  // namespace ferry::infer::text
