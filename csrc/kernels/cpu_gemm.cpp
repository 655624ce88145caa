// cpu_gemm.cpp — GEMM on the CPU backend: OpenBLAS sgemm, row-major.
// fp32 runs sgemm in place. bf16/fp16 operands are widened to fp32 scratch (exact), multiplied
// with fp32 accumulation, and rounded back once (RNE) — the same contract as cuBLAS with
// bf16/fp16 inputs and CUBLAS_COMPUTE_32F.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

// Per-thread fp32 scratch for widened operands; grows to the largest call and is reused.
std::vector<float>& scratch(int slot) {
  thread_local std::vector<float> buffers[3];
  return buffers[slot];
}

template <typename T>
const float* widen(const T* src, int64_t n, int slot) {
  std::vector<float>& buf = scratch(slot);
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) buf[i] = to_f32(src[i]);
  return buf.data();
}

// Whether cblas_sgemm with beta == 0 overwrites C without reading it (NaN in C does not reach
// the result). OpenBLAS does (its beta kernel stores zeros, its small-matrix kernels never read
// C), which saves a zero-fill pass over C per GEMM; a BLAS that scales by zero would keep NaN, so
// this is probed once, with NaN-filled C, on a small shape (small-matrix kernels) and on one
// that takes the blocked driver (beta kernel + packed GEMM), each transpose combination.
bool blas_beta0_overwrites() {
  static const bool ok = [] {
    for (const int n : {3, 67}) {
      std::vector<float> a(static_cast<size_t>(n * n), 1.0f), b(a), c(a.size());
      for (int t = 0; t < 4; ++t) {
        std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
        cblas_sgemm(CblasRowMajor, t & 1 ? CblasTrans : CblasNoTrans, t & 2 ? CblasTrans : CblasNoTrans, n, n, n,
                    1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        for (float v : c) {
          if (v != static_cast<float>(n)) return false;
        }
      }
    }
    return true;
  }();
  return ok;
}

// C[M,N] = alpha op(A) op(B) + beta C, all fp32, row-major. beta == 0 never reads C.
void sgemm_rowmajor(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    const float* B, float beta, float* C) {
  if (K == 0) {  // empty inner product: C = beta C (beta == 0 writes zeros, even over NaN)
    for (int64_t i = 0; i < M * N; ++i) C[i] = beta == 0.0f ? 0.0f : beta * C[i];
    return;
  }
  ZT_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX, "gemm dimensions exceed the BLAS int range");
  const int lda = static_cast<int>(ta ? M : K);  // A stored [K,M] when transposed, else [M,K]
  const int ldb = static_cast<int>(tb ? K : N);  // B stored [N,K] when transposed, else [K,N]
  if (beta == 0.0f && !blas_beta0_overwrites()) {
    // This BLAS treats beta == 0 as "scale by zero", which keeps NaN/inf; the contract is overwrite.
    for (int64_t i = 0; i < M * N; ++i) C[i] = 0.0f;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, lda, B, ldb, beta, C, static_cast<int>(N));
}

template <typename T>
void gemm_typed(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const T* A, const T* B, float beta,
                T* C) {
  const float* a32 = widen(A, M * K, 0);
  const float* b32 = widen(B, K * N, 1);
  std::vector<float>& c32 = scratch(2);
  if (static_cast<int64_t>(c32.size()) < M * N) c32.resize(static_cast<size_t>(M * N));
  if (beta != 0.0f) widen(C, M * N, 2);
  sgemm_rowmajor(ta, tb, M, N, K, alpha, a32, b32, beta, c32.data());
  const int64_t n = M * N;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) C[i] = from_f32<T>(c32[i]);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
          const TensorView& B, float beta, const TensorView& C) {
  if (M == 0 || N == 0) return;
  if (C.dtype == DType::F32) {
    sgemm_rowmajor(trans_a, trans_b, M, N, K, alpha, static_cast<const float*>(A.data),
                   static_cast<const float*>(B.data), beta, static_cast<float*>(C.data));
    return;
  }
  dispatch_dtype(C.dtype, [&](auto tag) {
    using T = decltype(tag);
    gemm_typed(trans_a, trans_b, M, N, K, alpha, static_cast<const T*>(A.data), static_cast<const T*>(B.data), beta,
               static_cast<T*>(C.data));
  });
}

}  // namespace zt::cpu_ops
