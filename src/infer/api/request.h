#pragma once
// The embedding APIs' requests, decoded into one Request:
//   GAZSI   GET /embed?d=TEXT[&full=1]         (query string)
//   TEI     POST /embed {"inputs": ...}         (text-embeddings-inference)
//   OpenAI  POST /v1/embeddings {"input": ...}
// Each parser returns a Request or an Error and never throws on bad input;
// errors follow TEI's taxonomy (status and "error_type"):
//   400 Empty       an empty input, or an empty array of inputs
//   400 Validation  a malformed query string (GAZSI)
//   413 Validation  more inputs, or more input bytes, than Limits allows
//   422 Validation  a body that is not the expected JSON: wrong shape or types,
//                   invalid UTF-8, a lone surrogate, an unsupported option

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ferry::infer::api {

enum class Endpoint : std::uint8_t { Gazsi, TeiEmbed, OpenAi };

// A refused request: the HTTP status, a message for the client, TEI's error_type.
struct Error {
  std::uint16_t status;
  std::string message;
  std::string type;
};

struct Request {
  Endpoint endpoint;
  std::vector<std::string> inputs;        // decoded, valid UTF-8, each non-empty
  bool batch = false;                     // inputs came as an array (TEI/OpenAI), else a single string
  bool normalize = true;                  // TEI "normalize"; always true for GAZSI and OpenAI
  bool truncate = true;                   // TEI "truncate" (default false there); GAZSI/OpenAI: always true
  bool full = false;                      // GAZSI &full=1: the whole embedding, not just a sample
  bool base64 = false;                    // OpenAI encoding_format "base64"
  std::string model;                      // OpenAI "model", echoed back (any string; empty when absent)
  std::optional<std::size_t> dimensions;  // TEI/OpenAI Matryoshka cut: > 0 here; the
                                          // service checks it against the model's hidden size
};

struct Limits {
  std::size_t max_inputs = 32;          // inputs in one request (413 above)
  std::size_t max_input_bytes = 65536;  // all inputs' decoded bytes together (413 above)
};

// The query string after '?', e.g. "d=hello+world&full=1". Parameters: d
// (required, once), full (0, 1, true or false). Others are ignored, but every
// key and value must be well percent-encoded.
std::variant<Request, Error> parse_gazsi_query(std::string_view query, const Limits& limits);

// TEI's /embed body: {"inputs": str | [str], "normalize": bool, "truncate": bool,
// "truncation_direction": "Right", "dimensions": int, "prompt_name": ignored}.
// Unknown fields are ignored; a null field counts as absent.
std::variant<Request, Error> parse_tei_embed(std::string_view body, const Limits& limits);

// OpenAI's /v1/embeddings body: {"input": str | [str], "model": str,
// "encoding_format": "float" | "base64", "dimensions": int, "user": ignored}.
// Token-id inputs ([int], [[int]]) are refused with 422.
std::variant<Request, Error> parse_openai(std::string_view body, const Limits& limits);

}  // namespace ferry::infer::api
