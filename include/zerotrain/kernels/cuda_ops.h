// cuda_ops.h — CUDA launchers behind ops.h (kernels/*.cu). Same signatures and semantics as
// zt::ops; arguments are already validated by the entry points in csrc/kernels/ops.cpp, which
// call these when the stream is a CUDA stream. Built only with the CUDA backend.
#pragma once
#include "zerotrain/kernels/ops.h"

#if defined(ZT_WITH_CUDA)
namespace zt::cuda_ops {

void gemm(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const TensorView& A, const TensorView& B, float beta, const TensorView& C);
void bias_add(Stream& s, const TensorView& out, const TensorView& bias);
void bias_grad(Stream& s, const TensorView& dbias, const TensorView& dout);
void layernorm_forward(Stream& s, const TensorView& out, const TensorView& mean, const TensorView& rstd,
                       const TensorView& inp, const TensorView& weight, const TensorView& bias, float eps);
void layernorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd);
void gelu_forward(Stream& s, const TensorView& out, const TensorView& inp);
void gelu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout);
void relu_forward(Stream& s, const TensorView& out, const TensorView& inp);
void relu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout);
void attention_forward(Stream& s, const TensorView& out, const TensorView& att, const TensorView& qkv,
                       int64_t B, int64_t T, int64_t C, int64_t H);
void attention_backward(Stream& s, const TensorView& dqkv, const TensorView& datt_scratch,
                        const TensorView& dout, const TensorView& qkv, const TensorView& att,
                        int64_t B, int64_t T, int64_t C, int64_t H);
void embedding_forward(Stream& s, const TensorView& out, const int32_t* tokens, const TensorView& wte,
                       const TensorView& wpe, int64_t B, int64_t T, int64_t C);
void embedding_backward(Stream& s, const TensorView& dwte, const TensorView& dwpe, const TensorView& dout,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C);
void softmax_cross_entropy(Stream& s, const TensorView& losses, const TensorView& dlogits,
                           const TensorView& logits, const int32_t* targets, float dloss);
void mse_loss(Stream& s, const TensorView& losses, const TensorView& dpred, const TensorView& pred,
              const TensorView& target, float dloss);
void residual_add(Stream& s, const TensorView& out, const TensorView& a, const TensorView& b);
void scale(Stream& s, const TensorView& x, float alpha);
void cast(Stream& s, const TensorView& dst, const TensorView& src);
void squared_norm(Stream& s, double* out, const TensorView& src);
void adam_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
               float grad_scale, const math::AdamParams& a, const TensorView& param_out);

// Per-stream resources the launchers keep (kernels/stream_resources.cu): a cuBLAS handle with
// a 32 MiB private workspace per stream that ran a GEMM, and a growable scratch buffer per
// stream (two-pass reductions, attention's 16-bit probabilities, the embedding sort). These
// bytes are not in the Device's MemoryTracker; the memory report can add them from here.
size_t workspace_bytes();
// Drains each cached stream and frees every handle and buffer above (e.g. before a memory
// measurement or at shutdown). Must not race with ops being issued.
void release_workspaces();
// Frees the resources of one stream now (after draining it); they are recreated on the
// next op. Destroying a CUDA stream does this by itself (the release hook in core/device.h).
void release_stream_resources(Stream& s);

}  // namespace zt::cuda_ops
#endif
