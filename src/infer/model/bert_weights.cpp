#include "infer/model/bert_weights.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferry/core/status.h"
#include "infer/model/mapped_file.h"
#include "infer/model/safetensors.h"
#include "infer/model/sha256.h"

namespace ferry::infer {

namespace {

std::size_t config_size(const nlohmann::json& config, const char* key, const std::string& path) {
  auto it = config.find(key);
  if (it == config.end()) throw Error(path + " has no \"" + key + "\"");
  if (!it->is_number_unsigned() || it->get<std::uint64_t>() == 0)
    throw Error(path + ": \"" + key + "\" is not a positive integer");
  return it->get<std::size_t>();
}

BertConfig read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path + " (the model's configuration)");
  std::stringstream text;
  text << in.rdbuf();
  const auto config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) throw Error(path + " is not a JSON object");

  // The CPU and CUDA models compute exact (erf) GELU and absolute positions:
  // a model trained with anything else would give wrong vectors, not an error.
  const std::string act = config.value("hidden_act", std::string("gelu"));
  if (act != "gelu")
    throw Error(path + ": hidden_act \"" + act +
                "\" is not supported (Ferry computes exact erf GELU, \"gelu\")");
  const std::string positions = config.value("position_embedding_type", std::string("absolute"));
  if (positions != "absolute")
    throw Error(path + ": position_embedding_type \"" + positions +
                "\" is not supported (only \"absolute\")");

  BertConfig c;
  c.vocab = config_size(config, "vocab_size", path);
  c.hidden = config_size(config, "hidden_size", path);
  c.layers = config_size(config, "num_hidden_layers", path);
  c.heads = config_size(config, "num_attention_heads", path);
  c.intermediate = config_size(config, "intermediate_size", path);
  c.max_positions = config_size(config, "max_position_embeddings", path);
  c.type_vocab = config.contains("type_vocab_size") ? config_size(config, "type_vocab_size", path) : 2;
  if (auto eps = config.find("layer_norm_eps"); eps != config.end()) {
    if (!eps->is_number() || eps->get<double>() <= 0)
      throw Error(path + ": \"layer_norm_eps\" is not a positive number");
    c.layer_norm_eps = eps->get<float>();
  }
  if (c.hidden % c.heads != 0)
    throw Error(path + ": hidden_size " + std::to_string(c.hidden) +
                " is not a multiple of num_attention_heads " + std::to_string(c.heads));
  return c;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Reads one tensor by its Hugging Face name (after the file's prefix), whose
// shape must be exactly `shape`, as f32.
class TensorReader {
 public:
  TensorReader(const SafetensorsView& file, std::string path) : file_(file), path_(std::move(path)) {
    // BertModel saves "embeddings..."; BertForXxx saves the encoder under "bert.".
    if (file_.find("embeddings.word_embeddings.weight") == nullptr &&
        file_.find("bert.embeddings.word_embeddings.weight") != nullptr)
      prefix_ = "bert.";
  }

  std::vector<float> read(const std::string& name, std::vector<std::size_t> shape) const {
    const std::string full = prefix_ + name;
    const TensorView* t = file_.find(full);
    if (t == nullptr) throw Error(path_ + " has no tensor \"" + full + "\" (not a BERT model?)");
    if (t->shape != shape)
      throw Error(path_ + ": tensor \"" + full + "\" has shape " + shape_text(t->shape) +
                  ", config.json implies " + shape_text(shape));
    if (t->dtype != Dtype::F32 && t->dtype != Dtype::F16 && t->dtype != Dtype::BF16)
      throw Error(path_ + ": tensor \"" + full + "\" has dtype " + dtype_name(t->dtype) +
                  "; Ferry reads F32, F16 and BF16 weights");
    std::vector<float> out(t->elements);
    copy_as_f32(*t, out);
    return out;
  }

  Linear linear(const std::string& name, std::size_t out, std::size_t in) const {
    return Linear{read(name + ".weight", {out, in}), read(name + ".bias", {out})};
  }

  LayerNorm norm(const std::string& name, std::size_t hidden) const {
    return LayerNorm{read(name + ".weight", {hidden}), read(name + ".bias", {hidden})};
  }

 private:
  const SafetensorsView& file_;
  std::string path_;
  std::string prefix_;
};

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

}  // namespace

BertWeights load_bert_weights(const std::string& model_dir, const std::string& expected_sha256) {
  BertWeights w;
  w.config = read_config(model_dir + "/config.json");
  const BertConfig& c = w.config;

  const std::string path = model_dir + "/model.safetensors";
  const MappedFile file = MappedFile::open(path);
  // Checked before parsing, so that a file other than the one the user pinned
  // is refused whatever it holds.
  if (!expected_sha256.empty()) {
    const std::string actual = sha256_hex(file.bytes());
    if (actual != lowercase(expected_sha256))
      throw Error(path + ": sha256 " + actual + " differs from the expected " + expected_sha256 +
                  " (a different or damaged download: scripts/fetch-model.sh fetches the pinned one)");
  }
  const SafetensorsView view = SafetensorsView::parse(file.bytes(), path);
  const TensorReader reader(view, path);

  w.word_embeddings = reader.read("embeddings.word_embeddings.weight", {c.vocab, c.hidden});
  w.position_embeddings = reader.read("embeddings.position_embeddings.weight", {c.max_positions, c.hidden});
  w.token_type_embeddings = reader.read("embeddings.token_type_embeddings.weight", {c.type_vocab, c.hidden});
  w.embedding_norm = reader.norm("embeddings.LayerNorm", c.hidden);
  w.layers.reserve(c.layers);
  for (std::size_t i = 0; i < c.layers; ++i) {
    const std::string layer = "encoder.layer." + std::to_string(i);
    BertLayer l;
    l.query = reader.linear(layer + ".attention.self.query", c.hidden, c.hidden);
    l.key = reader.linear(layer + ".attention.self.key", c.hidden, c.hidden);
    l.value = reader.linear(layer + ".attention.self.value", c.hidden, c.hidden);
    l.attention_out = reader.linear(layer + ".attention.output.dense", c.hidden, c.hidden);
    l.attention_norm = reader.norm(layer + ".attention.output.LayerNorm", c.hidden);
    l.intermediate = reader.linear(layer + ".intermediate.dense", c.intermediate, c.hidden);
    l.output = reader.linear(layer + ".output.dense", c.hidden, c.intermediate);
    l.output_norm = reader.norm(layer + ".output.LayerNorm", c.hidden);
    w.layers.push_back(std::move(l));
  }
  return w;
}

Pooling read_pooling_config(const std::string& model_dir) {
  const std::string path = model_dir + "/1_Pooling/config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Pooling::Mean;
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path + " (the model's pooling)");
  std::stringstream text;
  text << in.rdbuf();
  const auto config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) throw Error(path + " is not a JSON object");
  const auto wants = [&](const char* key) {
    auto it = config.find(key);
    return it != config.end() && it->is_boolean() && it->get<bool>();
  };
  // TEI's order: a file that sets several takes the first.
  if (wants("pooling_mode_cls_token")) return Pooling::Cls;
  if (wants("pooling_mode_mean_tokens")) return Pooling::Mean;
  if (wants("pooling_mode_lasttoken")) return Pooling::LastToken;
  std::string others;
  for (const char* key : {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                          "pooling_mode_weightedmean_tokens"})
    if (wants(key)) others += std::string(others.empty() ? "" : ", ") + key;
  throw Error(path + (others.empty() ? std::string(" sets no pooling mode") : " asks for " + others) +
              ": Ferry pools by mean, cls or last token; choose one with BertOptions::pooling");
}

}  // namespace ferry::infer
