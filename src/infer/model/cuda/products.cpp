// Products: the row-major product mapped onto column-major cuBLASLt. A
// row-major matrix M[r][c] is, byte for byte, the column-major M^T (c x r,
// leading dimension c). So y = x W^T (row-major [rows][out]) is the
// column-major y^T = W x^T: D (out x rows, ld out) = op_T(the stored W^T,
// in x out, ld in) * (the stored x^T, in x rows, ld in), and the bias runs
// along D's rows, which are the output features.

#include "infer/model/cuda/products.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/worker/cuda/cuda_check.h"
#include "infer/model/cuda/cublas_check.h"

namespace ferry::infer::cuda {
namespace {

// Candidates tune() times, and each one's timed runs (after one untimed).
constexpr int kCandidates = 8;
constexpr int kTimedRuns = 5;

// Below this many rows the candidates are not timed, and a product without
// an epilogue goes to cuBLAS (cublasGemmEx), whose own choice there beat
// cuBLASLt's first one: at small shapes the fastest of a few runs back to
// back was not the fastest inside a batch (docs/bench/inference.md, "Attention fed by cp.async").
constexpr std::size_t kMinTimedRows = 4096;

}  // namespace

struct Products::Plan {
  Shape shape;
  bool blas = false;  // cublasGemmEx, not cuBLASLt
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

Products::Products(cudaDataType_t type, void* workspace, std::size_t workspace_bytes, const Products* tuned)
    : type_(type), workspace_(workspace), workspace_bytes_(workspace_bytes), tuned_(tuned) {
  FERRY_CUBLAS_CHECK(cublasLtCreate(&handle_));
  if (const cublasStatus_t s = cublasCreate(&blas_); s != CUBLAS_STATUS_SUCCESS) {
    cublasLtDestroy(handle_);
    FERRY_CUBLAS_CHECK(s);
  }
}

Products::~Products() {
  plans_.clear();
  cublasDestroy(blas_);
  cublasLtDestroy(handle_);
}

Products::Plan& Products::plan(const Shape& s, cudaStream_t tune_on, const void* x, const void* weight,
                               const void* bias, void* y) {
  if (auto it = plans_.find(s); it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  p->shape = s;
  const auto chosen = tuned_ != nullptr ? tuned_->plans_.find(s) : plans_.end();
  if (tuned_ != nullptr && chosen != tuned_->plans_.end()) {
    // An algorithm is a description, not a handle's state: it serves this handle as well.
    p->blas = chosen->second->blas;
    p->algo = chosen->second->algo;
    if (!p->blas) describe(*p);
  } else if (s.epilogue == Epilogue::None && s.rows < kMinTimedRows) {
    p->blas = true;
  } else {
    describe(*p);
    choose(*p, tune_on, x, weight, bias, y);
  }
  if (tune_on != nullptr)
    launch(*p, p->algo, tune_on, x, weight, bias, y);  // loaded, and y as run() leaves it
  return *plans_.emplace(s, std::move(p)).first->second;
}

// The product's descriptor and its three layouts, for cuBLASLt.
void Products::describe(Plan& p) {
  const Shape& s = p.shape;
  FERRY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  FERRY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
  const cublasLtEpilogue_t epilogue =
      s.epilogue == Epilogue::GeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  FERRY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.weight, type_, s.in, s.out, static_cast<int64_t>(s.in)));
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.x, type_, s.in, s.rows, static_cast<int64_t>(s.in)));
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.y, type_, s.out, s.rows, static_cast<int64_t>(s.out)));
}

// cuBLASLt's first choice, or from kMinTimedRows rows with a stream to time
// on, the fastest of its candidates on these buffers.
void Products::choose(Plan& p, cudaStream_t tune_on, const void* x, const void* weight, const void* bias,
                      void* y) {
  const Shape& s = p.shape;
  cublasLtMatmulPreference_t preference = nullptr;
  FERRY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const bool timed = tune_on != nullptr && s.rows >= kMinTimedRows;
  std::vector<cublasLtMatmulHeuristicResult_t> results(timed ? kCandidates : 1);
  int found = 0;
  const cublasStatus_t status = [&] {
    const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof(workspace_bytes_));
    if (set != CUBLAS_STATUS_SUCCESS) return set;
    return cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.weight, p.x, p.y, p.y, preference,
                                          static_cast<int>(results.size()), results.data(), &found);
  }();
  cublasLtMatmulPreferenceDestroy(preference);
  FERRY_CUBLAS_CHECK(status);
  if (found == 0)
    throw Error(
        "cuBLASLt has no algorithm for a " + std::to_string(s.rows) + " x " + std::to_string(s.in) + " by " +
        std::to_string(s.in) + " x " + std::to_string(s.out) + " product" +
        (s.epilogue == Epilogue::GeluBias ? " with the GELU epilogue; the exact GELU runs without it" : ""));
  p.algo = results[0].algo;
  if (!timed || found == 1) return;
  cudaEvent_t start = nullptr, stop = nullptr;
  FERRY_CUDA_CHECK(cudaEventCreate(&start));
  FERRY_CUDA_CHECK(cudaEventCreate(&stop));
  float best = 0.0f;
  try {
    for (int i = 0; i < found; ++i) {
      launch(p, results[i].algo, tune_on, x, weight, bias, y);  // loads its kernel outside the clock
      FERRY_CUDA_CHECK(cudaEventRecord(start, tune_on));
      for (int run = 0; run < kTimedRuns; ++run) launch(p, results[i].algo, tune_on, x, weight, bias, y);
      FERRY_CUDA_CHECK(cudaEventRecord(stop, tune_on));
      FERRY_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      FERRY_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (i == 0 || ms < best) best = ms, p.algo = results[i].algo;
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

void Products::launch(Plan& p, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream, const void* x,
                      const void* weight, const void* bias, void* y) {
  if (p.blas) {
    if (stream != blas_stream_) {
      // cublasSetStream resets the workspace to cuBLAS's own pool, which
      // cannot allocate inside graph capture, so the workspace is set after it.
      FERRY_CUBLAS_CHECK(cublasSetStream(blas_, stream));
      FERRY_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, workspace_bytes_));
      blas_stream_ = stream;
    }
    const float one = 1.0f, zero = 0.0f;  // read when the call is made, so graph capture keeps them
    FERRY_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.shape.out),
                                    static_cast<int>(p.shape.rows), static_cast<int>(p.shape.in), &one,
                                    weight, type_, static_cast<int>(p.shape.in), x, type_,
                                    static_cast<int>(p.shape.in), &zero, y, type_,
                                    static_cast<int>(p.shape.out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  // The descriptor is the plan's, so the bias (one per layer) is set on each call.
  if (bias != nullptr)
    FERRY_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.0f;  // read when the call is made, so graph capture keeps the values
  const float beta = 0.0f;
  FERRY_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, weight, p.weight, x, p.x, &beta, y, p.y, y, p.y,
                                    &algo, workspace_, workspace_bytes_, stream));
}

void Products::run(cudaStream_t stream, const void* x, const void* weight, const void* bias, void* y,
                   std::size_t rows, std::size_t in, std::size_t out, Epilogue epilogue) {
  Plan& p = plan({rows, in, out, epilogue}, nullptr, x, weight, bias, y);
  launch(p, p.algo, stream, x, weight, epilogue == Epilogue::GeluBias ? bias : nullptr, y);
}

void Products::tune(cudaStream_t stream, const void* x, const void* weight, const void* bias, void* y,
                    std::size_t rows, std::size_t in, std::size_t out, Epilogue epilogue) {
  plan({rows, in, out, epilogue}, stream, x, weight, epilogue == Epilogue::GeluBias ? bias : nullptr, y);
}

}  // namespace ferry::infer::cuda
