// Uploads BertWeights: f32 host tensors converted to T, QKV fused.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <span>

#include "ferry/worker/cuda/cuda_check.h"
#include "infer/model/cuda/device_weights.cuh"
#include "infer/model/cuda/element.cuh"
#include "infer/model/cuda/launch_check.h"

namespace ferry::infer::cuda {
namespace {

// Converts on the host (round to nearest even, as PyTorch's .half() does) and
// copies; cudaMemcpy from pageable memory returns once the data is on the device.
template <typename T>
DeviceBuffer<T> upload_as(std::span<const float> values) {
  std::vector<T> converted(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) converted[i] = from_float<T>(values[i]);
  DeviceBuffer<T> buffer(values.size());
  if (!values.empty())
    FERRY_CUDA_CHECK(
        cudaMemcpy(buffer.get(), converted.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

DeviceLayerNorm upload_norm(const LayerNorm& norm) {
  return {upload_as<float>(norm.gamma), upload_as<float>(norm.beta)};
}

template <typename T>
DeviceLinear<T> upload_linear(const Linear& linear) {
  return {upload_as<T>(linear.weight), upload_as<float>(linear.bias)};
}

// Stacking the three [H][H] row-major matrices one after another gives the
// [3H][H] row-major matrix whose product rows are query, key, value in turn.
template <typename T>
DeviceLinear<T> upload_fused_qkv(const BertLayer& layer) {
  std::vector<float> weight;
  std::vector<float> bias;
  for (const Linear* part : {&layer.query, &layer.key, &layer.value}) {
    weight.insert(weight.end(), part->weight.begin(), part->weight.end());
    bias.insert(bias.end(), part->bias.begin(), part->bias.end());
  }
  return {upload_as<T>(weight), upload_as<float>(bias)};
}

}  // namespace

template <typename T>
DeviceBertWeights<T> upload_bert_weights(const BertWeights& weights) {
  DeviceBertWeights<T> device;
  device.word_embeddings = upload_as<T>(weights.word_embeddings);
  device.position_embeddings = upload_as<T>(weights.position_embeddings);
  device.token_type_embeddings = upload_as<T>(weights.token_type_embeddings);
  device.embedding_norm = upload_norm(weights.embedding_norm);
  device.layers.reserve(weights.layers.size());
  for (const BertLayer& layer : weights.layers) {
    DeviceLayer<T> d;
    d.qkv = upload_fused_qkv<T>(layer);
    d.attention_out = upload_linear<T>(layer.attention_out);
    d.attention_norm = upload_norm(layer.attention_norm);
    d.intermediate = upload_linear<T>(layer.intermediate);
    d.intermediate_bias = upload_as<T>(layer.intermediate.bias);
    d.output = upload_linear<T>(layer.output);
    d.output_norm = upload_norm(layer.output_norm);
    device.layers.push_back(std::move(d));
  }
  return device;
}

#define FERRY_INSTANTIATE(T) template DeviceBertWeights<T> upload_bert_weights<T>(const BertWeights&);
FERRY_INSTANTIATE_FOR_ELEMENTS(FERRY_INSTANTIATE)

}  // namespace ferry::infer::cuda
