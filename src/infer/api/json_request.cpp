// TEI's /embed and OpenAI's /v1/embeddings bodies, through nlohmann-json.
#include <exception>
#include <nlohmann/json.hpp>

#include "infer/api/request.h"
#include "infer/api/request_checks.h"
#include "infer/api/text_codec.h"

namespace ferry::infer::api {

namespace {

using nlohmann::json;

Error unprocessable(std::string message) {
  return validation_error(422, std::move(message));
}

// The body as a JSON object, or the 422 that refuses it.
std::variant<json, Error> parse_object(std::string_view body) {
  // nlohmann checks raw bytes too, but says so in a parser's terms; this
  // message tells the client what to fix.
  if (!is_valid_utf8(body)) return unprocessable("body is not valid UTF-8");
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Parse again for the reason (line, column, "lone surrogate"...): only
    // refused bodies pay for it, and the happy path throws nothing.
    std::string why = "syntax error";
    try {
      [[maybe_unused]] const json again = json::parse(body);
    } catch (const json::parse_error& e) {
      why = e.what();
      // Drop nlohmann's "[json.exception.parse_error.101] " tag.
      if (const std::size_t tag = why.find("] "); why.starts_with("[json.") && tag != std::string::npos)
        why.erase(0, tag + 2);
    }
    return unprocessable("body is not valid JSON: " + why);
  }
  if (!doc.is_object()) return unprocessable("body must be a JSON object");
  return doc;
}

// The field, or nullptr where it is absent or null (both mean "the default").
const json* field(const json& doc, const char* name) {
  const auto it = doc.find(name);
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

std::optional<Error> read_bool(const json& doc, const char* name, bool& out) {
  const json* v = field(doc, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return unprocessable(std::string("`") + name + "` must be a boolean");
  out = v->get<bool>();
  return std::nullopt;
}

std::optional<Error> read_dimensions(const json& doc, Request& r) {
  const json* v = field(doc, "dimensions");
  if (!v) return std::nullopt;
  // is_number_unsigned() is true only for integers >= 0 without a fraction.
  if (!v->is_number_unsigned() || v->get<std::uint64_t>() == 0)
    return unprocessable("`dimensions` must be a positive integer");
  r.dimensions = static_cast<std::size_t>(v->get<std::uint64_t>());
  return std::nullopt;
}

std::optional<Error> read_truncation_direction(const json& doc) {
  if (const json* dir = field(doc, "truncation_direction")) {
    // TEI spells it "Right"/"Left"; the lowercase forms are accepted too.
    const bool right = *dir == "Right" || *dir == "right";
    const bool left = *dir == "Left" || *dir == "left";
    if (left) return unprocessable("`truncation_direction` Left is not supported: only Right");
    if (!right) return unprocessable("`truncation_direction` must be \"Right\"");
  }
  return std::nullopt;
}

// A token id sequence: an array of integers (OpenAI's [int] or one row of [[int]]).
bool is_token_ids(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& e : v)
    if (!e.is_number_integer()) return false;
  return true;
}

// Fills r.inputs and r.batch from a string or an array of strings, then
// applies the shared checks (empty, count, bytes).
std::optional<Error> read_inputs(const json& doc, const char* name, const Limits& limits, Request& r) {
  const std::string what = std::string("`") + name + "`";
  const json* v = field(doc, name);
  if (!v) return unprocessable("missing field " + what);
  const std::string shape = what + " must be a string or an array of strings";
  if (v->is_string()) {
    r.inputs.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    r.batch = true;
    // Before any copy: a huge array is refused for its size alone.
    if (auto e = check_input_count(v->size(), limits)) return e;
    if (is_token_ids(*v) || (!v->empty() && (*v)[0].is_array() && is_token_ids((*v)[0])))
      return unprocessable("token id inputs are not supported: send text (" + shape + ")");
    r.inputs.reserve(v->size());
    for (const json& e : *v) {
      if (!e.is_string()) return unprocessable(shape);
      r.inputs.push_back(e.get<std::string>());
    }
  } else {
    return unprocessable(shape);
  }
  return check_inputs(r, what, limits);
}

// Runs the endpoint's field reader and turns anything nlohmann throws on the
// way (only std::bad_alloc is expected) into an answer instead of a crash.
template <typename ReadFields>
std::variant<Request, Error> parse_body(std::string_view body, Endpoint endpoint, ReadFields read_fields) {
  try {
    auto parsed = parse_object(body);
    if (auto* e = std::get_if<Error>(&parsed)) return std::move(*e);
    Request r{};
    r.endpoint = endpoint;
    if (auto e = read_fields(std::get<json>(parsed), r)) return std::move(*e);
    return r;
  } catch (const std::bad_alloc&) {
    return validation_error(413, "request body too large to decode");
  } catch (const std::exception& e) {
    return unprocessable(std::string("body could not be decoded: ") + e.what());
  }
}

}  // namespace

std::variant<Request, Error> parse_tei_embed(std::string_view body, const Limits& limits) {
  return parse_body(body, Endpoint::TeiEmbed, [&](const json& doc, Request& r) -> std::optional<Error> {
    r.truncate = false;  // TEI's default: a text over the model's length is refused, not cut
    if (auto e = read_inputs(doc, "inputs", limits, r)) return e;
    if (auto e = read_bool(doc, "normalize", r.normalize)) return e;
    if (auto e = read_bool(doc, "truncate", r.truncate)) return e;
    if (auto e = read_truncation_direction(doc)) return e;
    return read_dimensions(doc, r);
  });
}

std::variant<Request, Error> parse_tei_embed_all(std::string_view body, const Limits& limits) {
  return parse_body(body, Endpoint::TeiEmbedAll, [&](const json& doc, Request& r) -> std::optional<Error> {
    r.truncate = false;
    r.normalize = false;  // token states go out as the model wrote them, as TEI's do
    if (auto e = read_inputs(doc, "inputs", limits, r)) return e;
    if (auto e = read_bool(doc, "truncate", r.truncate)) return e;
    return read_truncation_direction(doc);
  });
}

std::variant<Request, Error> parse_tei_tokenize(std::string_view body, const Limits& limits) {
  return parse_body(body, Endpoint::TeiTokenize, [&](const json& doc, Request& r) -> std::optional<Error> {
    if (auto e = read_inputs(doc, "inputs", limits, r)) return e;
    return read_bool(doc, "add_special_tokens", r.add_special_tokens);
  });
}

std::variant<DecodeRequest, Error> parse_tei_decode(std::string_view body, const Limits& limits) {
  try {
    auto parsed = parse_object(body);
    if (auto* e = std::get_if<Error>(&parsed)) return std::move(*e);
    const json& doc = std::get<json>(parsed);
    DecodeRequest r;
    const json* v = field(doc, "ids");
    if (!v) return unprocessable("missing field `ids`");
    constexpr const char* kShape = "`ids` must be an array of token ids or an array of arrays of them";
    if (!v->is_array()) return unprocessable(kShape);
    if (v->empty()) return Error{400, "`ids` cannot be empty", "Empty"};
    r.batch = (*v)[0].is_array();
    if (r.batch) {
      if (auto e = check_input_count(v->size(), limits)) return std::move(*e);
    }
    std::size_t total = 0;
    const auto read_ids = [&](const json& row, std::vector<std::int32_t>& out) -> std::optional<Error> {
      if (!row.is_array()) return unprocessable(kShape);
      if (row.empty()) return Error{400, "`ids` cannot hold an empty sequence", "Empty"};
      total += row.size();
      if (total > limits.max_input_bytes)
        return validation_error(413, "more than " + std::to_string(limits.max_input_bytes) + " ids in all");
      out.reserve(row.size());
      for (const json& id : row) {
        if (!id.is_number_unsigned() || id.get<std::uint64_t>() > 0x7fffffffu)
          return unprocessable("a token id must be an integer from 0 to 2147483647");
        out.push_back(static_cast<std::int32_t>(id.get<std::uint64_t>()));
      }
      return std::nullopt;
    };
    if (r.batch) {
      for (const json& row : *v) {
        r.ids.emplace_back();
        if (auto e = read_ids(row, r.ids.back())) return std::move(*e);
      }
    } else {
      r.ids.emplace_back();
      if (auto e = read_ids(*v, r.ids.back())) return std::move(*e);
    }
    if (auto e = read_bool(doc, "skip_special_tokens", r.skip_special_tokens)) return std::move(*e);
    return r;
  } catch (const std::bad_alloc&) {
    return validation_error(413, "request body too large to decode");
  } catch (const std::exception& e) {
    return unprocessable(std::string("body could not be decoded: ") + e.what());
  }
}

std::variant<Request, Error> parse_openai(std::string_view body, const Limits& limits) {
  return parse_body(body, Endpoint::OpenAi, [&](const json& doc, Request& r) -> std::optional<Error> {
    if (auto e = read_inputs(doc, "input", limits, r)) return e;
    if (const json* model = field(doc, "model")) {
      if (!model->is_string()) return unprocessable("`model` must be a string");
      r.model = model->get<std::string>();
    }
    if (const json* format = field(doc, "encoding_format")) {
      if (*format == "base64")
        r.base64 = true;
      else if (*format != "float")
        return unprocessable("`encoding_format` must be \"float\" or \"base64\"");
    }
    return read_dimensions(doc, r);
  });
}

}  // namespace ferry::infer::api
