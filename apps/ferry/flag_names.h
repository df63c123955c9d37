#pragma once
// The library's errors name option fields ("ServiceOptions::max_batch must be
// at least 1"), since a program embedding Ferry has no flags. The ferry binary
// says them in flag terms: this is the one place that maps a field to the flag
// that sets it, applied to every library error main() prints.

#include <string>
#include <string_view>

namespace ferry::app {

// `message` with each option field (and enum value) that subcommand `role` has
// a flag for replaced by that flag: "ServiceOptions::max_batch must be at least
// 1" becomes "--max-batch must be at least 1". A name is replaced only whole,
// so "ServiceOptions::max_batch_tokens" is not read as "...::max_batch"; names
// with no flag in `role` stay as they are.
std::string in_flag_terms(std::string_view message, std::string_view role);

}  // namespace ferry::app
