// LinearBiasGelu: the row-major product mapped onto column-major cuBLASLt
// the same way linear.cuh maps it onto cuBLAS (see there): D (out x rows) =
// op_T(weight stored as in x out) * (x stored as in x rows), with the bias
// along D's rows, which are the output features.

#include "infer/model/cuda/linear_bias_gelu.h"

#include <string>

#include "ferry/core/status.h"
#include "infer/model/cuda/cublas_check.h"

namespace ferry::infer::cuda {

struct LinearBiasGelu::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t weight = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (weight) cublasLtMatrixLayoutDestroy(weight);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

LinearBiasGelu::LinearBiasGelu(cudaDataType_t type, void* workspace, std::size_t workspace_bytes)
    : type_(type), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  FERRY_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

LinearBiasGelu::~LinearBiasGelu() {
  plans_.clear();
  cublasLtDestroy(handle_);
}

LinearBiasGelu::Plan& LinearBiasGelu::plan(const Shape& s) {
  if (auto it = plans_.find(s); it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  FERRY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  FERRY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  FERRY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->weight, type_, s.in, s.out, static_cast<int64_t>(s.in)));
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->x, type_, s.in, s.rows, static_cast<int64_t>(s.in)));
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->y, type_, s.out, s.rows, static_cast<int64_t>(s.out)));

  cublasLtMatmulPreference_t preference = nullptr;
  FERRY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = [&] {
    const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_));
    if (set != CUBLAS_STATUS_SUCCESS) return set;
    return cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->weight, p->x, p->y, p->y, preference, 1, &result,
                                          &found);
  }();
  cublasLtMatmulPreferenceDestroy(preference);
  FERRY_CUBLAS_CHECK(status);
  if (found == 0)
    throw Error("cuBLASLt has no GELU_BIAS algorithm for a " + std::to_string(s.rows) + " x " +
                std::to_string(s.in) + " by " + std::to_string(s.in) + " x " + std::to_string(s.out) +
                " product; run the model with --gelu exact");
  p->algo = result.algo;
  return *plans_.emplace(s, std::move(p)).first->second;
}

void LinearBiasGelu::run(cudaStream_t stream, const void* x, const void* weight, const void* bias, void* y,
                         std::size_t rows, std::size_t in, std::size_t out) {
  Plan& p = plan({rows, in, out});
  // The descriptor is the plan's, so the bias (one per layer) is set on each call.
  FERRY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.0f;  // read when the call is made, so graph capture keeps the values
  const float beta = 0.0f;
  FERRY_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, weight, p.weight, x, p.x, &beta, y, p.y, y, p.y,
                                    &p.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace ferry::infer::cuda
