#pragma once
// The HTTP handler on the GPU: the content index copied into device memory,
// and the backend for any launch method. Defined in cuda/http_cuda.cu; only in
// builds with CUDA (FERRY_HAVE_CUDA).

#include <memory>
#include <string>

#include "ferry/worker/backend.h"
#include "http/content.h"

namespace ferry::http {

class DeviceContent {
 public:
  // Copies the index to the GPU named as in WorkerOptions::gpu. Throws ferry::Error.
  DeviceContent(const Content& content, const std::string& gpu);
  ~DeviceContent();
  DeviceContent(const DeviceContent&) = delete;
  DeviceContent& operator=(const DeviceContent&) = delete;
  // The index with device pointers; valid while this lives.
  ContentView view() const { return view_; }

 private:
  void* entries_ = nullptr;
  void* buckets_ = nullptr;
  void* strings_ = nullptr;
  ContentView view_;
};

std::unique_ptr<worker::Backend> make_http_cuda_backend(const worker::WorkerOptions& options, ContentView device_view);

}  // namespace ferry::http
