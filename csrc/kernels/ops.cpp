// ops.cpp — validated entry points of zt::ops (ops.h): GEMM, bias, LayerNorm, activations.
// (ops_sequence.cpp: attention, embedding, losses; ops_vector.cpp: residual, scale, cast,
// squared norm, Adam.) Each entry point checks that its arguments are consistent (shapes by
// element count, dtypes, devices — a mismatch is a programming error, so ZT_CHECK), then calls
// dispatch::name (dispatch.h), which runs the CPU kernel or the CUDA launcher.
//
// Shapes are checked by element count, not by dims: a caller may pass [B,T,C] or a flat slice
// of a flat parameter buffer. Row counts come from the per-row tensors (mean, losses) or the
// explicit B/T/C/H arguments; column counts from the per-column tensors (bias, weight).
#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

void gemm(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
          const TensorView& B, float beta, const TensorView& C) {
  ZT_CHECK(M >= 0 && N >= 0 && K >= 0, "ops::gemm: negative dimension");
  check_like(s, A, M * K, A, "gemm", "A");
  check_like(s, B, K * N, A, "gemm", "B");
  check_grad(s, C, M * N, A, "gemm", "C");  // C: A's dtype, or fp32 with 16-bit A and B
  dispatch::gemm(s, trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
}

void bias_add(Stream& s, const TensorView& out, const TensorView& bias) {
  check_tensor(s, out, "bias_add", "out");
  check_tensor(s, bias, "bias_add", "bias");
  check_same(bias, out, "bias_add", "bias");
  check_rows(out, bias.numel(), "bias_add", "out");
  dispatch::bias_add(s, out, bias);
}

void bias_grad(Stream& s, const TensorView& dbias, const TensorView& dout) {
  check_tensor(s, dbias, "bias_grad", "dbias");
  check_tensor(s, dout, "bias_grad", "dout");
  check_grad_dtype(dbias, dout, "bias_grad", "dbias");
  check_rows(dout, dbias.numel(), "bias_grad", "dout");
  dispatch::bias_grad(s, dbias, dout);
}

void layernorm_forward(Stream& s, const TensorView& out, const TensorView& mean, const TensorView& rstd,
                       const TensorView& inp, const TensorView& weight, const TensorView& bias, float eps) {
  const char* op = "layernorm_forward";
  const int64_t C = weight.numel(), N = mean.numel();
  for (auto [t, n, name] : {std::tuple{&out, N * C, "out"}, std::tuple{&inp, N * C, "inp"},
                            std::tuple{&weight, C, "weight"}, std::tuple{&bias, C, "bias"}}) {
    check_like(s, *t, n, inp, op, name);
  }
  check_f32(s, mean, N, op, "mean");
  check_f32(s, rstd, N, op, "rstd");
  ZT_CHECK(eps >= 0.0f, "ops::layernorm_forward: eps must be non-negative");
  dispatch::layernorm_forward(s, out, mean, rstd, inp, weight, bias, eps);
}

void layernorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd) {
  const char* op = "layernorm_backward";
  const int64_t C = weight.numel(), N = mean.numel();
  for (auto [t, n, name] : {std::tuple{&dinp, N * C, "dinp"}, std::tuple{&dout, N * C, "dout"},
                            std::tuple{&inp, N * C, "inp"}, std::tuple{&weight, C, "weight"}}) {
    check_like(s, *t, n, inp, op, name);
  }
  check_grad(s, dweight, C, inp, op, "dweight");
  check_grad(s, dbias, C, inp, op, "dbias");
  check_f32(s, mean, N, op, "mean");
  check_f32(s, rstd, N, op, "rstd");
  dispatch::layernorm_backward(s, dinp, dweight, dbias, dout, inp, weight, mean, rstd);
}

void gelu_forward(Stream& s, const TensorView& out, const TensorView& inp) {
  check_pair(s, "gelu_forward", out, "out", inp, "inp");
  dispatch::gelu_forward(s, out, inp);
}

void gelu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  check_pair(s, "gelu_backward", dinp, "dinp", inp, "inp");
  check_pair(s, "gelu_backward", dinp, "dinp", dout, "dout");
  dispatch::gelu_backward(s, dinp, inp, dout);
}

void relu_forward(Stream& s, const TensorView& out, const TensorView& inp) {
  check_pair(s, "relu_forward", out, "out", inp, "inp");
  dispatch::relu_forward(s, out, inp);
}

void relu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  check_pair(s, "relu_backward", dinp, "dinp", inp, "inp");
  check_pair(s, "relu_backward", dinp, "dinp", dout, "dout");
  dispatch::relu_backward(s, dinp, inp, dout);
}

}  // namespace zt::ops
