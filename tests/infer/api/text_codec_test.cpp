// Form decoding, UTF-8 validation, base64 of float32 (src/infer/api/text_codec.h).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "infer/api/text_codec.h"

namespace ferry::infer::api {
namespace {

std::string decoded(std::string_view in) {
  std::string out;
  EXPECT_TRUE(form_decode(in, out)) << in;
  return out;
}

bool decodes(std::string_view in) {
  std::string out;
  return form_decode(in, out);
}

TEST(FormDecode, EscapesPlusAndPlainBytes) {
  EXPECT_EQ(decoded("%41"), "A");
  EXPECT_EQ(decoded("%4a%4A"), "JJ");
  EXPECT_EQ(decoded("hello+world"), "hello world");
  EXPECT_EQ(decoded("1%2B1"), "1+1");               // an encoded '+' stays a plus
  EXPECT_EQ(decoded("%E2%82%AC"), "\xE2\x82\xAC");  // U+20AC, three bytes
  EXPECT_EQ(decoded("%00"), std::string(1, '\0'));
  EXPECT_EQ(decoded(""), "");
  EXPECT_EQ(decoded("a=b"), "a=b");
}

TEST(FormDecode, RefusesBadEscapes) {
  EXPECT_FALSE(decodes("%G1"));
  EXPECT_FALSE(decodes("%1G"));
  EXPECT_FALSE(decodes("%zz"));
  EXPECT_FALSE(decodes("%4"));  // truncated at the end
  EXPECT_FALSE(decodes("%"));
  EXPECT_FALSE(decodes("abc%"));
  EXPECT_FALSE(decodes("%%41"));
}

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ASCII, longer than eight bytes"));
  EXPECT_TRUE(is_valid_utf8("\xC2\x80"));          // U+0080, smallest two-byte
  EXPECT_TRUE(is_valid_utf8("\xDF\xBF"));          // U+07FF
  EXPECT_TRUE(is_valid_utf8("\xE0\xA0\x80"));      // U+0800, smallest three-byte
  EXPECT_TRUE(is_valid_utf8("\xED\x9F\xBF"));      // U+D7FF, just below the surrogates
  EXPECT_TRUE(is_valid_utf8("\xEE\x80\x80"));      // U+E000, just above
  EXPECT_TRUE(is_valid_utf8("\xEF\xBF\xBF"));      // U+FFFF
  EXPECT_TRUE(is_valid_utf8("\xF0\x90\x80\x80"));  // U+10000
  EXPECT_TRUE(is_valid_utf8("\xF0\x9F\x9A\x80"));  // U+1F680
  EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF, the last code point
  EXPECT_TRUE(
      is_valid_utf8("abcdefgh\xE2\x82\xAC"
                    "abcdefghij"));
}

TEST(Utf8, RefusesIllFormedText) {
  EXPECT_FALSE(is_valid_utf8("\x80"));              // a lone continuation byte
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong NUL
  EXPECT_FALSE(is_valid_utf8("\xC1\xBF"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xE0\x9F\xBF"));      // overlong three-byte
  EXPECT_FALSE(is_valid_utf8("\xF0\x8F\xBF\xBF"));  // overlong four-byte
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // U+D800, a surrogate
  EXPECT_FALSE(is_valid_utf8("\xED\xBF\xBF"));      // U+DFFF
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(is_valid_utf8("\xF5\x80\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(is_valid_utf8("abcdefgh\xE2\x82"));  // truncated after the ASCII fast path
  EXPECT_FALSE(is_valid_utf8("\xE2\x28\xA1"));      // bad continuation
  EXPECT_EQ(utf8_sequence_length("\xF0\x9F\x9A\x80z"), 4u);
  EXPECT_EQ(utf8_sequence_length(""), 0u);
}

// Decodes padded standard base64 (a test-side decoder, written from RFC 4648).
std::vector<std::uint8_t> base64_decode(std::string_view s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<std::uint8_t> out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const auto v = alphabet.find(c);
    EXPECT_NE(v, std::string::npos) << "not base64: " << c;
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>(acc >> bits));
    }
  }
  return out;
}

std::vector<float> floats_from_le(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> v;
  for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    const std::uint32_t w =
        bytes[i] | bytes[i + 1] << 8 | bytes[i + 2] << 16 | std::uint32_t{bytes[i + 3]} << 24;
    v.push_back(std::bit_cast<float>(w));
  }
  return v;
}

TEST(Base64, KnownBytes) {
  std::string out;
  append_base64_f32(out, std::vector<float>{1.0f});  // 00 00 80 3F
  EXPECT_EQ(out, "AACAPw==");
  out.clear();
  append_base64_f32(out, std::vector<float>{1.0f, -2.0f, 0.5f});  // 12 bytes: no padding
  EXPECT_EQ(out, "AACAPwAAAMAAAAA/");
  out = "prefix:";
  append_base64_f32(out, {});
  EXPECT_EQ(out, "prefix:");
}

TEST(Base64, RoundTripsEveryLength) {
  for (std::size_t n = 0; n < 10; ++n) {
    std::vector<float> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<float>(i) * -0.37f + 1e-30f * i);
    std::string out;
    append_base64_f32(out, v);
    EXPECT_EQ(out.size(), base64_length(n * 4));
    EXPECT_EQ(floats_from_le(base64_decode(out)), v) << n;
  }
}

}  // namespace
}  // namespace ferry::infer::api
