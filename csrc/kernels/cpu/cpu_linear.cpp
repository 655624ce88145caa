// cpu_linear.cpp — the fused linear ops on the CPU backend (op_list.h: linear_forward,
// linear_backward). The fused path does one pass fewer per layer than gemm + bias_add + gelu.
//  forward:  the GEMM's C starts as the bias in every row and accumulates onto it with beta = 1
//            (no zero-fill, no separate bias pass; on the widened 16-bit path the rows start in
//            its fp32 scratch); GELU runs row by row on the GEMM's output (gemm_then_rows: on the
//            widened 16-bit path each row right after it is rounded, while it is in cache),
//            vec::gelu_forward, bitwise math::gelu.
//  backward: dW sgemm (beta 1), the bias column sums (bias_grad), dinp sgemm (beta 0; on the
//            widened path dout is widened once for both GEMMs, WidenReuse) and, when the input
//            was gelu(pre), the GELU backward in place over dinp's rows as the GEMM writes them
//            (no separate dx buffer, no zero pass over a second one). Bitwise equal to the old
//            sequence gemm → zero(d) → gelu_backward(d, pre, dx) (0 + dx·g' in both).

#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {
namespace {

// Elements per piece of a 16-bit row taken through fp32 (whole SIMD blocks; elementwise, so the
// split changes no result).
constexpr int64_t kPiece = 1 << 10;
static_assert(kPiece % vec::kBlock == 0, "pieces start on whole blocks");

// Per-thread fp32 buffers for a 16-bit row piece (written before read).
float* piece_buffer(int which) {
  thread_local std::vector<float> buffers[2] = {std::vector<float>(kPiece), std::vector<float>(kPiece)};
  return buffers[which].data();
}

// Over rows [i0, i1) of n elements: forward, y[i] = gelu(x[i]); backward, in place,
// y[i] = 0 + y[i] · gelu_grad(x[i]) (y is dx, x the pre-activation). vec::gelu_forward and
// vec::gelu_backward_inplace, bitwise math::gelu / math::gelu_grad; 16-bit rows through fp32
// pieces, rounded once.
template <typename T>
void gelu_rows(const vec::Kernels& k, bool backward, T* y, const T* x, int64_t n, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    T* yr = y + i * n;
    const T* xr = x + i * n;
    if constexpr (std::is_same_v<T, float>) {
      if (backward) vec::gelu_backward_inplace(k, yr, xr, n);
      else vec::gelu_forward(k, yr, xr, n);
    } else {
      float *yb = piece_buffer(0), *xb = piece_buffer(1);
      for (int64_t b = 0; b < n; b += kPiece) {
        const int64_t len = std::min(kPiece, n - b);
        widen_n(k, xr + b, xb, len);
        if (backward) {
          widen_n(k, yr + b, yb, len);
          vec::gelu_backward_inplace(k, yb, xb, len);
        } else {
          vec::gelu_forward(k, yb, xb, len);
        }
        narrow_n(k, yb, yr + b, len);
      }
    }
  }
}

// C[M,N] = A[M,K]·op(B) (+ bias rows), then gelu_rows over C's rows as the GEMM writes them:
// forward, gelu_out = gelu(C); backward, C ·= gelu'(pre) in place.
void gemm_gelu(bool backward, bool trans_b, int64_t M, int64_t N, int64_t K, const TensorView& A,
               const TensorView& B, const TensorView& bias, const TensorView& C, const TensorView& gelu_out,
               const TensorView& pre) {
  const vec::Kernels& k = vec::active();
  dispatch_dtype(C.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = static_cast<T*>(backward ? C.data : gelu_out.data);
    const T* x = static_cast<const T*>(backward ? pre.data : C.data);
    gemm_then_rows(false, trans_b, M, N, K, A, B, bias, C,
                   [&](int64_t i0, int64_t i1) { gelu_rows(k, backward, y, x, N, i0, i1); });
  });
}

}  // namespace

void linear_forward(const TensorView& out, const TensorView& pre, const TensorView& inp, const TensorView& weight,
                    const TensorView& bias, int64_t N, int64_t IC, int64_t OC, bool trans_w, bool gelu) {
  if (N == 0 || OC == 0) return;
  // y[N,OC] = inp[N,IC] · W (+ b in every row): W stored [IC,OC], or [OC,IC] when trans_w.
  if (!gelu) {
    if (bias.data != nullptr) gemm_bias_rows(false, trans_w, N, OC, IC, inp, weight, bias, out);
    else gemm(false, trans_w, N, OC, IC, 1.0f, inp, weight, 0.0f, out);
    return;
  }
  gemm_gelu(false, trans_w, N, OC, IC, inp, weight, bias, pre, out, {});  // pre = x·W + b, out = gelu(pre)
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
  if (gelu_pre.data == nullptr) {
    gemm(false, !trans_w, N, IC, OC, 1.0f, dout, weight, 0.0f, dinp);
    return;
  }
  gemm_gelu(true, !trans_w, N, IC, OC, dout, weight, {}, dinp, {}, gelu_pre);  // dinp ·= gelu'(pre)
}

}  // namespace zt::cpu_ops
