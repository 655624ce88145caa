// ops.cpp — validated entry points of zt::ops (ops.h): GEMM, bias, LayerNorm, activations.
// (ops_sequence.cpp: attention, embedding, losses; ops_vector.cpp: residual, scale, cast,
// squared norm, Adam.) Each entry point checks that its arguments are consistent (shapes by element count, dtypes, devices — a mismatch is a programming error,
// so ZT_CHECK), then dispatches on the stream: CPU → enqueue the cpu_ops implementation on the
// stream's worker thread (views captured by value; the caller keeps the storage, including the
// raw int32/double pointers, alive until the stream has run the op), CUDA → cuda_ops launcher.
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
  for (auto [t, n, name] : {std::tuple{&A, M * K, "A"}, std::tuple{&B, K * N, "B"}, std::tuple{&C, M * N, "C"}}) {
    check_tensor(s, *t, "gemm", name);
    check_numel(*t, n, "gemm", name);
    check_same(*t, C, "gemm", name);
  }
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C); });
  } else {
    ZT_ON_CUDA(cuda_ops::gemm(s, trans_a, trans_b, M, N, K, alpha, A, B, beta, C));
  }
}

void bias_add(Stream& s, const TensorView& out, const TensorView& bias) {
  check_tensor(s, out, "bias_add", "out");
  check_tensor(s, bias, "bias_add", "bias");
  check_same(bias, out, "bias_add", "bias");
  check_rows(out, bias.numel(), "bias_add", "out");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::bias_add(out, bias); });
  } else {
    ZT_ON_CUDA(cuda_ops::bias_add(s, out, bias));
  }
}

void bias_grad(Stream& s, const TensorView& dbias, const TensorView& dout) {
  check_tensor(s, dbias, "bias_grad", "dbias");
  check_tensor(s, dout, "bias_grad", "dout");
  check_same(dout, dbias, "bias_grad", "dout");
  check_rows(dout, dbias.numel(), "bias_grad", "dout");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::bias_grad(dbias, dout); });
  } else {
    ZT_ON_CUDA(cuda_ops::bias_grad(s, dbias, dout));
  }
}

void layernorm_forward(Stream& s, const TensorView& out, const TensorView& mean, const TensorView& rstd,
                       const TensorView& inp, const TensorView& weight, const TensorView& bias, float eps) {
  const char* op = "layernorm_forward";
  const int64_t C = weight.numel(), N = mean.numel();
  for (auto [t, n, name] : {std::tuple{&out, N * C, "out"}, std::tuple{&inp, N * C, "inp"},
                            std::tuple{&weight, C, "weight"}, std::tuple{&bias, C, "bias"}}) {
    check_tensor(s, *t, op, name);
    check_numel(*t, n, op, name);
    check_same(*t, inp, op, name);
  }
  for (auto [t, name] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    check_tensor(s, *t, op, name);
    check_numel(*t, N, op, name);
    check_dtype(*t, DType::F32, op, name);
  }
  ZT_CHECK(eps >= 0.0f, "ops::layernorm_forward: eps must be non-negative");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::layernorm_forward(out, mean, rstd, inp, weight, bias, eps); });
  } else {
    ZT_ON_CUDA(cuda_ops::layernorm_forward(s, out, mean, rstd, inp, weight, bias, eps));
  }
}

void layernorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd) {
  const char* op = "layernorm_backward";
  const int64_t C = weight.numel(), N = mean.numel();
  for (auto [t, n, name] : {std::tuple{&dinp, N * C, "dinp"}, std::tuple{&dout, N * C, "dout"},
                            std::tuple{&inp, N * C, "inp"}, std::tuple{&weight, C, "weight"},
                            std::tuple{&dweight, C, "dweight"}, std::tuple{&dbias, C, "dbias"}}) {
    check_tensor(s, *t, op, name);
    check_numel(*t, n, op, name);
    check_same(*t, inp, op, name);
  }
  for (auto [t, name] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    check_tensor(s, *t, op, name);
    check_numel(*t, N, op, name);
    check_dtype(*t, DType::F32, op, name);
  }
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd); });
  } else {
    ZT_ON_CUDA(cuda_ops::layernorm_backward(s, dinp, dweight, dbias, dout, inp, weight, mean, rstd));
  }
}


void gelu_forward(Stream& s, const TensorView& out, const TensorView& inp) {
  check_pair(s, "gelu_forward", out, "out", inp, "inp");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::gelu_forward(out, inp); });
  } else {
    ZT_ON_CUDA(cuda_ops::gelu_forward(s, out, inp));
  }
}

void gelu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  check_pair(s, "gelu_backward", dinp, "dinp", inp, "inp");
  check_pair(s, "gelu_backward", dinp, "dinp", dout, "dout");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::gelu_backward(dinp, inp, dout); });
  } else {
    ZT_ON_CUDA(cuda_ops::gelu_backward(s, dinp, inp, dout));
  }
}

void relu_forward(Stream& s, const TensorView& out, const TensorView& inp) {
  check_pair(s, "relu_forward", out, "out", inp, "inp");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::relu_forward(out, inp); });
  } else {
    ZT_ON_CUDA(cuda_ops::relu_forward(s, out, inp));
  }
}

void relu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  check_pair(s, "relu_backward", dinp, "dinp", inp, "inp");
  check_pair(s, "relu_backward", dinp, "dinp", dout, "dout");
  if (s.kind() == DeviceKind::CPU) {
    cpu_enqueue(s, [=] { cpu_ops::relu_backward(dinp, inp, dout); });
  } else {
    ZT_ON_CUDA(cuda_ops::relu_backward(s, dinp, inp, dout));
  }
}

}  // namespace zt::ops
