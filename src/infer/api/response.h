#pragma once
// The embedding APIs' response bodies, appended to a reply buffer:
//   TEI     [[f,...],...]
//   OpenAI  {"object":"list","data":[{"object":"embedding","embedding":[f,...] | "BASE64","index":i},...],
//            "model":"...","usage":{"prompt_tokens":N,"total_tokens":N}}
//   GAZSI   {"input":"...","tokens":N,"truncated":b,"embedding_sample":[8 floats],
//            "embedding":[all, only with full],"dims":D,"inference_time_us":X,
//            "batch_size":B,"stages_us":{"t0_received":0,...,"t8_built":X}}
//   TEI /embed_all  [[[f,...] per token] per input]
//   TEI /tokenize   [[{"id":N,"text":"...","special":b,"start":N|null,"stop":N|null},...],...]
//   TEI /decode     ["...",...]
//   OpenAI /v1/models  {"object":"list","data":[{"id":"...","object":"model","created":N,"owned_by":"..."}]}
//   errors  {"error":"...","error_type":"..."} (TEI's shape, for all of them)
// Floats go out in their shortest exact form (std::to_chars); NaN and Inf,
// which JSON cannot carry, as 0. Each writer reserves its size up front.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "infer/api/request.h"

namespace ferry::infer::api {

// One input's result, as the service hands it to a writer.
struct Embedded {
  std::span<const float> vector;  // the embedding, already normalised and cut to "dimensions"
  std::size_t tokens;             // ids the model saw, [CLS] and [SEP] included
  bool truncated;                 // the text needed more than the model's length
  std::size_t full_length;        // ids the whole text needs (== tokens unless truncated)
};

// When a GAZSI request reached each stage, in microseconds after T0 (its
// arrival), for "stages_us".
struct StageTimes {
  static constexpr std::array<const char*, 9> kNames = {"t0_received", "t1_routed",  "t2_tokenized",
                                                        "t3_queued",   "t4_batched", "t5_launched",
                                                        "t6_computed", "t7_delivered", "t8_built"};
  std::array<double, 9> at_us{};
};

// How many floats of each vector GAZSI shows without &full=1.
inline constexpr std::size_t kGazsiSampleSize = 8;

void write_tei(std::string& out, std::span<const Embedded> items);

// base64: each embedding as a base64 string of little-endian float32 (OpenAI's
// encoding_format "base64") instead of an array.
void write_openai(std::string& out, std::span<const Embedded> items, std::string_view model, bool base64);

// input is the decoded text, echoed back; full adds the whole vector.
void write_gazsi(std::string& out, std::string_view input, const Embedded& e, bool full,
                 double inference_time_us, std::size_t batch_size, const StageTimes& stages);

// One token of a /tokenize answer. text: the input's bytes [start, stop), or
// the vocabulary's token for a special one, whose start and stop go out as
// null (as TEI writes them).
struct TokenSpan {
  std::int32_t id;
  std::string_view text;
  bool special;
  std::size_t start, stop;
};
void write_tei_tokenize(std::string& out, std::span<const std::vector<TokenSpan>> inputs);

void write_tei_decode(std::string& out, std::span<const std::string> texts);

// inputs[i]: input i's token states, rows of dims floats back to back.
void write_tei_embed_all(std::string& out, std::span<const std::span<const float>> inputs, std::size_t dims);

// The one model a server holds; created in seconds since the epoch.
void write_openai_models(std::string& out, std::string_view id, std::int64_t created, std::string_view owned_by);

// TEI's error body for e (its status goes in the status line, not here).
std::string error_body(const Error& e);

}  // namespace ferry::infer::api
