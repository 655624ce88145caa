// cpu_linear.cpp — the fused linear ops on the CPU backend (op_list.h: linear_forward,
// linear_backward). Issue 16's lever: one pass fewer per layer than gemm + bias_add + gelu.
//  forward:  the bias is copied into every output row, then sgemm with beta = 1 accumulates onto
//            it (no zero-fill of C inside OpenBLAS, no separate bias pass); GELU in one SIMD pass
//            (vec::gelu_forward, bitwise math::gelu).
//  backward: dW sgemm (beta 1), the bias column sums (bias_grad), dinp sgemm (beta 0) and, when
//            the input was gelu(pre), the GELU backward in place over dinp in one SIMD pass
//            (no separate dx buffer, no zero pass over a second one). Bitwise equal to the old
//            sequence gemm → zero(d) → gelu_backward(d, pre, dx) (0 + dx·g' in both).
// Also gemm_ld (the padded LM head's strided GEMM): sgemm with the given row strides.
#include <cblas.h>

#include <climits>
#include <cstring>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {
namespace {

// Elements per task of the in-place GELU backward (a multiple of vec::kBlock). Elementwise: the
// split does not change any result.
constexpr int64_t kChunk = 1 << 12;
static_assert(kChunk % vec::kBlock == 0, "tasks start on whole blocks");

// y[N,OC] = bias broadcast over rows (the sgemm's beta = 1 starting value). T is the storage type.
template <typename T>
void fill_bias_rows(T* y, const T* bias, int64_t N, int64_t OC) {
#pragma omp parallel for schedule(static) if (N * OC > kParallelGrain)
  for (int64_t i = 0; i < N; ++i) std::memcpy(y + i * OC, bias, static_cast<size_t>(OC) * sizeof(T));
}

// d[i] = 0 + d[i] · math::gelu_grad(x[i]) over n elements, in place (fp32, SIMD, one pass).
void gelu_backward_inplace_f32(float* d, const float* x, int64_t n) {
  const vec::Kernels& k = vec::active();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, len = (b + kChunk < n ? b + kChunk : n) - b;
    vec::gelu_backward_inplace(k, d + b, x + b, len);
  }
}

template <typename T>
void gelu_backward_inplace(T* d, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) d[i] = from_f32<T>(0.0f + to_f32(d[i]) * math::gelu_grad(to_f32(x[i])));
}

}  // namespace

void linear_forward(const TensorView& out, const TensorView& pre, const TensorView& inp, const TensorView& weight,
                    const TensorView& bias, int64_t N, int64_t IC, int64_t OC, bool trans_w, bool gelu) {
  if (N == 0 || OC == 0) return;
  const TensorView& y = gelu ? pre : out;  // where x·W + b lands
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    dispatch_dtype(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      fill_bias_rows(static_cast<T*>(y.data), static_cast<const T*>(bias.data), N, OC);
    });
  }
  // y[N,OC] = inp[N,IC] · W (+ y): W stored [IC,OC], or [OC,IC] when trans_w.
  gemm(false, trans_w, N, OC, IC, 1.0f, inp, weight, has_bias ? 1.0f : 0.0f, y);
  if (gelu) gelu_forward(out, pre);
}

void linear_backward(const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                     const TensorView& dout, const TensorView& inp, const TensorView& weight,
                     const TensorView& gelu_pre, int64_t N, int64_t IC, int64_t OC, bool trans_w) {
  if (IC == 0 || OC == 0) return;
  // dW += inpᵀ·dout ([IC,OC]) or doutᵀ·inp ([OC,IC]); K = N (N == 0 leaves dW unchanged).
  if (!trans_w) gemm(true, false, IC, OC, N, 1.0f, inp, dout, 1.0f, dweight);
  else gemm(true, false, OC, IC, N, 1.0f, dout, inp, 1.0f, dweight);
  if (dbias.data != nullptr) bias_grad(dbias, dout);
  if (dinp.data == nullptr || N == 0) return;
  // dinp[N,IC] = dout[N,OC] · Wᵀ: W [IC,OC] is used transposed, [OC,IC] as is.
  gemm(false, !trans_w, N, IC, OC, 1.0f, dout, weight, 0.0f, dinp);
  if (gelu_pre.data == nullptr) return;
  const int64_t n = N * IC;
  if (dinp.dtype == DType::F32) {
    gelu_backward_inplace_f32(static_cast<float*>(dinp.data), static_cast<const float*>(gelu_pre.data), n);
    return;
  }
  dispatch_dtype(dinp.dtype, [&](auto tag) {
    using T = decltype(tag);
    gelu_backward_inplace(static_cast<T*>(dinp.data), static_cast<const T*>(gelu_pre.data), n);
  });
}

void gemm_ld(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
             int64_t lda, const TensorView& B, int64_t ldb, float beta, const TensorView& C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  ZT_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX,
           "gemm_ld dimensions exceed the BLAS int range");
  // C[M,N] (row stride ldc) in fp32: C itself for F32, else a widened copy rounded back below.
  const bool f32 = C.dtype == DType::F32;
  std::vector<float> a32, b32, c32;
  auto widen = [](const TensorView& t, std::vector<float>& dst) {
    dst.resize(static_cast<size_t>(t.numel()));
    dispatch_dtype(t.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(t.data);
      for (int64_t i = 0; i < t.numel(); ++i) dst[i] = to_f32(p[i]);
    });
    return dst.data();
  };
  const float* a = f32 ? static_cast<const float*>(A.data) : widen(A, a32);
  const float* b = f32 ? static_cast<const float*>(B.data) : widen(B, b32);
  float* c = f32 ? static_cast<float*>(C.data) : (beta != 0.0f ? widen(C, c32) : (c32.resize(C.numel()), c32.data()));
  if (beta == 0.0f) {  // overwrite without reading C (NaN in C must not survive), only the M×N block
    for (int64_t i = 0; i < M; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(N) * sizeof(float));
  }
  if (K > 0) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, a, static_cast<int>(lda), b,
                static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  } else if (beta != 0.0f && beta != 1.0f) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] *= beta;
  }
  if (f32) return;
  dispatch_dtype(C.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(C.data);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) out[i * ldc + j] = from_f32<T>(c[i * ldc + j]);
  });
}

}  // namespace zt::cpu_ops
