// GAZSI's query string: d=TEXT[&full=0|1|true|false], form-encoded.
#include <optional>

#include "infer/api/request.h"
#include "infer/api/request_checks.h"
#include "infer/api/text_codec.h"

namespace ferry::infer::api {

namespace {

Error bad_query(std::string message) {
  return validation_error(400, std::move(message));
}

std::optional<bool> parse_flag(std::string_view v) {
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  return std::nullopt;
}

}  // namespace

std::variant<Request, Error> parse_gazsi_query(std::string_view query, const Limits& limits) {
  Request r{};
  r.endpoint = Endpoint::Gazsi;
  bool have_d = false;
  std::string key, value;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;  // "a=1&&d=x": browsers and curl leave these

    const std::size_t eq = pair.find('=');
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    key.clear();
    value.clear();
    // Every pair must decode, known or not: a bad escape anywhere means the
    // client built the URL wrong, and guessing what it meant would hide that.
    if (!form_decode(pair.substr(0, eq), key) || !form_decode(raw_value, value))
      return bad_query(
          "malformed percent-encoding in the query string (a '%' must be followed by two hex digits)");

    if (key == "d") {
      if (have_d) return bad_query("parameter d given more than once");
      have_d = true;
      if (!is_valid_utf8(value)) return bad_query("input is not valid UTF-8");
      r.inputs.push_back(std::move(value));
      value = std::string{};
    } else if (key == "full") {
      const std::optional<bool> full = parse_flag(value);
      if (!full) return bad_query("parameter full must be 0, 1, true or false");
      r.full = *full;
    }
  }
  if (!have_d) return bad_query("missing parameter d (the text to embed): /embed?d=TEXT");
  if (auto e = check_inputs(r, "parameter d", limits)) return *e;
  return r;
}

}  // namespace ferry::infer::api
