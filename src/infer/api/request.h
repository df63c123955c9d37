#pragma once
// The embedding APIs' requests, decoded into one Request:
//   GAZSI   GET /inference?d=TEXT[&full=1]     (query string)
//   TEI     POST /embed {"inputs": ...}         (text-embeddings-inference)
//           POST /embed_all, POST /tokenize {"inputs": ...}
//           POST /decode {"ids": ...}           (a DecodeRequest)
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

// Every embedding endpoint, the one list: the parsers below tag their Request
// with it, and ferry http registers one route per row of kEndpoints.
enum class Endpoint : std::uint8_t {
  Gazsi,         // GET  /inference       parse_gazsi_query
  TeiEmbed,      // POST /embed           parse_tei_embed
  OpenAi,        // POST /v1/embeddings   parse_openai
  TeiEmbedAll,   // POST /embed_all       parse_tei_embed_all
  TeiTokenize,   // POST /tokenize        parse_tei_tokenize
  TeiDecode,     // POST /decode          parse_tei_decode (a DecodeRequest)
  Info,          // GET  /info            no request: the model and the batching settings
  OpenAiModels,  // GET  /v1/models       no request: the one model
};

// Where an endpoint is served: POST with a JSON body, else GET with a query string.
struct EndpointPath {
  Endpoint endpoint;
  bool post;
  const char* path;
};
inline constexpr EndpointPath kEndpoints[] = {
    {Endpoint::Gazsi, false, "/inference"},     {Endpoint::TeiEmbed, true, "/embed"},
    {Endpoint::OpenAi, true, "/v1/embeddings"}, {Endpoint::TeiEmbedAll, true, "/embed_all"},
    {Endpoint::TeiTokenize, true, "/tokenize"}, {Endpoint::TeiDecode, true, "/decode"},
    {Endpoint::Info, false, "/info"},           {Endpoint::OpenAiModels, false, "/v1/models"},
};

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
  bool add_special_tokens = true;         // TEI /tokenize: [CLS] and [SEP] around each input
};

// TEI's /decode: token id sequences back to text.
struct DecodeRequest {
  std::vector<std::vector<std::int32_t>> ids;  // each id in [0, 2^31); the route checks the vocabulary
  bool batch = false;                          // "ids" came as [[int]] (the answer is a list either way)
  bool skip_special_tokens = true;
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

// TEI's /embed_all body: {"inputs": str | [str], "truncate": bool,
// "truncation_direction": "Right", "prompt_name": ignored}. Not normalised.
std::variant<Request, Error> parse_tei_embed_all(std::string_view body, const Limits& limits);

// TEI's /tokenize body: {"inputs": str | [str], "add_special_tokens": bool
// (true), "prompt_name": ignored}. Inputs are not truncated.
std::variant<Request, Error> parse_tei_tokenize(std::string_view body, const Limits& limits);

// TEI's /decode body: {"ids": [int] | [[int]], "skip_special_tokens": bool
// (true)}. 400 Empty for no ids, 413 for more sequences than
// limits.max_inputs or more ids in all than limits.max_input_bytes, 422 for
// anything but non-negative integers below 2^31.
std::variant<DecodeRequest, Error> parse_tei_decode(std::string_view body, const Limits& limits);

// OpenAI's /v1/embeddings body: {"input": str | [str], "model": str,
// "encoding_format": "float" | "base64", "dimensions": int, "user": ignored}.
// Token-id inputs ([int], [[int]]) are refused with 422.
std::variant<Request, Error> parse_openai(std::string_view body, const Limits& limits);

}  // namespace ferry::infer::api
