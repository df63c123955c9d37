#pragma once
// A Linear layer's matrix product on cuBLAS, without its bias (the kernel
// after it adds the bias along with whatever else it does).

#include <cublas_v2.h>

#include <cstddef>

#include "infer/model/cuda/cublas_check.h"
#include "infer/model/cuda/element.cuh"

namespace ferry::infer::cuda {

// y[tokens][out] = x[tokens][in] * weight[out][in]^T, all row-major in T, f32
// accumulation. Enqueued on the handle's stream; throws ferry::Error.
//
// cuBLAS is column-major, and a row-major matrix M[r][c] is, byte for byte,
// the column-major matrix M^T (c x r, leading dimension c). So:
//   y (row-major [tokens][out]) is column-major y^T: out x tokens, ld = out;
//   x (row-major [tokens][in])  is column-major x^T: in x tokens,  ld = in;
//   weight ([out][in])          is column-major W^T: in x out,     ld = in.
// y = x W^T transposes to y^T = W x^T, i.e. C (out x tokens) = op(A) op(B) with
// A = the stored W^T taken transposed (CUBLAS_OP_T gives W, out x in) and
// B = the stored x^T as it is (CUBLAS_OP_N, in x tokens): m = out, n = tokens,
// k = in, lda = in, ldb = in, ldc = out.
template <typename T>
void linear(cublasHandle_t handle, const T* x_d, const T* weight_d, T* y_d, std::size_t tokens,
            std::size_t in, std::size_t out) {
  const float alpha =
      1.0f;  // read when the call is made (host pointer mode), so graph capture keeps the values
  const float beta = 0.0f;
  constexpr cudaDataType_t type = Element<T>::kCublasType;
  FERRY_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out),
                                  static_cast<int>(tokens), static_cast<int>(in), &alpha, weight_d, type,
                                  static_cast<int>(in), x_d, type, static_cast<int>(in), &beta, y_d, type,
                                  static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ferry::infer::cuda
