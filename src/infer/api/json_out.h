#pragma once
// The pieces of JSON the response writers append: escaped strings and numbers
// in their shortest exact form. No JSON library: the writers run once per
// response on the serving path and append straight into the reply buffer.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ferry::infer::api {

// Longest text append_json_number(float) writes ("-1.1754944e-38"), plus the comma.
inline constexpr std::size_t kMaxFloatChars = 16;

// Appends s as a JSON string literal, quotes included. '"', '\\' and control
// characters below 0x20 are escaped (\b \f \n \r \t, else \u00XX); other text
// passes through as UTF-8. An ill-formed UTF-8 byte becomes \ufffd, so the
// result is valid JSON whatever s holds.
void append_json_string(std::string& out, std::string_view s);

// Appends v in the shortest form that reads back as the same value
// (std::to_chars). NaN and +-Inf, which JSON cannot carry, are written as 0.
void append_json_number(std::string& out, float v);
void append_json_number(std::string& out, double v);
void append_json_number(std::string& out, std::size_t v);

// Appends [v0,v1,...] with each element as append_json_number(float).
void append_json_floats(std::string& out, std::span<const float> v);

}  // namespace ferry::infer::api
