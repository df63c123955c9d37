// The three request parsers (src/infer/api/request.h): every refusal with its
// status and error_type, and what a good request decodes to.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "infer/api/request.h"

namespace ferry::infer::api {
namespace {

const Limits kLimits{};

// The request, failing the test where the parser refused it.
Request ok(const std::variant<Request, Error>& v) {
  if (const auto* e = std::get_if<Error>(&v)) {
    ADD_FAILURE() << "refused: " << e->status << " " << e->type << ": " << e->message;
    return Request{};
  }
  return std::get<Request>(v);
}

// Checks the parser refused with this status and type, and a message holding `says`.
void refused(const std::variant<Request, Error>& v, int status, std::string_view type,
             std::string_view says = "") {
  const auto* e = std::get_if<Error>(&v);
  ASSERT_NE(e, nullptr) << "accepted, expected " << status << " " << type;
  EXPECT_EQ(e->status, status) << e->message;
  EXPECT_EQ(e->type, type) << e->message;
  EXPECT_NE(e->message.find(says), std::string::npos) << "message: " << e->message << "\nexpected: " << says;
}

// ---- GAZSI ----------------------------------------------------------------

TEST(Gazsi, DecodesTheText) {
  const Request r = ok(parse_gazsi_query("d=hello+world", kLimits));
  EXPECT_EQ(r.endpoint, Endpoint::Gazsi);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0], "hello world");
  EXPECT_FALSE(r.batch);
  EXPECT_FALSE(r.full);
  EXPECT_TRUE(r.truncate);
  EXPECT_TRUE(r.normalize);
  EXPECT_FALSE(r.dimensions);
}

TEST(Gazsi, PercentEscapes) {
  EXPECT_EQ(ok(parse_gazsi_query("d=%41", kLimits)).inputs[0], "A");
  EXPECT_EQ(ok(parse_gazsi_query("d=1%2B1", kLimits)).inputs[0], "1+1");
  EXPECT_EQ(ok(parse_gazsi_query("d=%E2%82%AC5", kLimits)).inputs[0],
            "\xE2\x82\xAC"
            "5");
  EXPECT_EQ(ok(parse_gazsi_query("%64=x", kLimits)).inputs[0], "x");  // the key decodes too
  EXPECT_EQ(ok(parse_gazsi_query("d=a%3Db%26c", kLimits)).inputs[0], "a=b&c");
}

TEST(Gazsi, FullAndOtherParameters) {
  EXPECT_TRUE(ok(parse_gazsi_query("d=x&full=1", kLimits)).full);
  EXPECT_TRUE(ok(parse_gazsi_query("full=true&d=x", kLimits)).full);
  EXPECT_FALSE(ok(parse_gazsi_query("d=x&full=0", kLimits)).full);
  EXPECT_FALSE(ok(parse_gazsi_query("d=x&full=false", kLimits)).full);
  EXPECT_EQ(ok(parse_gazsi_query("&&lang=en&d=x&flag&", kLimits)).inputs[0], "x");  // unknown ones ignored
  refused(parse_gazsi_query("d=x&full=yes", kLimits), 400, "Validation", "full");
  refused(parse_gazsi_query("d=x&full", kLimits), 400, "Validation", "full");
}

TEST(Gazsi, Refusals) {
  refused(parse_gazsi_query("", kLimits), 400, "Validation", "missing parameter d");
  refused(parse_gazsi_query("text=x", kLimits), 400, "Validation", "missing parameter d");
  refused(parse_gazsi_query("d=a&d=b", kLimits), 400, "Validation", "more than once");
  refused(parse_gazsi_query("d=", kLimits), 400, "Empty", "empty");
  refused(parse_gazsi_query("d", kLimits), 400, "Empty", "empty");
  refused(parse_gazsi_query("d=%G1", kLimits), 400, "Validation", "percent-encoding");
  refused(parse_gazsi_query("d=ab%4", kLimits), 400, "Validation", "percent-encoding");
  refused(parse_gazsi_query("d=ok&x=%zz", kLimits), 400, "Validation",
          "percent-encoding");  // even unknown ones
  refused(parse_gazsi_query("d=%C0%80", kLimits), 400, "Validation", "input is not valid UTF-8");
  refused(parse_gazsi_query("d=%ED%A0%80", kLimits), 400, "Validation", "input is not valid UTF-8");
  refused(parse_gazsi_query("d=\xFF", kLimits), 400, "Validation", "input is not valid UTF-8");
}

TEST(Gazsi, ByteLimit) {
  const Limits small{.max_inputs = 4, .max_input_bytes = 5};
  EXPECT_EQ(ok(parse_gazsi_query("d=%41bcde", small)).inputs[0], "Abcde");  // 5 decoded bytes, 7 encoded
  refused(parse_gazsi_query("d=abcdef", small), 413, "Validation", "limit of 5");
}

// ---- TEI /embed -----------------------------------------------------------

TEST(Tei, StringAndArray) {
  const Request one = ok(parse_tei_embed(R"({"inputs":"What is Deep Learning?"})", kLimits));
  EXPECT_EQ(one.endpoint, Endpoint::TeiEmbed);
  EXPECT_EQ(one.inputs, std::vector<std::string>{"What is Deep Learning?"});
  EXPECT_FALSE(one.batch);
  EXPECT_TRUE(one.normalize);
  EXPECT_FALSE(one.truncate);  // TEI's default
  const Request many = ok(parse_tei_embed(R"({"inputs":["a","b c"]})", kLimits));
  EXPECT_EQ(many.inputs, (std::vector<std::string>{"a", "b c"}));
  EXPECT_TRUE(many.batch);
  const Request single = ok(parse_tei_embed(R"({"inputs":["a"]})", kLimits));
  EXPECT_TRUE(single.batch);  // an array of one is still a batch: the answer is [[...]] either way
}

TEST(Tei, Options) {
  const Request r = ok(parse_tei_embed(
      R"({"prompt_name":null,"inputs":"x","normalize":false,"truncate":true,"truncation_direction":"Right",
          "dimensions":128,"unknown":{"deep":[1,2]}})",
      kLimits));
  EXPECT_FALSE(r.normalize);
  EXPECT_TRUE(r.truncate);
  EXPECT_EQ(r.dimensions, 128u);
  const Request nulls = ok(parse_tei_embed(R"({"inputs":"x","normalize":null,"dimensions":null})", kLimits));
  EXPECT_TRUE(nulls.normalize);
  EXPECT_FALSE(nulls.dimensions);
}

TEST(Tei, Refusals) {
  refused(parse_tei_embed(R"({"inputs":"x","truncation_direction":"Left"})", kLimits), 422, "Validation",
          "Left is not supported");
  refused(parse_tei_embed(R"({"inputs":"x","truncation_direction":"Up"})", kLimits), 422, "Validation",
          "truncation_direction");
  refused(parse_tei_embed(R"({"inputs":"x","normalize":"yes"})", kLimits), 422, "Validation", "`normalize`");
  refused(parse_tei_embed(R"({"inputs":"x","truncate":1})", kLimits), 422, "Validation", "`truncate`");
  refused(parse_tei_embed(R"({"inputs":"x","dimensions":0})", kLimits), 422, "Validation", "dimensions");
  refused(parse_tei_embed(R"({"inputs":"x","dimensions":-3})", kLimits), 422, "Validation", "dimensions");
  refused(parse_tei_embed(R"({"inputs":"x","dimensions":12.5})", kLimits), 422, "Validation", "dimensions");
  refused(parse_tei_embed(R"({"inputs":"x","dimensions":"64"})", kLimits), 422, "Validation", "dimensions");
  refused(parse_tei_embed(R"({"input":"x"})", kLimits), 422, "Validation", "missing field `inputs`");
  refused(parse_tei_embed(R"({"inputs":null})", kLimits), 422, "Validation", "missing field `inputs`");
  refused(parse_tei_embed(R"({"inputs":5})", kLimits), 422, "Validation", "string or an array of strings");
  refused(parse_tei_embed(R"({"inputs":["a",5]})", kLimits), 422, "Validation",
          "string or an array of strings");
  refused(parse_tei_embed(R"({"inputs":{"a":"b"}})", kLimits), 422, "Validation", "string or an array");
  refused(parse_tei_embed(R"({"inputs":[1,2,3]})", kLimits), 422, "Validation", "token id inputs");
  refused(parse_tei_embed(R"(["x"])", kLimits), 422, "Validation", "JSON object");
  refused(parse_tei_embed(R"({"inputs":"x")", kLimits), 422, "Validation", "not valid JSON");
  refused(parse_tei_embed("", kLimits), 422, "Validation", "not valid JSON");
  refused(parse_tei_embed(R"({"inputs":""})", kLimits), 400, "Empty", "cannot be empty");
  refused(parse_tei_embed(R"({"inputs":[]})", kLimits), 400, "Empty", "cannot be empty");
  refused(parse_tei_embed(R"({"inputs":["a",""]})", kLimits), 400, "Empty", "element 1");
}

TEST(Tei, JsonEscapesAndSurrogatePairs) {
  const Request r =
      ok(parse_tei_embed(R"({"inputs":["\ud83d\ude80","a\"b\\c\n\u00e9\u20ac","\/"]})", kLimits));
  EXPECT_EQ(r.inputs[0], "\xF0\x9F\x9A\x80");  // U+1F680 from its surrogate pair
  EXPECT_EQ(r.inputs[1], "a\"b\\c\n\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(r.inputs[2], "/");
  EXPECT_EQ(ok(parse_tei_embed("{\"inputs\":\"\xE2\x82\xAC raw\"}", kLimits)).inputs[0], "\xE2\x82\xAC raw");
}

TEST(Tei, LoneSurrogatesAndInvalidUtf8) {
  refused(parse_tei_embed(R"({"inputs":"\ud83d"})", kLimits), 422, "Validation", "surrogate");
  refused(parse_tei_embed(R"({"inputs":"\ude80x"})", kLimits), 422, "Validation", "surrogate");
  refused(parse_tei_embed(R"({"inputs":"\ud83d\u0041"})", kLimits), 422, "Validation", "surrogate");
  refused(parse_tei_embed("{\"inputs\":\"\xFF\"}", kLimits), 422, "Validation", "not valid UTF-8");
  refused(parse_tei_embed("{\"inputs\":\"\xC0\x80\"}", kLimits), 422, "Validation", "not valid UTF-8");
  refused(parse_tei_embed("{\"inputs\":\"\xED\xA0\x80\"}", kLimits), 422, "Validation", "not valid UTF-8");
  // Invalid bytes in a field nobody reads still make the body invalid.
  refused(parse_tei_embed("{\"inputs\":\"x\",\"other\":\"\xE2\x82\"}", kLimits), 422, "Validation", "UTF-8");
}

TEST(Tei, Limits) {
  const Limits small{.max_inputs = 2, .max_input_bytes = 6};
  EXPECT_EQ(ok(parse_tei_embed(R"({"inputs":["abc","def"]})", small)).inputs.size(), 2u);
  refused(parse_tei_embed(R"({"inputs":["a","b","c"]})", small), 413, "Validation",
          "batch size 3 > maximum allowed batch size 2");
  refused(parse_tei_embed(R"({"inputs":["abc","defg"]})", small), 413, "Validation", "7 bytes");
  refused(parse_tei_embed(R"({"inputs":"abcdefg"})", small), 413, "Validation", "limit of 6");
  // The limit counts decoded bytes: "\u00e9" is 6 characters of JSON, 2 bytes of text.
  EXPECT_EQ(ok(parse_tei_embed(R"({"inputs":"\u00e9\u00e9\u00e9"})", small)).inputs[0].size(), 6u);
}

// ---- OpenAI /v1/embeddings ------------------------------------------------

// ---- TEI /embed_all, /tokenize, /decode -------------------------------------

TEST(TeiOther, EmbedAllAndTokenize) {
  const Request all = ok(parse_tei_embed_all(R"({"inputs":["a","b"],"truncate":true,"prompt_name":null})", kLimits));
  EXPECT_EQ(all.endpoint, Endpoint::TeiEmbedAll);
  EXPECT_EQ(all.inputs, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(all.truncate);
  EXPECT_FALSE(all.normalize);
  EXPECT_FALSE(ok(parse_tei_embed_all(R"({"inputs":"a"})", kLimits)).truncate);  // TEI's default
  refused(parse_tei_embed_all(R"({"inputs":"a","truncation_direction":"Left"})", kLimits), 422, "Validation");

  const Request tok = ok(parse_tei_tokenize(R"({"inputs":"Hello"})", kLimits));
  EXPECT_EQ(tok.endpoint, Endpoint::TeiTokenize);
  EXPECT_TRUE(tok.add_special_tokens);
  EXPECT_FALSE(ok(parse_tei_tokenize(R"({"inputs":["a"],"add_special_tokens":false})", kLimits)).add_special_tokens);
  refused(parse_tei_tokenize(R"({"inputs":"a","add_special_tokens":"no"})", kLimits), 422, "Validation",
          "add_special_tokens");
  refused(parse_tei_tokenize(R"({"inputs":[]})", kLimits), 400, "Empty");
  refused(parse_tei_tokenize(R"({"inputs":""})", kLimits), 400, "Empty");
  refused(parse_tei_tokenize(R"([1])", kLimits), 422, "Validation");
  refused(parse_tei_tokenize(R"({"inputs":["a","b","c"]})", Limits{2, 100}), 413, "Validation");
}

TEST(TeiOther, Decode) {
  auto decoded = [](std::string_view body, const Limits& limits = kLimits) {
    const auto v = parse_tei_decode(body, limits);
    if (const auto* e = std::get_if<Error>(&v)) {
      ADD_FAILURE() << "refused: " << e->status << " " << e->message;
      return DecodeRequest{};
    }
    return std::get<DecodeRequest>(v);
  };
  const DecodeRequest one = decoded(R"({"ids":[101,7592,102]})");
  EXPECT_FALSE(one.batch);
  EXPECT_TRUE(one.skip_special_tokens);
  EXPECT_EQ(one.ids, (std::vector<std::vector<std::int32_t>>{{101, 7592, 102}}));
  const DecodeRequest two = decoded(R"({"ids":[[1],[2,3]],"skip_special_tokens":false})");
  EXPECT_TRUE(two.batch);
  EXPECT_FALSE(two.skip_special_tokens);
  EXPECT_EQ(two.ids.size(), 2u);
  const auto refused_decode = [](std::string_view body, int status, std::string_view type, const Limits& l = kLimits) {
    const auto v = parse_tei_decode(body, l);
    const auto* e = std::get_if<Error>(&v);
    ASSERT_NE(e, nullptr) << body;
    EXPECT_EQ(e->status, status) << body << ": " << e->message;
    EXPECT_EQ(e->type, type) << body;
  };
  refused_decode(R"({"ids":[]})", 400, "Empty");
  refused_decode(R"({"ids":[[1],[]]})", 400, "Empty");
  refused_decode(R"({"ids":[-1]})", 422, "Validation");
  refused_decode(R"({"ids":[1.5]})", 422, "Validation");
  refused_decode(R"({"ids":[2147483648]})", 422, "Validation");
  refused_decode(R"({"ids":["a"]})", 422, "Validation");
  refused_decode(R"({"ids":[[1],2]})", 422, "Validation");
  refused_decode(R"({"ids":"1 2"})", 422, "Validation");
  refused_decode(R"({"id":[1]})", 422, "Validation");
  refused_decode(R"({"ids":[1],"skip_special_tokens":1})", 422, "Validation");
  refused_decode(R"({"ids":[[1],[2],[3]]})", 413, "Validation", Limits{2, 100});
  refused_decode(R"({"ids":[1,2,3,4]})", 413, "Validation", Limits{2, 3});
}

TEST(OpenAi, StringArrayAndOptions) {
  const Request r = ok(parse_openai(R"({"input":"hello","model":"text-embedding-3-small"})", kLimits));
  EXPECT_EQ(r.endpoint, Endpoint::OpenAi);
  EXPECT_EQ(r.inputs, std::vector<std::string>{"hello"});
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(r.model, "text-embedding-3-small");
  EXPECT_FALSE(r.base64);
  EXPECT_TRUE(r.truncate);
  EXPECT_TRUE(r.normalize);

  const Request b = ok(parse_openai(
      R"({"input":["a","b"],"model":"m","encoding_format":"base64","dimensions":64,"user":"u-1"})", kLimits));
  EXPECT_TRUE(b.batch);
  EXPECT_TRUE(b.base64);
  EXPECT_EQ(b.dimensions, 64u);
  EXPECT_FALSE(ok(parse_openai(R"({"input":"x","encoding_format":"float"})", kLimits)).base64);
  EXPECT_EQ(ok(parse_openai(R"({"input":"x"})", kLimits)).model, "");  // the service names it
}

TEST(OpenAi, Refusals) {
  refused(parse_openai(R"({"input":[1,2,3],"model":"m"})", kLimits), 422, "Validation",
          "token id inputs are not supported");
  refused(parse_openai(R"({"input":[[1,2],[3]],"model":"m"})", kLimits), 422, "Validation",
          "token id inputs are not supported");
  refused(parse_openai(R"({"input":[["a"]]})", kLimits), 422, "Validation", "string or an array of strings");
  refused(parse_openai(R"({"input":"x","encoding_format":"int8"})", kLimits), 422, "Validation",
          "encoding_format");
  refused(parse_openai(R"({"input":"x","encoding_format":1})", kLimits), 422, "Validation",
          "encoding_format");
  refused(parse_openai(R"({"input":"x","model":7})", kLimits), 422, "Validation", "`model`");
  refused(parse_openai(R"({"input":"x","dimensions":0})", kLimits), 422, "Validation", "dimensions");
  refused(parse_openai(R"({"inputs":"x"})", kLimits), 422, "Validation", "missing field `input`");
  refused(parse_openai(R"({"input":[]})", kLimits), 400, "Empty");
  refused(parse_openai(R"({"input":""})", kLimits), 400, "Empty");
  refused(parse_openai(R"({"input":"\udfff"})", kLimits), 422, "Validation", "surrogate");
  refused(parse_openai("{\"input\":\"\xF5\x80\x80\x80\"}", kLimits), 422, "Validation", "UTF-8");
  refused(parse_openai("42", kLimits), 422, "Validation", "JSON object");
  const Limits one{.max_inputs = 1, .max_input_bytes = 100};
  refused(parse_openai(R"({"input":["a","b"]})", one), 413, "Validation", "batch size 2");
}

}  // namespace
}  // namespace ferry::infer::api
