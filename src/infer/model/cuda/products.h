#pragma once
// The model's matrix products on cuBLAS and cuBLASLt, each a Linear layer without its
// bias (the kernel after it adds the bias along with whatever else it does),
// or with the bias and the tanh GELU in the epilogue (CUBLASLT_EPILOGUE_GELU_BIAS:
// one kernel where a product and launch_bias_gelu() take two, and the
// [rows][intermediate] matrix is written once).
//
// Each shape's algorithm is chosen once and kept, so that shapes warmed up
// before persistent kernels start never load another kernel. tune() chooses
// it: from 4,096 rows by timing cuBLASLt's candidates, whose fastest beats
// cuBLAS's choice at large shapes, below that cuBLAS's own choice
// (docs/bench/inference.md, "Attention fed by cp.async", has the measurements).

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>

namespace ferry::infer::cuda {

enum class Epilogue { None, GeluBias };

class Products {
 public:
  // `type` is the element type of x, weight, bias and y (CUDA_R_16F,
  // CUDA_R_16BF or CUDA_R_32F); products accumulate in f32. The workspace
  // stays the caller's. With `tuned`, a shape it has chosen takes the same
  // algorithm without timing the candidates again: another stream's products
  // over the same weights (tuned must outlive the tune() calls). Throws
  // ferry::Error when cuBLASLt cannot start.
  Products(cudaDataType_t type, void* workspace, std::size_t workspace_bytes,
           const Products* tuned = nullptr);
  Products(const Products&) = delete;
  Products& operator=(const Products&) = delete;
  ~Products();

  // y[rows][out] = x[rows][in] * weight[out][in]^T, then with GeluBias
  // gelu_tanh(... + bias[out]); row-major, enqueued on `stream` (capturable).
  // A shape run before it was tuned takes cuBLASLt's first choice. Throws
  // ferry::Error (no algorithm for the shape, a failed launch).
  void run(cudaStream_t stream, const void* x, const void* weight, const void* bias, void* y,
           std::size_t rows, std::size_t in, std::size_t out, Epilogue epilogue);

  // Chooses the shape's algorithm and loads its kernel: from 4,096 rows by
  // running each of cuBLASLt's candidates on these buffers and synchronising
  // `stream` (so never while it captures), below that cuBLAS's or cuBLASLt's
  // first choice.
  // y ends holding what run() would write. A shape already chosen is kept.
  void tune(cudaStream_t stream, const void* x, const void* weight, const void* bias, void* y,
            std::size_t rows, std::size_t in, std::size_t out, Epilogue epilogue);

 private:
  struct Plan;
  struct Shape {
    std::size_t rows, in, out;
    Epilogue epilogue;
    auto operator<=>(const Shape&) const = default;
  };
  Plan& plan(const Shape& shape, cudaStream_t tune_on, const void* x, const void* weight, const void* bias,
             void* y);
  void describe(Plan& p);
  void choose(Plan& p, cudaStream_t tune_on, const void* x, const void* weight, const void* bias, void* y);
  void launch(Plan& p, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream, const void* x,
              const void* weight, const void* bias, void* y);

  cudaDataType_t type_;
  void* workspace_;
  std::size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudaStream_t blas_stream_ = nullptr;  // the stream blas_ was last set to
  const Products* tuned_ = nullptr;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
};

}  // namespace ferry::infer::cuda
