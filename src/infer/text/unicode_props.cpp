#include "infer/text/unicode_props.h"

#include <algorithm>
#include <iterator>

#include "infer/text/unicode_tables.h"

namespace ferry::infer::text {
namespace {

using tables::ClassRange;
using tables::Mapping;
using tables::Range;

template <std::size_t N>
bool in_ranges(const Range (&table)[N], char32_t cp) noexcept {
  // The first range whose last is >= cp is the only one that can hold it.
  const Range* it = std::lower_bound(std::begin(table), std::end(table), cp,
                                     [](const Range& r, char32_t c) { return r.last < c; });
  return it != std::end(table) && it->first <= cp;
}

template <std::size_t N>
const Mapping* find_mapping(const Mapping (&table)[N], char32_t cp) noexcept {
  const Mapping* it = std::lower_bound(std::begin(table), std::end(table), cp,
                                       [](const Mapping& m, char32_t c) { return m.cp < c; });
  return it != std::end(table) && it->cp == cp ? it : nullptr;
}

template <std::size_t N>
constexpr bool lengths_at_most(const Mapping (&table)[N], std::size_t limit) {
  for (const Mapping& m : table) {
    if (m.length > limit) return false;
  }
  return true;
}
static_assert(lengths_at_most(tables::kDecompositions, kMaxDecomposition),
              "a decomposition outgrows kMaxDecomposition: raise it");

// The Hangul syllable block and its algorithmic decomposition (Unicode 3.12),
// which the tables leave out.
constexpr char32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3;
constexpr char32_t kLeadBase = 0x1100, kVowelBase = 0x1161, kTrailBase = 0x11A7;
constexpr char32_t kVowels = 21, kTrails = 28;

}  // namespace

bool is_dropped(char32_t cp) noexcept {
  return in_ranges(tables::kDropped, cp);
}
bool is_space(char32_t cp) noexcept {
  return in_ranges(tables::kSpaces, cp);
}
bool is_cjk(char32_t cp) noexcept {
  return in_ranges(tables::kCjk, cp);
}
bool is_nonspacing_mark(char32_t cp) noexcept {
  return in_ranges(tables::kNonspacingMarks, cp);
}
bool is_punctuation(char32_t cp) noexcept {
  return in_ranges(tables::kPunctuation, cp);
}

std::uint8_t combining_class(char32_t cp) noexcept {
  const auto& table = tables::kCombiningClasses;
  const ClassRange* it = std::lower_bound(std::begin(table), std::end(table), cp,
                                          [](const ClassRange& r, char32_t c) { return r.last < c; });
  return it != std::end(table) && it->first <= cp ? it->value : 0;
}

std::size_t decompose(char32_t cp, char32_t* out) noexcept {
  if (cp >= kHangulFirst && cp <= kHangulLast) {
    const char32_t s = cp - kHangulFirst;
    out[0] = kLeadBase + s / (kVowels * kTrails);
    out[1] = kVowelBase + (s % (kVowels * kTrails)) / kTrails;
    const char32_t trail = s % kTrails;
    if (trail == 0) return 2;
    out[2] = kTrailBase + trail;
    return 3;
  }
  const Mapping* m = find_mapping(tables::kDecompositions, cp);
  if (m == nullptr) {
    out[0] = cp;
    return 1;
  }
  std::copy_n(tables::kDecompositionsData + m->offset, m->length, out);
  return m->length;
}

CodePoints lowercase(char32_t cp) noexcept {
  const Mapping* m = find_mapping(tables::kLowercase, cp);
  if (m == nullptr) return {};
  return {tables::kLowercaseData + m->offset, m->length};
}

}  // namespace ferry::infer::text
