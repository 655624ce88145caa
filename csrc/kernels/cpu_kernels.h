// cpu_kernels.h — the CPU backend's op implementations (private to csrc/kernels).
// Same semantics as zt::ops (ops.h) minus the stream: each function runs synchronously on the
// calling thread (the CpuStream worker, via ops.cpp) on host memory. Arguments are already
// validated by the entry points in ops.cpp; these functions only ZT_CHECK data-dependent
// invariants (token / target ids in range).
//
// Determinism: every reduction has an order fixed by the shapes alone (never by the OpenMP
// thread count), so repeated runs — with any OMP_NUM_THREADS — are bitwise equal.
#pragma once
#include <cstdint>

#include "zerotrain/core/check.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/math.h"

namespace zt::cpu_ops {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
          const TensorView& B, float beta, const TensorView& C);
void bias_add(const TensorView& out, const TensorView& bias);
void bias_grad(const TensorView& dbias, const TensorView& dout);
void layernorm_forward(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                       const TensorView& inp, const TensorView& weight, const TensorView& bias, float eps);
void layernorm_backward(const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd);
void gelu_forward(const TensorView& out, const TensorView& inp);
void gelu_backward(const TensorView& dinp, const TensorView& inp, const TensorView& dout);
void relu_forward(const TensorView& out, const TensorView& inp);
void relu_backward(const TensorView& dinp, const TensorView& inp, const TensorView& dout);
void attention_forward(const TensorView& out, const TensorView& att, const TensorView& qkv, int64_t B, int64_t T,
                       int64_t C, int64_t H);
void attention_backward(const TensorView& dqkv, const TensorView& datt_scratch, const TensorView& dout,
                        const TensorView& qkv, const TensorView& att, int64_t B, int64_t T, int64_t C, int64_t H);
void embedding_forward(const TensorView& out, const int32_t* tokens, const TensorView& wte, const TensorView& wpe,
                       int64_t B, int64_t T, int64_t C);
void embedding_backward(const TensorView& dwte, const TensorView& dwpe, const TensorView& dout,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C);
void softmax_cross_entropy(const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                           const int32_t* targets, float dloss);
void mse_loss(const TensorView& losses, const TensorView& dpred, const TensorView& pred, const TensorView& target,
              float dloss);
void residual_add(const TensorView& out, const TensorView& a, const TensorView& b);
void scale(const TensorView& x, float alpha);
void cast(const TensorView& dst, const TensorView& src);
void squared_norm(double* out, const TensorView& src);
void adam_step(const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
               float grad_scale, const math::AdamParams& a, const TensorView& param_out);

// Calls f(T{}) with T the storage type of `t` (float, bf16, fp16).
template <typename F>
void dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(bf16{}); return;
    case DType::F16: f(fp16{}); return;
  }
  ZT_CHECK(false, "unknown dtype");
}

// OpenMP regions only pay off above this many elements of work.
constexpr int64_t kParallelGrain = 1 << 14;

}  // namespace zt::cpu_ops
