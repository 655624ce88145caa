// op_list.h — every op, declared once. An X-macro list with no include guard: a header defines
// ZT_OP and/or ZT_ENGINE_OP, includes this file, and gets one expansion per entry (both macros
// are #undef'd at the end; an undefined one expands to nothing). Expansions:
//   ops.h       zt::ops::name(Stream& s, params)        validated entry points (ZT_OP only)
//   zero_ops.h  zt::zero_ops::name(Stream& s, params)   validated entry points (ZT_ENGINE_OP only)
//   cpu_ops.h   zt::cpu_ops::name params                CPU kernels, run on the stream's worker
//   cuda_ops.h  zt::cuda_ops::name(Stream& s, params)   CUDA launchers, enqueue on s
//   dispatch.h  zt::dispatch::name(Stream& s, params)   the backend switch the entry points call
//
// Entry: ZT_OP(name, (parameters after the stream), (the same parameters' names, in order)).
// Adding an op: an entry here, its CPU kernel (csrc/kernels/cpu/cpu_*.cpp), its CUDA launcher
// (csrc/kernels/cuda/*.cu), and its entry point (csrc/kernels/ops*.cpp): argument checks, then
// dispatch::name(s, args). Conventions shared by every op are in ops.h.

// Defined once per translation unit: prepend the stream to a parameter / argument list.
#ifndef ZT_STREAM_PARAMS
#define ZT_STREAM_PARAMS(...) (Stream& s, __VA_ARGS__)
#define ZT_STREAM_ARGS(...) (s, __VA_ARGS__)
#endif

#ifndef ZT_OP
#define ZT_OP(name, params, args)
#endif
#ifndef ZT_ENGINE_OP
#define ZT_ENGINE_OP(name, params, args)
#endif

// ---- Kernel ops: zt::ops (ops.h), entry points in csrc/kernels/ops*.cpp ----

// C[M,N] = alpha * op(A) · op(B) + beta * C. op(A) is [M,K] (A stored [K,M] when trans_a),
// op(B) is [K,N] (B stored [N,K] when trans_b). A and B share a dtype; C has it too, or is fp32
// with 16-bit A and B (a 16-bit-input, fp32-output GEMM: weight gradients accumulated straight
// into fp32). fp32 accumulation.
ZT_OP(gemm,
      (bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
       const TensorView& B, float beta, const TensorView& C),
      (trans_a, trans_b, M, N, K, alpha, A, B, beta, C))

// out[N,C] += bias[C] (broadcast over rows).
ZT_OP(bias_add, (const TensorView& out, const TensorView& bias), (out, bias))
// dbias[C] += sum over rows of dout[N,C]; dbias has dout's dtype or fp32 (a parameter gradient).
ZT_OP(bias_grad, (const TensorView& dbias, const TensorView& dout), (dbias, dout))

// Fused linear layer (csrc/kernels/cuda/linear.cu on CUDA: cuBLASLt epilogues where linear_plan.h allows,
// else GEMM + the bias / GELU kernels). inp[N,IC]; weight stored [IC,OC] (Conv1D, y = inp·W) or,
// when trans_w, [OC,IC] (nn.Linear, y = inp·Wᵀ); bias[OC], or absent (TensorView{}: no storage) for
// no bias. All tensors have inp's dtype.
//  gelu false: out[N,OC] = y = inp·W + bias (overwrites); pre must be absent.
//  gelu true:  pre[N,OC] = y (overwrites; saved for backward), out[N,OC] = math::gelu(y) (overwrites).
// The bias enters before the products (CPU: sgemm onto the broadcast bias), so the rounding
// differs from gemm + bias_add in the last bits.
ZT_OP(linear_forward,
      (const TensorView& out, const TensorView& pre, const TensorView& inp, const TensorView& weight,
       const TensorView& bias, int64_t N, int64_t IC, int64_t OC, bool trans_w, bool gelu),
      (out, pre, inp, weight, bias, N, IC, OC, trans_w, gelu))
// Backward of linear_forward without its own GELU (that one is the previous layer's, below):
//  dweight (weight's layout) += inpᵀ·dout (ACCUMULATES);
//  dbias[OC] += Σ rows dout (ACCUMULATES; absent: no bias);
//  dweight and dbias are parameter gradients: inp's dtype, or fp32 with 16-bit inp (accumulated
//  straight into fp32, rounded once per call);
//  dinp[N,IC] = dout·Wᵀ (OVERWRITES; absent: not computed). When gelu_pre[N,IC] is present
//  (this layer's input was gelu(gelu_pre)), dinp = (dout·Wᵀ) ⊙ math::gelu_grad(gelu_pre) instead
//  (OVERWRITES): the gradient with respect to gelu_pre.
ZT_OP(linear_backward,
      (const TensorView& dinp, const TensorView& dweight, const TensorView& dbias, const TensorView& dout,
       const TensorView& inp, const TensorView& weight, const TensorView& gelu_pre, int64_t N, int64_t IC,
       int64_t OC, bool trans_w),
      (dinp, dweight, dbias, dout, inp, weight, gelu_pre, N, IC, OC, trans_w))

// gemm with explicit row strides (the padded LM head, zerotrain/model/vocab_pad.h): C[M,N] =
// alpha op(A)·op(B) + beta C (dtypes as gemm's) where A's stored rows are lda apart (A stored [M,K] or, when
// trans_a, [K,M]; lda >= its column count), B's ldb, C's ldc >= N. Each view holds its stored
// rows × ld elements; elements past the logical columns are neither read (A, B) nor written (C).
ZT_OP(gemm_ld,
      (bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A, int64_t lda,
       const TensorView& B, int64_t ldb, float beta, const TensorView& C, int64_t ldc),
      (trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))

// LayerNorm over the last dim. out[N,C]; mean[N], rstd[N] are fp32 (saved for backward).
ZT_OP(layernorm_forward,
      (const TensorView& out, const TensorView& mean, const TensorView& rstd, const TensorView& inp,
       const TensorView& weight, const TensorView& bias, float eps),
      (out, mean, rstd, inp, weight, bias, eps))
// dinp[N,C] +=, dweight[C] +=, dbias[C] += (dweight, dbias: inp's dtype or fp32).
ZT_OP(layernorm_backward,
      (const TensorView& dinp, const TensorView& dweight, const TensorView& dbias, const TensorView& dout,
       const TensorView& inp, const TensorView& weight, const TensorView& mean, const TensorView& rstd),
      (dinp, dweight, dbias, dout, inp, weight, mean, rstd))

// RMSNorm over the last dim (Llama): out[N,C] = inp · rstd · weight, where rstd[N] (fp32, saved
// for backward, overwrites) = 1 / sqrt(mean over C of inp² + eps), all in fp32. out overwrites.
ZT_OP(rmsnorm_forward,
      (const TensorView& out, const TensorView& rstd, const TensorView& inp, const TensorView& weight, float eps),
      (out, rstd, inp, weight, eps))
// dinp[N,C] +=, dweight[C] += (deterministic: dweight sums rows in a fixed order; dweight: inp's
// dtype or fp32).
ZT_OP(rmsnorm_backward,
      (const TensorView& dinp, const TensorView& dweight, const TensorView& dout, const TensorView& inp,
       const TensorView& weight, const TensorView& rstd),
      (dinp, dweight, dout, inp, weight, rstd))

// Rotary position embedding, Hugging Face's rotate-half convention, IN PLACE on x[B,T,nh·hs]
// (nh heads of hs channels, hs even). table[Tmax,hs] (fp32) holds per position p the row
// cos(p·f_0) .. cos(p·f_{hs/2-1}) | sin(p·f_0) .. sin(p·f_{hs/2-1}) (zerotrain/model/rope.h builds
// it). For row t of each sequence, position p = pos + t (pos + T <= Tmax), and for i < hs/2 with
// x1 = x[i], x2 = x[i + hs/2], c = cos(p·f_i), s = sin(p·f_i), in fp32:
//   forward:  x1 <- x1·c − x2·s,  x2 <- x2·c + x1·s
// rope_backward applies the transpose to a gradient dx of the same layout, in place:
//   backward: dx1 <- dx1·c + dx2·s,  dx2 <- dx2·c − dx1·s
ZT_OP(rope_forward,
      (const TensorView& x, const TensorView& table, int64_t B, int64_t T, int64_t nh, int64_t hs, int64_t pos),
      (x, table, B, T, nh, hs, pos))
ZT_OP(rope_backward,
      (const TensorView& dx, const TensorView& table, int64_t B, int64_t T, int64_t nh, int64_t hs, int64_t pos),
      (dx, table, B, T, nh, hs, pos))

// SwiGLU (Llama's MLP): out[N,I] = silu(gate) · up, silu(g) = g / (1 + exp(−g)); gate, up [N,I];
// fp32 inside, out overwrites.
ZT_OP(swiglu_forward, (const TensorView& out, const TensorView& gate, const TensorView& up), (out, gate, up))
// dgate = dout · up · silu'(gate), dup = dout · silu(gate) (both OVERWRITE). dgate may alias gate
// and dup may alias up: each element is read before it is written.
ZT_OP(swiglu_backward,
      (const TensorView& dgate, const TensorView& dup, const TensorView& dout, const TensorView& gate,
       const TensorView& up),
      (dgate, dup, dout, gate, up))

// Elementwise activations over n = numel elements. Forward overwrites out; backward: dinp += dout·f'(inp).
ZT_OP(gelu_forward, (const TensorView& out, const TensorView& inp), (out, inp))
ZT_OP(gelu_backward, (const TensorView& dinp, const TensorView& inp, const TensorView& dout), (dinp, inp, dout))
ZT_OP(relu_forward, (const TensorView& out, const TensorView& inp), (out, inp))
ZT_OP(relu_backward, (const TensorView& dinp, const TensorView& inp, const TensorView& dout), (dinp, inp, dout))

// Causal self-attention (GPT-2). qkv[B,T,3C] holds q|k|v, heads of size C/H.
// out[B,T,C] overwrites; att[B,H,T,T] (fp32) saves the softmax probabilities for backward.
ZT_OP(attention_forward,
      (const TensorView& out, const TensorView& att, const TensorView& qkv, int64_t B, int64_t T, int64_t C,
       int64_t H),
      (out, att, qkv, B, T, C, H))
// dqkv[B,T,3C] +=. datt_scratch[B,H,T,T] (fp32) is workspace.
ZT_OP(attention_backward,
      (const TensorView& dqkv, const TensorView& datt_scratch, const TensorView& dout, const TensorView& qkv,
       const TensorView& att, int64_t B, int64_t T, int64_t C, int64_t H),
      (dqkv, datt_scratch, dout, qkv, att, B, T, C, H))

// Memory-efficient causal attention, tiled over queries and keys with an online softmax
// (scheme and per-tile math: zerotrain/kernels/attention_tile.h). out[B,T,C] overwrites;
// stats[B,H,T,2] (fp32) receives each query row's (max, sum of exp(score - max)), O(B·H·T)
// instead of att's B·H·T·T. tile_q / tile_k: query / key rows per tile, 0 = the backend's
// defaults (CPU: csrc/kernels/cpu/cpu_attention_tiled.cpp; CUDA: attn_tile::kTileQ / kTileK, the only
// tiles the CUDA backend runs).
ZT_OP(attention_tiled_forward,
      (const TensorView& out, const TensorView& stats, const TensorView& qkv, int64_t B, int64_t T, int64_t C,
       int64_t H, int64_t tile_q, int64_t tile_k),
      (out, stats, qkv, B, T, C, H, tile_q, tile_k))
// dqkv[B,T,3C] is overwritten (its old values are never read). out and stats are the forward's
// outputs; each tile's probabilities are recomputed from qkv and stats. No workspace.
ZT_OP(attention_tiled_backward,
      (const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
       const TensorView& stats, int64_t B, int64_t T, int64_t C, int64_t H, int64_t tile_q, int64_t tile_k),
      (dqkv, dout, qkv, out, stats, B, T, C, H, tile_q, tile_k))

// Causal grouped-query attention (Llama), tiled as attention_tiled_forward with the same stats
// and tiles: q[B,T,H·hs], k and v [B,T,Hkv·hs] (separate buffers; H a multiple of Hkv); query
// head h attends with key/value head h / (H/Hkv), without materialising repeated K/V. With
// Hkv == H and q|k|v the thirds of a qkv row this is attention_tiled_forward exactly.
// out[B,T,H·hs] overwrites; stats[B,H,T,2] (fp32).
ZT_OP(attention_gqa_forward,
      (const TensorView& out, const TensorView& stats, const TensorView& q, const TensorView& k,
       const TensorView& v, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t hs, int64_t tile_q,
       int64_t tile_k),
      (out, stats, q, k, v, B, T, H, Hkv, hs, tile_q, tile_k))
// dq[B,T,H·hs], dk and dv [B,T,Hkv·hs] are overwritten (a key/value head sums the gradients of
// its H/Hkv query heads in a fixed order: deterministic). out and stats are the forward's outputs.
ZT_OP(attention_gqa_backward,
      (const TensorView& dq, const TensorView& dk, const TensorView& dv, const TensorView& dout,
       const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
       const TensorView& stats, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t hs, int64_t tile_q,
       int64_t tile_k),
      (dq, dk, dv, dout, q, k, v, out, stats, B, T, H, Hkv, hs, tile_q, tile_k))

// Incremental decoding with a key/value cache (zerotrain/model/gpt_decode.h). k_cache and
// v_cache are [H, Tmax, hs] (hs = C/H), qkv's dtype. kv_cache_write stores the k and v parts of
// qkv[N,3C] (head h: channels C + h·hs and 2C + h·hs) as cache rows pos..pos+N-1 of every head
// (pos + N <= Tmax).
ZT_OP(kv_cache_write,
      (const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N, int64_t C, int64_t H,
       int64_t pos),
      (k_cache, v_cache, qkv, N, C, H, pos))
// Causal attention of one query at position pos (q = qkv[0, 0:C], a [1,3C] row) over cache rows
// 0..pos (its own k and v already written): out[1,C] (overwrites) = softmax(q·kᵀ/sqrt(hs))·v per
// head, fp32 inside. Row pos of attention_forward over the same sequence, up to rounding.
ZT_OP(attention_decode,
      (const TensorView& out, const TensorView& qkv, const TensorView& k_cache, const TensorView& v_cache, int64_t C,
       int64_t H, int64_t pos),
      (out, qkv, k_cache, v_cache, C, H, pos))
// Grouped-query decoding (Llama): k_cache and v_cache are [Hkv, Tmax, hs], k's dtype.
// kv_cache_write_gqa stores k and v [N, Hkv·hs] (head g: channels g·hs) as cache rows
// pos..pos+N-1 of every key/value head (pos + N <= Tmax).
ZT_OP(kv_cache_write_gqa,
      (const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v, int64_t N,
       int64_t Hkv, int64_t hs, int64_t pos),
      (k_cache, v_cache, k, v, N, Hkv, hs, pos))
// Causal attention of one query q[1, H·hs] at position pos over cache rows 0..pos of key/value
// head h / (H/Hkv) for query head h (H a multiple of Hkv): out[1, H·hs] (overwrites), fp32 inside.
// Row pos of attention_gqa_forward over the same sequence, up to rounding; with Hkv == H it is
// attention_decode on the same q and caches, bitwise.
ZT_OP(attention_decode_gqa,
      (const TensorView& out, const TensorView& q, const TensorView& k_cache, const TensorView& v_cache, int64_t H,
       int64_t Hkv, int64_t hs, int64_t pos),
      (out, q, k_cache, v_cache, H, Hkv, hs, pos))

// Token + position embedding: out[B,T,C] = wte[tokens[b,t]] + wpe[t] (overwrites), or, with wpe
// absent (TensorView{}: Llama, whose positions are rotary), out = wte[tokens[b,t]].
// tokens[B,T] are int32 on the op's device.
ZT_OP(embedding_forward,
      (const TensorView& out, const int32_t* tokens, const TensorView& wte, const TensorView& wpe, int64_t B,
       int64_t T, int64_t C),
      (out, tokens, wte, wpe, B, T, C))
// dwte[V,C] +=, dwpe[T',C] += (rows 0..T-1; dwpe absent: not computed); both dout's dtype or fp32.
// Deterministic (no atomics).
ZT_OP(embedding_backward,
      (const TensorView& dwte, const TensorView& dwpe, const TensorView& dout, const int32_t* tokens, int64_t B,
       int64_t T, int64_t C),
      (dwte, dwpe, dout, tokens, B, T, C))

// Fused softmax + cross-entropy over logits[N,V]: losses[N] (fp32) = -log softmax(logits)[target];
// dlogits[N,V] (overwrites, may alias logits) = dloss · (softmax − onehot(target)).
// targets[N] int32 on the op's device; a target < 0 is ignored (loss 0, zero grad).
ZT_OP(softmax_cross_entropy,
      (const TensorView& losses, const TensorView& dlogits, const TensorView& logits, const int32_t* targets,
       float dloss),
      (losses, dlogits, logits, targets, dloss))
// softmax_cross_entropy over rows of V real logits stored ld >= V apart (logits / dlogits hold
// N rows of ld elements; columns [V, ld) are neither read nor written: the padded LM head).
// Same results as softmax_cross_entropy on the V real columns. dlogits overwrites, may alias logits.
ZT_OP(softmax_cross_entropy_ld,
      (const TensorView& losses, const TensorView& dlogits, const TensorView& logits, const int32_t* targets,
       float dloss, int64_t V, int64_t ld),
      (losses, dlogits, logits, targets, dloss, V, ld))
// Mean squared error over pred[N,K] vs target[N,K] (target same dtype): losses[N] (fp32) = mean_k (p−t)²
// per row; dpred[N,K] (overwrites) = dloss · 2 (p − t) / K.
ZT_OP(mse_loss,
      (const TensorView& losses, const TensorView& dpred, const TensorView& pred, const TensorView& target,
       float dloss),
      (losses, dpred, pred, target, dloss))

// out = a + b (elementwise, overwrites; out may alias a or b).
ZT_OP(residual_add, (const TensorView& out, const TensorView& a, const TensorView& b), (out, a, b))
// x *= alpha.
ZT_OP(scale, (const TensorView& x, float alpha), (x, alpha))
// dst = src converted (RNE), any dtype pair, same numel.
ZT_OP(cast, (const TensorView& dst, const TensorView& src), (dst, src))
// *out = sum of src² accumulated in double, in a fixed order (deterministic). `out` points to one
// double on the op's device (overwrites). Non-finite input gives inf/nan.
ZT_OP(squared_norm, (double* out, const TensorView& src), (out, src))

// Adam/AdamW step over n elements of master weights p (F32, or BF16 with
// bf16_master_weights_and_grads), moments m and v (F32, or BF16 when the optimizer states are
// bf16), and gradient g (fp32 or compute dtype), with g multiplied by grad_scale first (folds
// unscaling and clipping). If param_out is non-empty, it receives the updated p cast to its dtype
// (the compute-dtype copy). See math::adam_update.
ZT_OP(adam_step,
      (const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
       const math::AdamParams& a, const TensorView& param_out),
      (p, m, v, g, grad_scale, a, param_out))
// adam_step over a list of runs of the same buffers: for each chunk c, adam_step on
// p/m/v[c.p, c.p + c.n), g[c.g, + c.n) and param_out[c.out, + c.n) (param_out may be empty).
// Elementwise identical to one adam_step per chunk (the CPU backend runs exactly that); the CUDA
// backend coalesces contiguous chunks and updates up to 48 of them per multi-tensor launch, with
// 128-bit loads where a chunk's operands are aligned (vector_path.h).
ZT_OP(adam_step_multi,
      (const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
       const math::AdamParams& a, const TensorView& param_out, const std::vector<AdamChunk>& chunks),
      (p, m, v, g, grad_scale, a, param_out, chunks))

// ---- Engine ops: zt::zero_ops (zero/zero_ops.h), entry points and CPU kernels in
// csrc/zero/zero_ops.cpp and quantize_ops.cpp, CUDA launchers in csrc/kernels/cuda/ ----

// dst = (overwrite ? 0 : dst) + alpha · src, element-wise, any dtype pair, same numel. fp32 math.
ZT_ENGINE_OP(accumulate, (const TensorView& dst, const TensorView& src, float alpha, bool overwrite),
             (dst, src, alpha, overwrite))

// SGD with momentum over p (master, F32/BF16), momentum_buf (same numel; unused when momentum
// is 0) and g (any dtype), with g multiplied by grad_scale first; optim::sgd_update per element
// (torch.optim.SGD semantics). param_out (optional) receives cast(p).
ZT_ENGINE_OP(sgd_step,
             (const TensorView& p, const TensorView& momentum_buf, const TensorView& g, float grad_scale,
              const optim::SgdParams& a, bool first_step, const TensorView& param_out),
             (p, momentum_buf, g, grad_scale, a, first_step, param_out))

// Lion over p (master, F32/BF16), exp_avg m (moments dtype) and g (any dtype), g multiplied by
// grad_scale first; optim::lion_update per element. param_out (optional) receives cast(p).
ZT_ENGINE_OP(lion_step,
             (const TensorView& p, const TensorView& m, const TensorView& g, float grad_scale,
              const optim::LionParams& a, const TensorView& param_out),
             (p, m, g, grad_scale, a, param_out))
// Adagrad (torch.optim.Adagrad): optim::adagrad_update per element over p, the sum of squares
// `sum` (moments dtype) and g × grad_scale. param_out (optional) receives cast(p).
ZT_ENGINE_OP(adagrad_step,
             (const TensorView& p, const TensorView& sum, const TensorView& g, float grad_scale,
              const optim::AdagradParams& a, const TensorView& param_out),
             (p, sum, g, grad_scale, a, param_out))
// LAMB phase 1: optim::lamb_moments per element over m, v (moments dtype) and g × grad_scale.
ZT_ENGINE_OP(lamb_moments,
             (const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
              const optim::LambParams& a),
             (m, v, g, grad_scale, a))
// *out = Σ lamb_direction(p, m, v)² accumulated in double, in a fixed order (deterministic);
// `out` points to one double on the op's device (overwrites).
ZT_ENGINE_OP(lamb_direction_sq_norm,
             (double* out, const TensorView& p, const TensorView& m, const TensorView& v, const optim::LambParams& a),
             (out, p, m, v, a))
// LAMB phase 2: optim::lamb_apply per element with this parameter's trust ratio; param_out
// (optional) receives cast(p).
ZT_ENGINE_OP(lamb_apply,
             (const TensorView& p, const TensorView& m, const TensorView& v, float ratio, const optim::LambParams& a,
              const TensorView& param_out),
             (p, m, v, ratio, a, param_out))

// Block-wise symmetric quantisation, the wire format of quantised collectives (ZeRO++'s
// quantised weights and gradients; per-element math in zerotrain/kernels/quantize_math.h). x's
// n = numel elements form blocks of `block` (the last one may be shorter). Per block b:
// scales[b] (fp32) = absmax / qmax with qmax = 2^(bits−1) − 1 (127 for int8, 7 for int4); 0 for an
// all-zero block; NaN when the block holds a NaN or ±inf (it then dequantises to NaN everywhere,
// so an overflow stays visible). q = round-half-even(x / scale), in [−qmax, qmax], two's
// complement: bits 8 one byte per element; bits 4 two per byte, element 2i in the low nibble
// (quant::payload_bytes). q and scales are on the op's device (overwrites).
ZT_ENGINE_OP(quantize_blockwise, (uint8_t* q, float* scales, const TensorView& x, int64_t block, int bits),
             (q, scales, x, block, bits))
// x = (accumulate ? x : 0) + scales[block of i] · q[i] per element, fp32 math rounded once into x's
// dtype. Same layout as quantize_blockwise.
ZT_ENGINE_OP(dequantize_blockwise,
             (const TensorView& x, const uint8_t* q, const float* scales, int64_t block, int bits, bool accumulate),
             (x, q, scales, block, bits, accumulate))

#undef ZT_OP
#undef ZT_ENGINE_OP
