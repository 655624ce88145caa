// gemm.cu — GEMM on cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F: bf16/fp16/fp32
// inputs, fp32 accumulation, no TF32), with row-major operands mapped onto column-major cuBLAS.
//
// Mapping: a row-major X[r,c] with row stride L is the column-major X^T with leading dim L.
// So row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: call cuBLAS with the
// operands swapped (B first), m = N, n = M, and each operand's transpose flag kept as given.
#include <cublas_v2.h>

#include <climits>

#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/core/cublas_api.h"

namespace zt::cuda_detail {

namespace {
cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}
int as_int(int64_t v, const char* what) {
  ZT_CHECK(v >= 0 && v <= INT_MAX, std::string("gemm: ") + what + " does not fit cuBLAS's int: " + std::to_string(v));
  return static_cast<int>(v);
}
}  // namespace

void gemm_rowmajor(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const void* A, int64_t lda, int64_t strideA, const void* B, int64_t ldb, int64_t strideB,
                   DType ab_type, float beta, void* C, int64_t ldc, int64_t strideC, DType c_type,
                   int64_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  auto handle = static_cast<cublasHandle_t>(cublas_handle(s));
  cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZT_CHECK(K > 0, "gemm_rowmajor: K must be positive (ops::gemm handles K == 0)");
  if (batch == 1) {
    ZT_CUBLAS_CHECK(cublas_api().cublasGemmEx(handle, op_b, op_a, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"), &alpha,
                                 B, cuda_type(ab_type), as_int(ldb, "ldb"), A, cuda_type(ab_type), as_int(lda, "lda"),
                                 &beta, C, cuda_type(c_type), as_int(ldc, "ldc"), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return;
  }
  ZT_CUBLAS_CHECK(cublas_api().cublasGemmStridedBatchedEx(
      handle, op_b, op_a, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"), &alpha,
      B, cuda_type(ab_type), as_int(ldb, "ldb"), strideB,
      A, cuda_type(ab_type), as_int(lda, "lda"), strideA, &beta,
      C, cuda_type(c_type), as_int(ldc, "ldc"), strideC, as_int(batch, "batch"),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace zt::cuda_detail

namespace zt::cuda_ops {

void gemm(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const TensorView& A, const TensorView& B, float beta, const TensorView& C) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // BLAS semantics: C = beta C, and beta == 0 clears C without reading it
    if (beta == 0.0f) {
      ZT_CUDA_CHECK(cudaMemsetAsync(C.data, 0, C.nbytes(), cuda_detail::native(s)));  // 0.0 is all-zero bits
    } else if (beta != 1.0f) {
      scale(s, C, beta);
    }
    return;
  }
  // Stored row strides: A is [M,K] (or [K,M] when trans_a), B is [K,N] (or [N,K] when trans_b).
  int64_t lda = trans_a ? M : K;
  int64_t ldb = trans_b ? K : N;
  cuda_detail::gemm_rowmajor(s, trans_a, trans_b, M, N, K, alpha, A.data, lda, 0, B.data, ldb, 0, A.dtype,
                             beta, C.data, N, 0, C.dtype, 1);
}

}  // namespace zt::cuda_ops
