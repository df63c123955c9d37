#include "ferry/worker/cuda/cuda_check.h"
#include "ferry/worker/cuda/gpu_context.h"
#include "ferry/worker/cuda/handler_backend.cuh"
#include "http/http_cuda.h"
#include "http/http_handler.h"

FERRY_CUDA_HANDLER(ferry::http::HttpHandler);

namespace ferry::http {
namespace {

template <typename T>
void* upload(const std::vector<T>& v) {
  void* d = nullptr;
  const std::size_t bytes = std::max<std::size_t>(1, v.size() * sizeof(T));
  FERRY_CUDA_CHECK(cudaMalloc(&d, bytes));
  if (!v.empty()) FERRY_CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

DeviceContent::DeviceContent(const Content& content, const std::string& gpu) {
  worker::cuda::GpuContext select(gpu);  // picks and sets the device the backend will use
  try {
    entries_ = upload(content.entries());
    buckets_ = upload(content.buckets());
    strings_ = upload(content.strings());
  } catch (...) {
    cudaFree(entries_);
    cudaFree(buckets_);
    cudaFree(strings_);
    throw;
  }
  view_.entries = static_cast<const ContentEntry*>(entries_);
  view_.buckets = static_cast<const std::uint32_t*>(buckets_);
  view_.strings = static_cast<const std::uint8_t*>(strings_);
  view_.bucket_mask = static_cast<std::uint32_t>(content.buckets().size() - 1);
  view_.credentials_offset = content.view().credentials_offset;
  view_.credentials_len = content.view().credentials_len;
}

DeviceContent::~DeviceContent() {
  cudaFree(entries_);
  cudaFree(buckets_);
  cudaFree(strings_);
}

std::unique_ptr<worker::Backend> make_http_cuda_backend(const worker::WorkerOptions& options, ContentView device_view) {
  return worker::make_cuda_backend(options, HttpHandler{device_view});
}

}  // namespace ferry::http
