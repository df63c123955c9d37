#pragma once
// A BERT encoder's configuration and weights as read from config.json and
// model.safetensors, in f32 on the host, shared by the CPU and CUDA models.
// Matrices keep the file's layout: a Linear weight is [out][in] row-major.

#include <cstddef>
#include <string>
#include <vector>

#include "ferry/infer/model.h"

namespace ferry::infer {

struct BertConfig {
  std::size_t vocab = 0;
  std::size_t hidden = 0;
  std::size_t layers = 0;
  std::size_t heads = 0;
  std::size_t intermediate = 0;
  std::size_t max_positions = 0;
  std::size_t type_vocab = 0;
  float layer_norm_eps = 1e-12f;
};

struct Linear {
  std::vector<float> weight;  // [out][in]
  std::vector<float> bias;    // [out]
};

struct LayerNorm {
  std::vector<float> gamma;
  std::vector<float> beta;
};

struct BertLayer {
  Linear query, key, value, attention_out;
  LayerNorm attention_norm;
  Linear intermediate, output;
  LayerNorm output_norm;
};

struct BertWeights {
  BertConfig config;
  std::vector<float> word_embeddings;      // [vocab][hidden]
  std::vector<float> position_embeddings;  // [max_positions][hidden]
  std::vector<float> token_type_embeddings;  // [type_vocab][hidden]
  LayerNorm embedding_norm;
  std::vector<BertLayer> layers;
};

// Reads model_dir/config.json and model_dir/model.safetensors (F32, F16 or BF16
// tensors, converted to f32), checking every tensor's shape against the config.
// expected_sha256: as BertOptions. Throws ferry::Error.
BertWeights load_bert_weights(const std::string& model_dir, const std::string& expected_sha256);

// The pooling model_dir/1_Pooling/config.json asks for, as TEI reads it: the
// first of pooling_mode_cls_token, pooling_mode_mean_tokens and
// pooling_mode_lasttoken that is true. Mean when the file does not exist (as
// Ferry always pooled). Throws ferry::Error when the file is not JSON, or asks
// only for a mode Ferry does not compute (max, mean_sqrt_len, weightedmean).
Pooling read_pooling_config(const std::string& model_dir);

}  // namespace ferry::infer
