#pragma once
// The checks every parser applies to the inputs it decoded, so that the three
// APIs refuse the same request with the same status and error_type.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "infer/api/request.h"

namespace ferry::infer::api {

inline Error validation_error(std::uint16_t status, std::string message) {
  return Error{status, std::move(message), "Validation"};
}

// 413 where `count` inputs exceed limits.max_inputs.
std::optional<Error> check_input_count(std::size_t count, const Limits& limits);

// 400 Empty for no inputs or an empty one (naming `what`), 413 for too many,
// or where all inputs together exceed limits.max_input_bytes. UTF-8 is each
// parser's check, as the APIs answer it with different statuses.
std::optional<Error> check_inputs(const Request& r, std::string_view what, const Limits& limits);

}  // namespace ferry::infer::api
