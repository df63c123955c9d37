#pragma once
// Reading the built-in tier kinds' specs (tier_registry.h): each kind parses
// its own spec in its folder, with these pieces. Every error throws
// ferry::Error as "tier '<spec>': <what is wrong> (form: <usage>)".

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::xfer::store {

class SpecReader {
 public:
  SpecReader(std::string_view spec, std::string_view usage) : spec_(spec), usage_(usage) {}

  std::string_view spec() const noexcept { return spec_; }

  [[noreturn]] void fail(const std::string& why) const;

  // A whole number in lo..hi, named `what` in the error.
  long whole_number(std::string_view text, std::string_view what, long lo, long hi) const;
  // A byte size (sizes.h); more than 0 unless zero_ok.
  std::uint64_t size(std::string_view text, std::string_view what, bool zero_ok = false) const;
  // yes/on/1/true or no/off/0/false.
  bool yes_no(std::string_view name, std::string_view value) const;

 private:
  std::string_view spec_;
  std::string_view usage_;
};

// "a,b,,c" -> {"a", "b", "", "c"}.
std::vector<std::string_view> split(std::string_view s, char sep);

}  // namespace ferry::xfer::store
