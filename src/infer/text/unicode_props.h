#pragma once
// What the reference BERT tokenizer knows about a code point, looked up in
// the generated tables (unicode_tables.h, scripts/gen_unicode_tables.py).
// These cover non-ASCII code points; bert_normalizer.cpp handles ASCII inline.

#include <cstddef>
#include <cstdint>

namespace ferry::infer::text {

// A code point's replacement: a view of one to three code points (lower-case)
// or up to a few (a decomposition); empty when the code point maps to itself.
struct CodePoints {
  const char32_t* data = nullptr;
  std::size_t size = 0;
};

bool is_dropped(char32_t cp) noexcept;               // clean_text removes it
bool is_space(char32_t cp) noexcept;                 // clean_text turns it into ' '
bool is_cjk(char32_t cp) noexcept;                   // handle_chinese_chars spaces it out
bool is_nonspacing_mark(char32_t cp) noexcept;       // strip_accents drops it (after NFD)
bool is_punctuation(char32_t cp) noexcept;           // the pre-tokenizer makes it a word
std::uint8_t combining_class(char32_t cp) noexcept;  // canonical combining class, 0 = starter

// NFD's full canonical decomposition of cp, Hangul syllables included: writes
// it to out (room for kMaxDecomposition) and returns its length, 1 when cp
// does not decompose.
inline constexpr std::size_t kMaxDecomposition = 4;
std::size_t decompose(char32_t cp, char32_t* out) noexcept;

// Rust's char::to_lowercase(cp); empty when cp is its own lower case.
CodePoints lowercase(char32_t cp) noexcept;

}  // namespace ferry::infer::text
