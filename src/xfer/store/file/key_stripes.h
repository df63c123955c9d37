#pragma once
// Per-key locks of the file tier, striped: publishing a version (rename and
// index update) and removing one hold the key's stripe, so that the file on
// disk and the index (file_index.h) agree for every key. Taken before the
// index's mutex, never after it.

#include <array>
#include <mutex>
#include <string_view>

#include "xfer/store/key_map.h"

namespace ferry::xfer::store {

class KeyStripes {
 public:
  std::mutex& of(std::string_view key) { return stripes_[KeyHash{}(key) % stripes_.size()]; }

 private:
  std::array<std::mutex, 64> stripes_;
};

}  // namespace ferry::xfer::store
