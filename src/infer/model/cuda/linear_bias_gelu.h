#pragma once
// The feed-forward block's first Linear with its bias and GELU in cuBLASLt's
// epilogue (CUBLASLT_EPILOGUE_GELU_BIAS, the tanh form): one kernel where
// linear() + launch_bias_gelu() take two, and the [rows][intermediate]
// matrix is written once instead of written, read and written again.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>

namespace ferry::infer::cuda {

class LinearBiasGelu {
 public:
  // `type` is the element type of x, weight, bias and y (CUDA_R_16F,
  // CUDA_R_16BF or CUDA_R_32F); products accumulate in f32. The workspace
  // stays the caller's and may be shared with cuBLAS calls on the same stream.
  // Throws ferry::Error when cuBLASLt cannot start.
  LinearBiasGelu(cudaDataType_t type, void* workspace, std::size_t workspace_bytes);
  LinearBiasGelu(const LinearBiasGelu&) = delete;
  LinearBiasGelu& operator=(const LinearBiasGelu&) = delete;
  ~LinearBiasGelu();

  // y[rows][out] = gelu_tanh(x[rows][in] * weight[out][in]^T + bias[out]),
  // row-major, enqueued on `stream` (capturable). The algorithm for each
  // (rows, in, out) is chosen on its first call and kept, so that a shape
  // warmed up before persistent kernels start never loads another kernel.
  // Throws ferry::Error (no algorithm for the shape, a failed launch).
  void run(cudaStream_t stream, const void* x, const void* weight, const void* bias, void* y, std::size_t rows,
           std::size_t in, std::size_t out);

 private:
  struct Plan;
  struct Shape {
    std::size_t rows, in, out;
    auto operator<=>(const Shape&) const = default;
  };
  Plan& plan(const Shape& shape);

  cudaDataType_t type_;
  void* workspace_;
  std::size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
};

}  // namespace ferry::infer::cuda
