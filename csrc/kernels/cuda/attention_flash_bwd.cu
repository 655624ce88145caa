// attention_flash_bwd.cu — backward of the tiled causal attention for bf16 / fp16 on tensor cores
// (FlashAttention-2 style, deterministic: no atomics; scheme: zerotrain/kernels/attention_tile.h).
//
//  prep   one warp per row: D_t = dout_t·out_t and lse₂_t = m_t·log2(e) + log2(l_t) (fp32, in the
//         stream's scratch, [2][B·H·T]), so P = 2^(S·scale·log2e − lse₂) = exp(s − m) / l.
//  dK/dV  grid (ceil(T/64), B·Hkv), 4 warps; block x owns key rows c0 = 64x .. c0+63 of key/value
//         head g, warp w the 16 keys c0+16w..; for each query head h = g·G .. g·G+G-1 of its group
//         (G = H/Hkv, in that order) it visits the query tiles r0 = c0, c0+BQ, ... < T that can
//         see them (double-buffered Q, dO, lse₂, D via cp.async) and per tile, in registers:
//           Sᵀ = K_w Qᵀ (16 x BQ), Pᵀ (masked on the diagonal / at T), dV += Pᵀ dO,
//           dPᵀ = V_w dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − D)·scale, dK += dSᵀ Q.
//  dQ     grid (ceil(T/64), B·H), 4 warps; block x owns query tile r0 (longest first) of query
//         head h, warp w rows r0+16w..; it visits key tiles c0 = 0, BC, ... <= its last row of key/
//         value head h / G (double-buffered K, V):
//           S = Q_w Kᵀ, P, dP = dO_w Vᵀ, dS = P ⊙ (dP − D)·scale, dQ += dS K.
// Each dq, dk, dv element is accumulated (+=) by exactly one lane of one block, in a fixed order
// (a key/value head sums its group's query heads in registers): the result is bitwise repeatable. BQ = BC = 64 for head_dim <= 64 and 32 above (register budget).
// Shared memory: dK/dV (2·64 + 4·BQ)·(D+8)·2 + 16·BQ bytes (55 KiB at D = 64); dQ (2·64 + 4·BC)·(D+8)·2.
#include "attention_mma.cuh"

namespace zt::cuda_detail::flash {
namespace {

// Dv[row] = dout_row · out_row, lse2[row] = m·log2(e) + log2(l), row = (b·H + h)·T + t.
template <typename T>
__global__ void flash_bwd_prep_kernel(float* Dv, float* lse2, const T* dout, const T* out, const float* stats,
                                      Params p) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= p.B * p.H * p.T) return;
  const int64_t bh = row / p.T, t = row % p.T, b = bh / p.H, h = bh % p.H;
  const int64_t at = (b * p.T + t) * p.ldo() + h * p.hs;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x & 31; i < p.hs; i += 32) acc += to_f32(dout[at + i]) * to_f32(out[at + i]);
  acc = warp_sum(acc);
  if ((threadIdx.x & 31) == 0) {
    Dv[row] = acc;
    const float* st = stats + row * attn_tile::kStatsPerRow;
    lse2[row] = st[0] * kLog2e + log2f(st[1]);
  }
}

template <int D> constexpr int bwd_cols() { return D <= 64 ? 64 : 32; }

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_dkdv_kernel(DQkv<T> dx, const T* dout, Qkv<T> x, const float* lse2,
                                                              const float* Dv, Params p) {
  constexpr int LD = attn_mma::smem_stride(D), BK = kBlockRows, BQ = bwd_cols<D>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Ks = reinterpret_cast<T*>(smem_raw);  // [BK][LD]
  T* Vs = Ks + BK * LD;                    // [BK][LD]
  T* Qs = Vs + BK * LD;                    // [2][BQ][LD]: buffer j&1 holds step j's query tile
  T* dOs = Qs + 2 * BQ * LD;               // [2][BQ][LD]
  float* Ls = reinterpret_cast<float*>(dOs + 2 * BQ * LD);  // [2][BQ] lse₂ (0 beyond T)
  float* Ds = Ls + 2 * BQ;                                  // [2][BQ] D (0 beyond T)
  const int64_t bg = blockIdx.y, b = bg / p.Hkv, g = bg % p.Hkv, c0 = static_cast<int64_t>(blockIdx.x) * BK;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t rstart = c0 / BQ * BQ;  // first query tile with a row >= c0
  const int n_tiles = static_cast<int>((p.T - rstart + BQ - 1) / BQ);
  const int n_steps = static_cast<int>(p.group()) * n_tiles;  // (query head of the group, query tile) pairs

  // Step j (query head g·G + j / n_tiles, its query tile j % n_tiles) into buffer buf: Q, dO rows
  // and their lse₂, D (cp.async or sync).
  auto load_q_tile = [&](int buf, int j) {
    const int64_t h = g * p.group() + j / n_tiles, r = rstart + static_cast<int64_t>(j % n_tiles) * BQ;
    const int64_t bh = b * p.H + h;
    load_rows<T, D, BQ>(Qs + buf * BQ * LD, x.q, b, r, p.ldq, h * p.hs, p);
    load_rows<T, D, BQ>(dOs + buf * BQ * LD, dout, b, r, p.ldo(), h * p.hs, p);
    for (int i = threadIdx.x; i < 2 * BQ; i += kThreads) {
      const int k = i % BQ;
      const bool ok = r + k < p.T;
      const float* src = (i < BQ ? lse2 : Dv) + (ok ? bh * p.T + r + k : 0);
      cp_async4((i < BQ ? Ls : Ds) + buf * BQ + k, src, ok);
    }
  };
  // cp.async groups: {K, V, step 0}, then one (possibly empty) group per iteration.
  load_rows<T, D, BK>(Ks, x.k, b, c0, p.ldkv, g * p.hs, p);
  load_rows<T, D, BK>(Vs, x.v, b, c0, p.ldkv, g * p.hs, p);
  load_q_tile(0, 0);
  cp_async_commit();

  float dk[D / 8][4], dv[D / 8][4];
  zero(dk);
  zero(dv);
  const int64_t key_g = c0 + warp * kWarpRows + lane / 4;  // keys key_g (e = 0, 1) and key_g + 8 (e = 2, 3)
  for (int j = 0; j < n_steps; ++j) {
    const int buf = j & 1;
    const int64_t r0 = rstart + static_cast<int64_t>(j % n_tiles) * BQ;
    __syncthreads();  // every warp finished step j-1: buffer buf^1 may be overwritten
    if (j + 1 < n_steps) load_q_tile(buf ^ 1, j + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // step j (and at j = 0, K and V) visible to every warp
    const T* Qt = Qs + buf * BQ * LD;
    const T* dOt = dOs + buf * BQ * LD;
    const float* Lt = Ls + buf * BQ;
    const float* Dt = Ds + buf * BQ;

    float st[BQ / 8][4];  // Sᵀ, then Pᵀ: rows = this warp's keys, columns = the tile's queries
    zero(st);
    {
      uint32_t kf[D / 16][4];
      load_a<D>(kf, Ks + warp * kWarpRows * LD, LD);
      gemm_nt<D, BQ>(st, kf, Qt, LD);
    }
    const bool need_mask = attn_mma::tile_needs_mask(r0, BQ, c0, BK, p.T);
#pragma unroll
    for (int n = 0; n < BQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = 8 * n + attn_mma::frag_c_col(lane, e);
        const int64_t q = r0 + qc, key = key_g + 8 * (e / 2);
        const bool masked = need_mask && attn_mma::score_masked(q, key, p.T);
        st[n][e] = masked ? 0.0f : ex2(st[n][e] * p.scale_log2 - Lt[qc]);
      }
    uint32_t pa[BQ / 16][4];
    acc_to_a<BQ, T>(pa, st);
    gemm_nn<BQ, D>(dv, pa, dOt, LD);  // dV += Pᵀ dO

    float dpt[BQ / 8][4];  // dPᵀ = V dOᵀ, then dSᵀ
    zero(dpt);
    {
      uint32_t vf[D / 16][4];
      load_a<D>(vf, Vs + warp * kWarpRows * LD, LD);
      gemm_nt<D, BQ>(dpt, vf, dOt, LD);
    }
#pragma unroll
    for (int n = 0; n < BQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = 8 * n + attn_mma::frag_c_col(lane, e);
        dpt[n][e] = st[n][e] * (dpt[n][e] - Dt[qc]) * p.scale;  // masked: Pᵀ = 0, every input finite
      }
    acc_to_a<BQ, T>(pa, dpt);
    gemm_nn<BQ, D>(dk, pa, Qt, LD);  // dK += dSᵀ Q
  }
  cp_async_wait<0>();

#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t key = key_g + 8 * (e / 2);
      const int col = 8 * n + attn_mma::frag_c_col(lane, e);
      if (key >= p.T || col >= p.hs) continue;
      const int64_t at = (b * p.T + key) * p.ldkv + g * p.hs + col;
      dx.k[at] = from_f32<T>(to_f32(dx.k[at]) + dk[n][e]);
      dx.v[at] = from_f32<T>(to_f32(dx.v[at]) + dv[n][e]);
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_dq_kernel(T* dq_out, const T* dout, Qkv<T> x, const float* lse2,
                                                            const float* Dv, Params p) {
  constexpr int LD = attn_mma::smem_stride(D), BR = kBlockRows, BC = bwd_cols<D>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);  // [BR][LD]
  T* dOs = Qs + BR * LD;                   // [BR][LD]
  T* Ks = dOs + BR * LD;                   // [2][BC][LD]: buffer j&1 holds key tile j
  T* Vs = Ks + 2 * BC * LD;                // [2][BC][LD]
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H, g = h / p.group();
  const int64_t r0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * BR;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t qoff = h * p.hs, kvoff = g * p.hs;
  const int64_t last = r0 + BR < p.T ? r0 + BR : p.T;
  const int n_tiles = static_cast<int>((last + BC - 1) / BC);

  // cp.async groups: {Q, dO}, {K0, V0}, then one (possibly empty) group per iteration.
  load_rows<T, D, BR>(Qs, x.q, b, r0, p.ldq, qoff, p);
  load_rows<T, D, BR>(dOs, dout, b, r0, p.ldo(), qoff, p);
  cp_async_commit();
  load_rows<T, D, BC>(Ks, x.k, b, 0, p.ldkv, kvoff, p);
  load_rows<T, D, BC>(Vs, x.v, b, 0, p.ldkv, kvoff, p);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  uint32_t qf[D / 16][4], df[D / 16][4];
  load_a<D>(qf, Qs + warp * kWarpRows * LD, LD);
  load_a<D>(df, dOs + warp * kWarpRows * LD, LD);
  const int64_t row_g = r0 + warp * kWarpRows + lane / 4;  // rows row_g (e = 0, 1), row_g + 8 (e = 2, 3)
  float lse[2], dd[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row_g + 8 * r;
    lse[r] = row < p.T ? lse2[bh * p.T + row] : 0.0f;
    dd[r] = row < p.T ? Dv[bh * p.T + row] : 0.0f;
  }
  float dq[D / 8][4];
  zero(dq);

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    __syncthreads();
    if (j + 1 < n_tiles) {
      load_rows<T, D, BC>(Ks + (buf ^ 1) * BC * LD, x.k, b, (j + 1) * int64_t{BC}, p.ldkv, kvoff, p);
      load_rows<T, D, BC>(Vs + (buf ^ 1) * BC * LD, x.v, b, (j + 1) * int64_t{BC}, p.ldkv, kvoff, p);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* Kt = Ks + buf * BC * LD;
    const T* Vt = Vs + buf * BC * LD;

    float s[BC / 8][4], dp[BC / 8][4];
    zero(s);
    zero(dp);
    gemm_nt<D, BC>(s, qf, Kt, LD);   // S = Q Kᵀ
    gemm_nt<D, BC>(dp, df, Vt, LD);  // dP = dO Vᵀ
    const int64_t c0 = static_cast<int64_t>(j) * BC;
    const bool need_mask = attn_mma::tile_needs_mask(r0, BR, c0, BC, p.T);
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = c0 + 8 * n + attn_mma::frag_c_col(lane, e), row = row_g + 8 * (e / 2);
        const bool masked = need_mask && attn_mma::score_masked(row, key, p.T);
        const float pv = masked ? 0.0f : ex2(s[n][e] * p.scale_log2 - lse[e / 2]);
        s[n][e] = pv * (dp[n][e] - dd[e / 2]) * p.scale;  // dS
      }
    uint32_t da[BC / 16][4];
    acc_to_a<BC, T>(da, s);
    gemm_nn<BC, D>(dq, da, Kt, LD);  // dQ += dS K
  }
  cp_async_wait<0>();

#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row_g + 8 * (e / 2);
      const int col = 8 * n + attn_mma::frag_c_col(lane, e);
      if (row >= p.T || col >= p.hs) continue;
      T* q = dq_out + (b * p.T + row) * p.ldq + h * p.hs + col;
      *q = from_f32<T>(to_f32(*q) + dq[n][e]);
    }
}

template <typename Kernel> void set_smem(Kernel* k, size_t bytes) {
  ZT_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <typename T, int D>
void launch_backward(Stream& s, DQkv<T> dx, const T* dout, Qkv<T> x, const float* lse2, const float* Dv,
                     const Params& p) {
  constexpr int LD = attn_mma::smem_stride(D), BQ = bwd_cols<D>();
  const unsigned tiles = static_cast<unsigned>((p.T + kBlockRows - 1) / kBlockRows);
  const size_t dkdv_bytes = static_cast<size_t>(2 * kBlockRows + 4 * BQ) * LD * sizeof(T) + 4 * BQ * sizeof(float);
  set_smem(flash_dkdv_kernel<T, D>, dkdv_bytes);
  flash_dkdv_kernel<T, D><<<dim3(tiles, static_cast<unsigned>(p.B * p.Hkv)), kThreads, dkdv_bytes, native(s)>>>(
      dx, dout, x, lse2, Dv, p);
  ZT_CUDA_LAUNCH_CHECK();
  const size_t dq_bytes = static_cast<size_t>(2 * kBlockRows + 4 * BQ) * LD * sizeof(T);
  set_smem(flash_dq_kernel<T, D>, dq_bytes);
  flash_dq_kernel<T, D><<<dim3(tiles, static_cast<unsigned>(p.B * p.H)), kThreads, dq_bytes, native(s)>>>(
      dx.q, dout, x, lse2, Dv, p);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace

template <typename T>
void flash_backward(Stream& s, DQkv<T> dx, const T* dout, Qkv<T> x, const T* out, const float* stats,
                    const Params& p) {
  const int64_t rows = p.B * p.H * p.T;
  // Scratch [2][rows] floats: D then lse₂; valid for work on s until the next scratch() call on s.
  float* Dv = static_cast<float*>(scratch(s, 2 * static_cast<size_t>(rows) * sizeof(float)));
  float* lse2 = Dv + rows;
  flash_bwd_prep_kernel<T><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, native(s)>>>(Dv, lse2, dout, out, stats, p);
  ZT_CUDA_LAUNCH_CHECK();
  switch (attn_mma::head_dim(p.hs)) {
    case 32: launch_backward<T, 32>(s, dx, dout, x, lse2, Dv, p); break;
    case 64: launch_backward<T, 64>(s, dx, dout, x, lse2, Dv, p); break;
    case 96: launch_backward<T, 96>(s, dx, dout, x, lse2, Dv, p); break;
    default: launch_backward<T, 128>(s, dx, dout, x, lse2, Dv, p); break;
  }
}
template void flash_backward<bf16>(Stream&, DQkv<bf16>, const bf16*, Qkv<bf16>, const bf16*, const float*,
                                   const Params&);
template void flash_backward<fp16>(Stream&, DQkv<fp16>, const fp16*, Qkv<fp16>, const fp16*, const float*,
                                   const Params&);

}  // namespace zt::cuda_detail::flash
