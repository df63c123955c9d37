#pragma once
// Byte-level codecs the embedding APIs share: the query string's form
// encoding, UTF-8 validation, and base64 of float32 vectors (OpenAI's
// encoding_format "base64").

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ferry::infer::api {

// Length (1..4) of the well-formed UTF-8 sequence that starts s, or 0 where s
// is empty or starts ill-formed. RFC 3629 section 4: no overlong forms, no
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
std::size_t utf8_sequence_length(std::string_view s) noexcept;

// Whether all of s is well-formed UTF-8 (as utf8_sequence_length()).
bool is_valid_utf8(std::string_view s) noexcept;

// Decodes application/x-www-form-urlencoded text, appending to out: "%XX"
// becomes the byte 0xXX (either case), '+' a space, everything else itself.
// Returns false at a '%' not followed by two hex digits; out then holds the
// bytes decoded so far. The result is bytes: check it with is_valid_utf8().
[[nodiscard]] bool form_decode(std::string_view in, std::string& out);

// Characters base64 (RFC 4648, padded) needs for `bytes` bytes.
constexpr std::size_t base64_length(std::size_t bytes) noexcept {
  return (bytes + 2) / 3 * 4;
}

// Appends the padded standard base64 of v as little-endian IEEE-754 float32,
// whatever the host's byte order: the bytes OpenAI's clients decode with
// numpy.frombuffer(..., dtype="float32").
void append_base64_f32(std::string& out, std::span<const float> v);

}  // namespace ferry::infer::api
