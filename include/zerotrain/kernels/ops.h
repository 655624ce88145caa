// ops.h — one entry point per op, the same on both backends (the contract between the
// model layer and the kernels). Each entry point validates its arguments, then dispatches on
// the stream's kind: CPU → csrc/kernels/*.cpp, run on the stream's worker thread (cpu_enqueue);
// CUDA → kernels/*.cu launched on the stream's cudaStream_t.
//
// Conventions
//  * All tensors are row-major, contiguous. Shapes are in the comments: B batch, T time,
//    C channels, H heads, V vocab, N rows (= B*T for token ops).
//  * "act" tensors (activations, params, grads in compute dtype) have dtype F32, BF16 or F16 —
//    every tensor of one call has the same dtype unless stated. Math is fp32 inside.
//  * Grad outputs named d* ACCUMULATE (+=) unless the comment says "overwrites": the engine
//    zeroes gradient storage when it wants fresh gradients (llm.c's convention).
//  * Reductions are deterministic (fixed order, no float atomics): repeated runs are bitwise equal.
#pragma once
#include <cstdint>

#include "zerotrain/core/device.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/math.h"

namespace zt::ops {

// C[M,N] = alpha * op(A) · op(B) + beta * C. op(A) is [M,K] (A stored [K,M] when trans_a),
// op(B) is [K,N] (B stored [N,K] when trans_b). A, B, C same dtype; fp32 accumulation.
void gemm(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const TensorView& A, const TensorView& B, float beta, const TensorView& C);

// out[N,C] += bias[C] (broadcast over rows).
void bias_add(Stream& s, const TensorView& out, const TensorView& bias);
// dbias[C] += sum over rows of dout[N,C].
void bias_grad(Stream& s, const TensorView& dbias, const TensorView& dout);

// LayerNorm over the last dim. out[N,C]; mean[N], rstd[N] are fp32 (saved for backward).
void layernorm_forward(Stream& s, const TensorView& out, const TensorView& mean, const TensorView& rstd,
                       const TensorView& inp, const TensorView& weight, const TensorView& bias, float eps);
// dinp[N,C] +=, dweight[C] +=, dbias[C] +=.
void layernorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd);

// Elementwise activations over n = numel elements. Forward overwrites out; backward: dinp += dout·f'(inp).
void gelu_forward(Stream& s, const TensorView& out, const TensorView& inp);
void gelu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout);
void relu_forward(Stream& s, const TensorView& out, const TensorView& inp);
void relu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout);

// Causal self-attention (GPT-2). qkv[B,T,3C] holds q|k|v, heads of size C/H.
// out[B,T,C] overwrites; att[B,H,T,T] (fp32) saves the softmax probabilities for backward.
void attention_forward(Stream& s, const TensorView& out, const TensorView& att, const TensorView& qkv,
                       int64_t B, int64_t T, int64_t C, int64_t H);
// dqkv[B,T,3C] +=. datt_scratch[B,H,T,T] (fp32) is workspace.
void attention_backward(Stream& s, const TensorView& dqkv, const TensorView& datt_scratch,
                        const TensorView& dout, const TensorView& qkv, const TensorView& att,
                        int64_t B, int64_t T, int64_t C, int64_t H);

// Token + position embedding: out[B,T,C] = wte[tokens[b,t]] + wpe[t] (overwrites).
// tokens[B,T] are int32 on the op's device.
void embedding_forward(Stream& s, const TensorView& out, const int32_t* tokens, const TensorView& wte,
                       const TensorView& wpe, int64_t B, int64_t T, int64_t C);
// dwte[V,C] +=, dwpe[T',C] += (rows 0..T-1). Deterministic (no atomics).
void embedding_backward(Stream& s, const TensorView& dwte, const TensorView& dwpe, const TensorView& dout,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C);

// Fused softmax + cross-entropy over logits[N,V]: losses[N] (fp32) = -log softmax(logits)[target];
// dlogits[N,V] (overwrites, may alias logits) = dloss · (softmax − onehot(target)).
// targets[N] int32 on the op's device; a target < 0 is ignored (loss 0, zero grad).
void softmax_cross_entropy(Stream& s, const TensorView& losses, const TensorView& dlogits,
                           const TensorView& logits, const int32_t* targets, float dloss);
// Mean squared error over pred[N,K] vs target[N,K] (target same dtype): losses[N] (fp32) = mean_k (p−t)²
// per row; dpred[N,K] (overwrites) = dloss · 2 (p − t) / K.
void mse_loss(Stream& s, const TensorView& losses, const TensorView& dpred, const TensorView& pred,
              const TensorView& target, float dloss);

// out = a + b (elementwise, overwrites; out may alias a or b).
void residual_add(Stream& s, const TensorView& out, const TensorView& a, const TensorView& b);
// x *= alpha.
void scale(Stream& s, const TensorView& x, float alpha);
// dst = src converted (RNE), any dtype pair, same numel.
void cast(Stream& s, const TensorView& dst, const TensorView& src);
// *out = sum of src² accumulated in double, in a fixed order (deterministic). `out` points to one
// double on the op's device (overwrites). Non-finite input gives inf/nan.
void squared_norm(Stream& s, double* out, const TensorView& src);

// Adam/AdamW step over n elements of master weights p (F32, or BF16 with
// bf16_master_weights_and_grads), moments m and v (F32, or BF16 when the optimizer states are bf16), and gradient g (fp32 or compute dtype), with g multiplied by
// grad_scale first (folds unscaling and clipping). If param_out is non-empty, it receives the
// updated p cast to its dtype (the compute-dtype copy). See math::adam_update.
void adam_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
               float grad_scale, const math::AdamParams& a, const TensorView& param_out);

}  // namespace zt::ops
