#pragma once
// BertWeights on the GPU: matrices and embedding tables in the model's
// element type T, biases and LayerNorm parameters in f32 (the kernels add them
// in f32 anyway, and they are a few KiB). Query, key and value are fused into
// one [3 hidden][hidden] matrix so that one product computes all three.

#include <vector>

#include "infer/model/bert_weights.h"
#include "infer/model/cuda/device_memory.h"

namespace ferry::infer::cuda {

template <typename T>
struct DeviceLinear {
  DeviceBuffer<T> weight;    // [out][in]
  DeviceBuffer<float> bias;  // [out]
};

struct DeviceLayerNorm {
  DeviceBuffer<float> gamma;
  DeviceBuffer<float> beta;
};

template <typename T>
struct DeviceLayer {
  DeviceLinear<T> qkv;  // rows: query [0, H), key [H, 2H), value [2H, 3H)
  DeviceLinear<T> attention_out;
  DeviceLayerNorm attention_norm;
  DeviceLinear<T> intermediate;
  DeviceBuffer<T> intermediate_bias;  // in T as well, for the GELU product's epilogue (products.h)
  DeviceLinear<T> output;
  DeviceLayerNorm output_norm;
};

template <typename T>
struct DeviceBertWeights {
  DeviceBuffer<T> word_embeddings;
  DeviceBuffer<T> position_embeddings;
  DeviceBuffer<T> token_type_embeddings;
  DeviceLayerNorm embedding_norm;
  std::vector<DeviceLayer<T>> layers;
};

// Converts and copies every tensor to the current device (synchronously).
// Throws ferry::Error (out of memory, a failed copy).
template <typename T>
DeviceBertWeights<T> upload_bert_weights(const BertWeights& weights);

}  // namespace ferry::infer::cuda
