// The response writers (src/infer/api/response.h), read back with nlohmann-json:
// shapes, exact float round trips, base64, escaping, NaN/Inf.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "infer/api/json_out.h"
#include "infer/api/response.h"

namespace ferry::infer::api {
namespace {

using nlohmann::json;

json parsed(const std::string& text) {
  EXPECT_TRUE(json::accept(text)) << text;
  return json::parse(text, nullptr, false);
}

// Floats across magnitudes, signs, subnormals and the extremes: shortest
// formatting must bring every one back bit for bit.
std::vector<float> awkward_floats(std::size_t n, unsigned seed) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          0.1f,
                          1e-45f,
                          -1.1754944e-38f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::lowest(),
                          std::numeric_limits<float>::min(),
                          0.33333334f,
                          123456789.0f};
  std::mt19937 rng(seed);
  while (v.size() < n) {
    // Random bit patterns: every exponent, every mantissa; skip NaN/Inf.
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isfinite(f)) v.push_back(f);
  }
  v.resize(n);
  return v;
}

std::vector<float> floats_of(const json& a) {
  std::vector<float> v;
  for (const json& x : a) v.push_back(x.get<float>());
  return v;
}

TEST(JsonOut, FloatsRoundTripExactly) {
  const std::vector<float> v = awkward_floats(5000, 1);
  std::string out;
  append_json_floats(out, v);
  const std::vector<float> back = floats_of(parsed(out));
  ASSERT_EQ(back.size(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    // "-0" is written as such, but nlohmann (like Python's json) reads it as
    // the integer 0: zeros compare by value, everything else bit for bit.
    if (v[i] == 0.0f)
      EXPECT_EQ(back[i], 0.0f) << i;
    else
      EXPECT_EQ(std::bit_cast<std::uint32_t>(back[i]), std::bit_cast<std::uint32_t>(v[i]))
          << i << " " << v[i];
  }
}

TEST(JsonOut, ShortestForm) {
  std::string out;
  append_json_floats(out, std::vector<float>{0.1f, 1.0f, -2.5f, 1e-7f, -0.0f});
  EXPECT_EQ(out, "[0.1,1,-2.5,1e-07,-0]");
  out.clear();
  append_json_floats(out, {});
  EXPECT_EQ(out, "[]");
}

TEST(JsonOut, NanAndInfBecomeZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::string out;
  append_json_floats(out, std::vector<float>{nan, inf, -inf, 2.0f});
  EXPECT_EQ(out, "[0,0,0,2]");
  out.clear();
  append_json_number(out, std::numeric_limits<double>::infinity());
  EXPECT_EQ(out, "0");
}

TEST(JsonOut, StringEscaping) {
  const std::string tricky =
      std::string("q\"b\\s/\b\f\n\r\t") + '\0' + "\x01\x1f\x7f" + "\xE2\x82\xAC\xF0\x9F\x9A\x80";
  std::string out;
  append_json_string(out, tricky);
  EXPECT_EQ(out, "\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f\xE2\x82\xAC\xF0\x9F\x9A\x80\"");
  EXPECT_EQ(parsed(out).get<std::string>(), tricky);
  // Every control character and every ASCII byte survives the round trip.
  std::string all;
  for (int c = 0; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  out.clear();
  append_json_string(out, all);
  EXPECT_EQ(parsed(out).get<std::string>(), all);
}

TEST(JsonOut, IllFormedBytesBecomeReplacementCharacters) {
  std::string out;
  append_json_string(out,
                     "a\xFF"
                     "b\xED\xA0\x80"
                     "c\xE2\x82");
  const json j = parsed(out);
  EXPECT_EQ(j.get<std::string>(),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(WriteTei, ArrayOfArrays) {
  const auto a = awkward_floats(384, 2), b = awkward_floats(7, 3);
  const Embedded items[] = {{a, 5, false, 5}, {b, 9, true, 700}};
  std::string out = "HEAD";  // the writer appends
  write_tei(out, items);
  ASSERT_EQ(out.substr(0, 4), "HEAD");
  const json j = parsed(out.substr(4));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(floats_of(j[0]), a);
  EXPECT_EQ(floats_of(j[1]), b);
  out.clear();
  write_tei(out, {});
  EXPECT_EQ(out, "[]");
}

TEST(WriteTeiOther, TokenizeDecodeEmbedAllAndModels) {
  std::vector<std::vector<TokenSpan>> tokens{{{101, "[CLS]", true, 0, 0}, {7, "Caf\xC3\xA9", false, 0, 5}}, {}};
  std::string out;
  write_tei_tokenize(out, tokens);
  EXPECT_EQ(json::parse(out), json::parse(R"([[{"id":101,"text":"[CLS]","special":true,"start":null,"stop":null},
                                               {"id":7,"text":"Café","special":false,"start":0,"stop":5}],[]])"));
  out.clear();
  write_tei_decode(out, std::vector<std::string>{"hello, world!", "\"q\""});
  EXPECT_EQ(json::parse(out), json::parse(R"(["hello, world!","\"q\""])"));
  const std::vector<float> rows{1, 2, 3, 4, 5, 6};
  out.clear();
  write_tei_embed_all(out, std::vector<std::span<const float>>{rows, std::span(rows).first(3)}, 3);
  EXPECT_EQ(json::parse(out), json::parse("[[[1,2,3],[4,5,6]],[[1,2,3]]]"));
  out.clear();
  write_openai_models(out, "all-MiniLM-L6-v2", 1700000000, "ferry");
  EXPECT_EQ(json::parse(out), json::parse(R"({"object":"list","data":[{"id":"all-MiniLM-L6-v2","object":"model",
                                               "created":1700000000,"owned_by":"ferry"}]})"));
}

TEST(WriteOpenAi, FloatArrays) {
  const auto a = awkward_floats(384, 4), b = awkward_floats(384, 5);
  const Embedded items[] = {{a, 5, false, 5}, {b, 12, false, 12}};
  std::string out;
  write_openai(out, items, "all-MiniLM-L6-v2 \"quoted\"", false);
  const json j = parsed(out);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "all-MiniLM-L6-v2 \"quoted\"");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 17);
  EXPECT_EQ(j["usage"]["total_tokens"], 17);
  ASSERT_EQ(j["data"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(j["data"][i]["object"], "embedding");
    EXPECT_EQ(j["data"][i]["index"], i);
  }
  EXPECT_EQ(floats_of(j["data"][0]["embedding"]), a);
  EXPECT_EQ(floats_of(j["data"][1]["embedding"]), b);
}

// Standard padded base64 back to bytes (test-side, from RFC 4648).
std::vector<std::uint8_t> unbase64(const std::string& s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<std::uint8_t> out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    acc = acc << 6 | static_cast<std::uint32_t>(alphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>(acc >> bits));
    }
  }
  return out;
}

TEST(WriteOpenAi, Base64DecodesToTheSameFloats) {
  for (std::size_t n : {1u, 2u, 3u, 384u}) {
    const auto v = awkward_floats(n, static_cast<unsigned>(n));
    const Embedded items[] = {{v, 3, false, 3}};
    std::string out;
    write_openai(out, items, "m", true);
    const json j = parsed(out);
    const std::string b64 = j["data"][0]["embedding"].get<std::string>();
    const std::vector<std::uint8_t> bytes = unbase64(b64);
    ASSERT_EQ(bytes.size(), n * 4);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t w = bytes[4 * i] | bytes[4 * i + 1] << 8 | bytes[4 * i + 2] << 16 |
                              std::uint32_t{bytes[4 * i + 3]} << 24;  // little-endian, as numpy reads it
      EXPECT_EQ(w, std::bit_cast<std::uint32_t>(v[i])) << i;
    }
  }
}

TEST(WriteGazsi, SampleOrFull) {
  const auto v = awkward_floats(384, 6);
  const Embedded e{v, 11, true, 600};
  StageTimes st;
  for (std::size_t i = 0; i < st.at_us.size(); ++i) st.at_us[i] = 1.5 * static_cast<double>(i);
  const std::string text = "he said \"hi\"\\\n\t\x01 \xE2\x82\xAC";

  std::string out;
  write_gazsi(out, text, e, false, 1234.25, 7, st);
  json j = parsed(out);
  EXPECT_EQ(j["input"], text);
  EXPECT_EQ(j["tokens"], 11);
  EXPECT_EQ(j["truncated"], true);
  EXPECT_EQ(floats_of(j["embedding_sample"]), std::vector<float>(v.begin(), v.begin() + 8));
  EXPECT_FALSE(j.contains("embedding"));
  EXPECT_EQ(j["dims"], 384);
  EXPECT_EQ(j["inference_time_us"], 1234.25);
  EXPECT_EQ(j["batch_size"], 7);
  ASSERT_EQ(j["stages_us"].size(), 9u);
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(j["stages_us"][StageTimes::kNames[i]], 1.5 * i);

  out.clear();
  write_gazsi(out, text, e, true, 0.0, 1, st);
  j = parsed(out);
  EXPECT_EQ(floats_of(j["embedding"]), v);
  EXPECT_EQ(j["embedding_sample"].size(), 8u);
}

TEST(WriteGazsi, ShortVectorAndNonFiniteValues) {
  const std::vector<float> v = {std::numeric_limits<float>::quiet_NaN(), 3.0f};
  StageTimes st;
  st.at_us[4] = std::numeric_limits<double>::quiet_NaN();
  std::string out;
  write_gazsi(out, "x", Embedded{v, 3, false, 3}, true, std::numeric_limits<double>::infinity(), 1, st);
  const json j = parsed(out);
  EXPECT_EQ(floats_of(j["embedding_sample"]), (std::vector<float>{0.0f, 3.0f}));
  EXPECT_EQ(j["dims"], 2);
  EXPECT_EQ(j["inference_time_us"], 0);
  EXPECT_EQ(j["stages_us"]["t4_batched"], 0);
}

TEST(ErrorBody, TeiShape) {
  const json j = parsed(error_body(Error{413, "batch size 40 > \"32\"\n", "Validation"}));
  EXPECT_EQ(j, (json{{"error", "batch size 40 > \"32\"\n"}, {"error_type", "Validation"}}));
}

}  // namespace
}  // namespace ferry::infer::api
