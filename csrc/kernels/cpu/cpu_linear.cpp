// cpu_linear.cpp — the fused linear ops on the CPU backend (op_list.h: linear_forward,
// linear_backward). The fused path does one pass fewer per layer than gemm + bias_add + gelu.
//  forward:  the GEMM's C starts as the bias in every row and accumulates onto it with beta = 1
//            (gemm_bias_rows: no zero-fill, no separate bias pass; on the widened 16-bit path the
//            rows start in its fp32 scratch); GELU in one SIMD pass (vec::gelu_forward, bitwise
//            math::gelu).
//  backward: dW sgemm (beta 1), the bias column sums (bias_grad), dinp sgemm (beta 0; on the
//            widened path dout is widened once for both GEMMs, WidenReuse) and, when
//            the input was gelu(pre), the GELU backward in place over dinp in one SIMD pass
//            (no separate dx buffer, no zero pass over a second one). Bitwise equal to the old
//            sequence gemm → zero(d) → gelu_backward(d, pre, dx) (0 + dx·g' in both).

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {
namespace {

// Elements per task of the in-place GELU backward (a multiple of vec::kBlock). Elementwise: the
// split does not change any result.
constexpr int64_t kChunk = 1 << 12;
static_assert(kChunk % vec::kBlock == 0, "tasks start on whole blocks");

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

// The same for 16-bit d and x, a chunk at a time through fp32 buffers (bitwise the per-element
// from_f32(0 + to_f32(d) · gelu_grad(to_f32(x)))).
template <typename T>
void gelu_backward_inplace(T* d, const T* x, int64_t n) {
  const vec::Kernels& k = vec::active();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, len = (b + kChunk < n ? b + kChunk : n) - b;
    float dd[kChunk], xx[kChunk];
    widen_n(k, d + b, dd, len);
    widen_n(k, x + b, xx, len);
    vec::gelu_backward_inplace(k, dd, xx, len);
    narrow_n(k, dd, d + b, len);
  }
}

}  // namespace

void linear_forward(const TensorView& out, const TensorView& pre, const TensorView& inp, const TensorView& weight,
                    const TensorView& bias, int64_t N, int64_t IC, int64_t OC, bool trans_w, bool gelu) {
  if (N == 0 || OC == 0) return;
  const TensorView& y = gelu ? pre : out;  // where x·W + b lands
  // y[N,OC] = inp[N,IC] · W (+ b in every row): W stored [IC,OC], or [OC,IC] when trans_w.
  if (bias.data != nullptr) gemm_bias_rows(false, trans_w, N, OC, IC, inp, weight, bias, y);
  else gemm(false, trans_w, N, OC, IC, 1.0f, inp, weight, 0.0f, y);
  if (gelu) gelu_forward(out, pre);
}

void linear_backward(const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                     const TensorView& dout, const TensorView& inp, const TensorView& weight,
                     const TensorView& gelu_pre, int64_t N, int64_t IC, int64_t OC, bool trans_w) {
  if (IC == 0 || OC == 0) return;
  const WidenReuse reuse;  // dout, widened for the dW GEMM, serves the dinp GEMM too (nothing writes it here)
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

}  // namespace zt::cpu_ops
