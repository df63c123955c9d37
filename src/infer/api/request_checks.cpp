#include "infer/api/request_checks.h"

namespace ferry::infer::api {

std::optional<Error> check_input_count(std::size_t count, const Limits& limits) {
  if (count <= limits.max_inputs) return std::nullopt;
  // TEI's wording, so that clients matching on it keep working.
  return validation_error(413, "batch size " + std::to_string(count) + " > maximum allowed batch size " +
                                   std::to_string(limits.max_inputs));
}

std::optional<Error> check_inputs(const Request& r, std::string_view what, const Limits& limits) {
  if (r.inputs.empty()) return Error{400, std::string(what) + " cannot be empty", "Empty"};
  if (auto e = check_input_count(r.inputs.size(), limits)) return e;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const std::string& s = r.inputs[i];
    if (s.empty()) {
      std::string where = r.batch ? " (element " + std::to_string(i) + ")" : "";
      return Error{400, std::string(what) + " cannot be empty" + where, "Empty"};
    }
    bytes += s.size();
  }
  if (bytes > limits.max_input_bytes)
    return validation_error(413, "inputs hold " + std::to_string(bytes) + " bytes, more than the limit of " +
                                     std::to_string(limits.max_input_bytes));
  return std::nullopt;
}

}  // namespace ferry::infer::api
