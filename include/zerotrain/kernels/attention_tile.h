// attention_tile.h — the tiling scheme and per-tile math of the memory-efficient (tiled) causal
// attention, shared by the CPU kernel (csrc/kernels/cpu/cpu_attention_tiled.cpp, the executable
// reference) and the CUDA kernel (csrc/kernels/cuda/attention_tiled.cu).
//
// Scheme (FlashAttention-2 style, causal). Per (batch row b, head h), queries are cut into tiles
// of tile_q rows and keys into tiles of tile_k rows. Query tile [r0, r0+rq) visits key tiles
// c0 = 0, tile_k, ... while c0 <= r0+rq-1 (later keys are masked for every row of the tile).
//  forward, per row t with running (m, l) = (max, Σ exp(s − m)) over the keys seen so far:
//    s_j = scale · q_t·k_j for visible j <= t;  m' = max(m, max_j s_j);  α = exp(m − m');
//    p_j = exp(s_j − m');  l = α·l + Σ_j p_j;  acc = α·acc + Σ_j p_j v_j
//  after the last tile: out_t = acc / l, and (m, l) are saved: O(B·H·T) statistics.
//  backward recomputes each tile: p_j = exp(s_j − m)/l, D_t = dout_t·out_t,
//    dv_j += p_j dout_t;  dp_j = dout_t·v_j;  ds_j = p_j (dp_j − D_t) · scale;
//    dq_t += ds_j k_j;  dk_j += ds_j q_t.
// Invariant: key tile 0 holds key 0, visible to every row, so m is finite after the first tile
// and α = exp(−inf) = 0 happens only on a row's first tile.
// exp is math::exp_nonpos (every argument is a score minus a running or final row max, <= 0):
// within 4 ulp of expf, branch-free, and the CPU kernel's SIMD rows (cpu_vec_kernels.h) are
// bitwise equal to it; the order of the row sum Σ_j p_j is the kernel's own. The CPU and the CUDA
// fp32 kernel use it; the CUDA 16-bit kernels use 2^x (ex2.approx) on scores pre-multiplied by
// log2(e), the same function within ~2^-21 relative (attention_flash_fwd.cu).
#pragma once
#include <cmath>
#include <cstdint>

#include "zerotrain/kernels/math.h"

namespace zt::attn_tile {

// The CUDA kernels' tile sizes (rows). They are compiled for exactly these (16-bit: 64 x 64 with
// 4 warps of 16 query rows, attention_mma_layout.h; the backward of heads wider than 64 columns
// runs 32-row inner tiles, which changes only the summation order). The CPU kernel takes any tile
// size >= 1 (tests use sizes that do and do not divide T; the GPU tests pass these to it to run
// the same tiling) and has its own measured defaults (csrc/kernels/cpu/cpu_attention_tiled.cpp).
constexpr int64_t kTileQ = 64;
constexpr int64_t kTileK = 64;

// Statistics layout: stats[((b·H + h)·T + t)·2 + {0: row max m, 1: row sum l}] (fp32).
constexpr int64_t kStatsPerRow = 2;

// Number of keys of tile [c0, c0+cols) visible to query row t (causal: key <= t); may be <= 0.
ZT_HD int64_t visible_keys(int64_t t, int64_t c0, int64_t cols) {
  const int64_t v = t - c0 + 1;
  return v < cols ? v : cols;
}

// Online-softmax update of one row for one tile whose visible scores have maximum tile_max:
// returns the factor α that rescales the running sum and accumulator, and updates m.
ZT_HD float rescale_running_max(float& m, float tile_max) {
  const float m_new = fmaxf(m, tile_max);
  const float alpha = m == -INFINITY ? 0.0f : math::exp_nonpos(m - m_new);
  m = m_new;
  return alpha;
}

// Unnormalised probability of a visible score under the running max.
ZT_HD float unnormalised_p(float s, float m) { return math::exp_nonpos(s - m); }

// Backward: the probability recomputed from the saved statistics.
ZT_HD float recomputed_p(float s, float m, float inv_l) { return math::exp_nonpos(s - m) * inv_l; }

// Backward: the gradient of the scaled score (softmax backward times the score scale).
ZT_HD float score_grad(float p, float dp, float d_row, float scale) { return p * (dp - d_row) * scale; }

}  // namespace zt::attn_tile
