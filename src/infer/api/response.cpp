#include "infer/api/response.h"

#include <algorithm>

#include "infer/api/json_out.h"
#include "infer/api/text_codec.h"

namespace ferry::infer::api {

namespace {

// Room for one vector written as a JSON array.
std::size_t float_array_room(std::size_t n) {
  return 2 + n * kMaxFloatChars;
}

}  // namespace

void write_tei(std::string& out, std::span<const Embedded> items) {
  std::size_t room = 2;
  for (const Embedded& e : items) room += 1 + float_array_room(e.vector.size());
  out.reserve(out.size() + room);
  out.push_back('[');
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_json_floats(out, items[i].vector);
  }
  out.push_back(']');
}

void write_tei_embed_all(std::string& out, std::span<const std::span<const float>> inputs, std::size_t dims) {
  std::size_t room = 2;
  for (const auto& rows : inputs) room += 3 + (rows.size() / std::max<std::size_t>(dims, 1)) * (1 + float_array_room(dims));
  out.reserve(out.size() + room);
  out.push_back('[');
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('[');
    for (std::size_t r = 0; dims > 0 && r * dims < inputs[i].size(); ++r) {
      if (r > 0) out.push_back(',');
      append_json_floats(out, inputs[i].subspan(r * dims, dims));
    }
    out.push_back(']');
  }
  out.push_back(']');
}

void write_tei_tokenize(std::string& out, std::span<const std::vector<TokenSpan>> inputs) {
  out.push_back('[');
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('[');
    for (std::size_t k = 0; k < inputs[i].size(); ++k) {
      const TokenSpan& t = inputs[i][k];
      if (k > 0) out.push_back(',');
      out.append(R"({"id":)");
      append_json_number(out, static_cast<std::size_t>(t.id));
      out.append(R"(,"text":)");
      append_json_string(out, t.text);
      out.append(t.special ? R"(,"special":true,"start":null,"stop":null})" : R"(,"special":false,"start":)");
      if (t.special) continue;
      append_json_number(out, t.start);
      out.append(R"(,"stop":)");
      append_json_number(out, t.stop);
      out.push_back('}');
    }
    out.push_back(']');
  }
  out.push_back(']');
}

void write_tei_decode(std::string& out, std::span<const std::string> texts) {
  out.push_back('[');
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_json_string(out, texts[i]);
  }
  out.push_back(']');
}

void write_openai_models(std::string& out, std::string_view id, std::int64_t created, std::string_view owned_by) {
  out.append(R"({"object":"list","data":[{"id":)");
  append_json_string(out, id);
  out.append(R"(,"object":"model","created":)");
  append_json_number(out, static_cast<std::size_t>(created < 0 ? 0 : created));
  out.append(R"(,"owned_by":)");
  append_json_string(out, owned_by);
  out.append("}]}");
}

void write_openai(std::string& out, std::span<const Embedded> items, std::string_view model, bool base64) {
  constexpr std::string_view kItemHead = R"({"object":"embedding","embedding":)";
  constexpr std::string_view kItemIndex = R"(,"index":)";
  std::size_t room = 128 + model.size() * 6;  // the envelope; a model name escapes to at most 6x
  std::size_t tokens = 0;
  for (const Embedded& e : items) {
    room += kItemHead.size() + kItemIndex.size() + 24 +
            (base64 ? base64_length(e.vector.size() * 4) + 2 : float_array_room(e.vector.size()));
    tokens += e.tokens;
  }
  out.reserve(out.size() + room);

  out.append(R"({"object":"list","data":[)");
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(kItemHead);
    if (base64) {
      out.push_back('"');
      append_base64_f32(out, items[i].vector);  // base64's alphabet needs no JSON escape
      out.push_back('"');
    } else {
      append_json_floats(out, items[i].vector);
    }
    out.append(kItemIndex);
    append_json_number(out, i);
    out.push_back('}');
  }
  out.append(R"(],"model":)");
  append_json_string(out, model);
  // Embeddings have no completion: every token is a prompt token.
  out.append(R"(,"usage":{"prompt_tokens":)");
  append_json_number(out, tokens);
  out.append(R"(,"total_tokens":)");
  append_json_number(out, tokens);
  out.append("}}");
}

void write_gazsi(std::string& out, std::string_view input, const Embedded& e, bool full,
                 double inference_time_us, std::size_t batch_size, const StageTimes& stages) {
  const std::size_t sample = std::min(e.vector.size(), kGazsiSampleSize);
  out.reserve(out.size() + 512 + input.size() * 6 + float_array_room(sample) +
              (full ? float_array_room(e.vector.size()) : 0));

  out.append(R"({"input":)");
  append_json_string(out, input);
  out.append(R"(,"tokens":)");
  append_json_number(out, e.tokens);
  out.append(e.truncated ? R"(,"truncated":true)" : R"(,"truncated":false)");
  out.append(R"(,"embedding_sample":)");
  append_json_floats(out, e.vector.first(sample));
  if (full) {
    out.append(R"(,"embedding":)");
    append_json_floats(out, e.vector);
  }
  out.append(R"(,"dims":)");
  append_json_number(out, e.vector.size());
  out.append(R"(,"inference_time_us":)");
  append_json_number(out, inference_time_us);
  out.append(R"(,"batch_size":)");
  append_json_number(out, batch_size);
  out.append(R"(,"stages_us":{)");
  for (std::size_t i = 0; i < stages.at_us.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    out.append(StageTimes::kNames[i]);  // fixed ASCII names: nothing to escape
    out.append("\":");
    append_json_number(out, stages.at_us[i]);
  }
  out.append("}}");
}

std::string error_body(const Error& e) {
  std::string out;
  out.reserve(40 + e.message.size() + e.type.size());
  out.append(R"({"error":)");
  append_json_string(out, e.message);
  out.append(R"(,"error_type":)");
  append_json_string(out, e.type);
  out.push_back('}');
  return out;
}

}  // namespace ferry::infer::api
