// The embedding APIs' request parsers and response writers (src/infer/api/)
// on any bytes a client can send.
//
// Input: one byte choosing the limits (so that 413 is reached with small
// inputs), then the bytes, fed as a GAZSI query string, a TEI /embed,
// /embed_all, /tokenize and /decode body and an OpenAI body. Beside
// ASan/UBSan, it checks:
//  - a refusal has a status and type from TEI's taxonomy (400 Empty, 400/413/
//    422 Validation), and its error_body() is valid JSON;
//  - an accepted request holds 1..max_inputs non-empty, valid UTF-8 inputs of
//    max_input_bytes at most, and for a JSON body they are exactly the strings
//    nlohmann reads from it;
//  - every writer's output, for the request's inputs and vectors made from the
//    input's bytes (NaN and Inf included), is valid JSON; base64 is as long
//    as the vector's bytes need;
//  - a /decode request holds 1..max_inputs sequences (one unless batched) of
//    non-negative ids, max_input_bytes ids at most, exactly those of the body;
//  - append_json_string() makes valid JSON of any bytes, and gives valid
//    UTF-8 back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_check.h"
#include "infer/api/json_out.h"
#include "infer/api/request.h"
#include "infer/api/response.h"
#include "infer/api/text_codec.h"

using namespace ferry::infer::api;
using nlohmann::json;

namespace {

// Floats from the input's bytes: any bit pattern, NaN and Inf included.
std::vector<float> vector_from(std::string_view bytes, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t w = 0x3F800000u + static_cast<std::uint32_t>(i);  // 1.0f and up where bytes run out
    if (bytes.size() >= 4 * (i + 1)) std::memcpy(&w, bytes.data() + 4 * i, 4);
    std::memcpy(&v[i], &w, 4);
  }
  return v;
}

void check_error(const Error& e) {
  const bool known = (e.status == 400 && (e.type == "Empty" || e.type == "Validation")) ||
                     ((e.status == 413 || e.status == 422) && e.type == "Validation");
  FUZZ_CHECK(known);
  FUZZ_CHECK(!e.message.empty());
  FUZZ_CHECK(json::accept(error_body(e)));
}

void check_request(const Request& r, const Limits& limits) {
  FUZZ_CHECK(!r.inputs.empty() && r.inputs.size() <= limits.max_inputs);
  FUZZ_CHECK(r.batch || r.inputs.size() == 1);
  std::size_t bytes = 0;
  for (const std::string& s : r.inputs) {
    FUZZ_CHECK(!s.empty());
    FUZZ_CHECK(is_valid_utf8(s));
    bytes += s.size();
  }
  FUZZ_CHECK(bytes <= limits.max_input_bytes);
  FUZZ_CHECK(!r.dimensions || *r.dimensions > 0);
}

// The strings the body's field holds, as nlohmann reads them.
std::vector<std::string> reference_inputs(std::string_view body, const char* name) {
  const json doc = json::parse(body, nullptr, false);
  FUZZ_CHECK(doc.is_object() && doc.contains(name));
  const json& v = doc[name];
  if (v.is_string()) return {v.get<std::string>()};
  std::vector<std::string> out;
  for (const json& e : v) out.push_back(e.get<std::string>());
  return out;
}

void check_writers(const Request& r, std::string_view bytes) {
  const std::size_t dims = bytes.empty() ? 3 : 1 + static_cast<unsigned char>(bytes[0]) % 24;
  const std::vector<float> v = vector_from(bytes, dims);
  std::vector<Embedded> items;
  for (std::size_t i = 0; i < r.inputs.size(); ++i)
    items.push_back({v, r.inputs[i].size() + 2, i % 2 == 1, 9});

  std::string out;
  write_tei(out, items);
  FUZZ_CHECK(json::accept(out));

  out.clear();
  write_openai(out, items, r.model, r.base64);
  const json j = json::parse(out, nullptr, false);
  FUZZ_CHECK(!j.is_discarded());
  FUZZ_CHECK(j["model"] == r.model);
  FUZZ_CHECK(j["data"].size() == items.size());
  if (r.base64) FUZZ_CHECK(j["data"][0]["embedding"].get<std::string>().size() == base64_length(4 * dims));

  StageTimes st;
  for (std::size_t i = 0; i < st.at_us.size(); ++i) st.at_us[i] = static_cast<double>(v[i % v.size()]);
  out.clear();
  write_gazsi(out, r.inputs[0], items[0], r.full, static_cast<double>(v[0]), r.inputs.size(), st);
  const json g = json::parse(out, nullptr, false);
  FUZZ_CHECK(!g.is_discarded());
  FUZZ_CHECK(g["input"] == r.inputs[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Limits limits;
  if (data[0] & 1) limits = Limits{.max_inputs = 1u + data[0] % 4u, .max_input_bytes = 1u + data[0] % 64u};
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  {
    std::string out;
    append_json_string(out, text);
    const json j = json::parse(out, nullptr, false);
    FUZZ_CHECK(!j.is_discarded());
    if (is_valid_utf8(text)) FUZZ_CHECK(j.get<std::string>() == text);
  }

  const auto gazsi = parse_gazsi_query(text, limits);
  if (const auto* e = std::get_if<Error>(&gazsi)) {
    check_error(*e);
  } else {
    const Request& r = std::get<Request>(gazsi);
    check_request(r, limits);
    FUZZ_CHECK(r.endpoint == Endpoint::Gazsi && !r.batch && r.truncate);
    check_writers(r, text);
  }

  const auto tei = parse_tei_embed(text, limits);
  if (const auto* e = std::get_if<Error>(&tei)) {
    check_error(*e);
  } else {
    const Request& r = std::get<Request>(tei);
    check_request(r, limits);
    FUZZ_CHECK(r.endpoint == Endpoint::TeiEmbed);
    FUZZ_CHECK(r.inputs == reference_inputs(text, "inputs"));
    check_writers(r, text);
  }

  for (const bool tokenize : {false, true}) {
    const auto tei_other = tokenize ? parse_tei_tokenize(text, limits) : parse_tei_embed_all(text, limits);
    if (const auto* e = std::get_if<Error>(&tei_other)) {
      check_error(*e);
    } else {
      const Request& r = std::get<Request>(tei_other);
      check_request(r, limits);
      FUZZ_CHECK(r.endpoint == (tokenize ? Endpoint::TeiTokenize : Endpoint::TeiEmbedAll));
      FUZZ_CHECK(r.inputs == reference_inputs(text, "inputs"));
      // The /tokenize writer on spans of each input (bytes of it, and a special one).
      std::vector<std::vector<TokenSpan>> spans(r.inputs.size());
      for (std::size_t i = 0; i < r.inputs.size(); ++i) {
        spans[i].push_back({101, "[CLS]", true, 0, 0});
        spans[i].push_back({7, std::string_view(r.inputs[i]).substr(0, 1 + r.inputs[i].size() / 2), false, 0, 1});
      }
      std::string out;
      write_tei_tokenize(out, spans);
      FUZZ_CHECK(json::accept(out));
      const std::vector<float> v = vector_from(text, 6);
      std::vector<std::span<const float>> rows(r.inputs.size(), std::span<const float>(v));
      out.clear();
      write_tei_embed_all(out, rows, 3);
      const json j = json::parse(out, nullptr, false);
      FUZZ_CHECK(!j.is_discarded() && j.size() == r.inputs.size() && j[0].size() == 2);
    }
  }

  const auto decode = parse_tei_decode(text, limits);
  if (const auto* e = std::get_if<Error>(&decode)) {
    check_error(*e);
  } else {
    const DecodeRequest& r = std::get<DecodeRequest>(decode);
    FUZZ_CHECK(!r.ids.empty() && r.ids.size() <= limits.max_inputs && (r.batch || r.ids.size() == 1));
    const json doc = json::parse(text, nullptr, false);
    const json& ids = doc["ids"];
    std::size_t total = 0;
    for (std::size_t i = 0; i < r.ids.size(); ++i) {
      const json& row = r.batch ? ids[i] : ids;
      FUZZ_CHECK(!r.ids[i].empty() && row.size() == r.ids[i].size());
      for (std::size_t k = 0; k < r.ids[i].size(); ++k) FUZZ_CHECK(r.ids[i][k] >= 0 && row[k] == r.ids[i][k]);
      total += r.ids[i].size();
    }
    FUZZ_CHECK(total <= limits.max_input_bytes);
    std::string out;
    write_tei_decode(out, std::vector<std::string>{std::string(text)});
    FUZZ_CHECK(json::accept(out));
  }

  {
    std::string out;
    write_openai_models(out, text, static_cast<std::int64_t>(size) - 8, text);
    FUZZ_CHECK(json::accept(out));
  }

  const auto openai = parse_openai(text, limits);
  if (const auto* e = std::get_if<Error>(&openai)) {
    check_error(*e);
  } else {
    const Request& r = std::get<Request>(openai);
    check_request(r, limits);
    FUZZ_CHECK(r.endpoint == Endpoint::OpenAi);
    FUZZ_CHECK(r.inputs == reference_inputs(text, "input"));
    check_writers(r, text);
  }
  return 0;
}
