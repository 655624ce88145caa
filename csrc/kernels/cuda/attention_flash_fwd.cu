// attention_flash_fwd.cu — forward of the tiled causal attention for bf16 / fp16 on tensor cores
// (FlashAttention-2 style; scheme and statistics: zerotrain/kernels/attention_tile.h).
//
// Grid (ceil(T/64), B·H); block = 4 warps; block x handles query tile r0 = 64·(gridDim.x-1-x)
// (the longest causal rows start first) of query head h, reading key/value head h / (H/Hkv)
// (Params: packed qkv and grouped-query layouts). Warp w owns query rows r0+16w .. r0+16w+15.
// Per key tile c0 = 0, 64, ... <= last row of the tile (later tiles are fully masked, skipped):
//   S (16 x 64 per warp, fp32 registers)  = Q_w Kᵀ          mma m16n8k16, Q fragments in registers
//   mask only where the tile crosses the diagonal or T; m' = max(m, rowmax S) (4-lane quad
//   shuffle), α = 2^(m−m'), P = 2^(S·scale·log2e − m'), l = α·l + Σ P, O = α·O
//   O (16 x D per warp, fp32 registers) += P V              P packed to 16 bits in registers
// K/V tiles are double-buffered: tile j+1 is copied with cp.async while tile j is computed.
// Shared memory: Q [64][D+8] + K, V [2][64][D+8] 16-bit = 5·64·(D+8)·2 bytes (46 KiB at D = 64,
// 85 KiB at D = 128); the +8 padding makes every ldmatrix conflict-free. Launch bounds ask for 3
// blocks (12 warps) per SM at D <= 64: <= 168 registers per thread (ptxas 13.0: one 8-byte spill at
// D = 64, none elsewhere; at 2 blocks it used 174), 138 KiB of shared memory.
// exp: ex2.approx on scores pre-multiplied by log2(e) (one MUFU op instead of the exp_nonpos
// polynomial). Its relative error (~2^-22, plus |x|·2^-24 from rounding the scaled argument) is far
// below the 16-bit rounding of O (2^-9 / 2^-12); the saved m is converted back to natural units
// (m = m₂·ln 2) so the statistics layout and meaning are those of the CPU kernel.
#include "attention_mma.cuh"

namespace zt::cuda_detail::flash {
namespace {

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, D <= 64 ? 3 : 2)
    flash_fwd_kernel(T* out, float* stats, Qkv<T> x, Params p) {
  constexpr int LD = attn_mma::smem_stride(D), BR = kBlockRows, BC = kBlockCols;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);  // [BR][LD], read by ldmatrix once after the first barrier
  T* Ks = Qs + BR * LD;                    // [2][BC][LD]: buffer j&1 holds key tile j
  T* Vs = Ks + 2 * BC * LD;                // [2][BC][LD]
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H, g = h / p.group();
  const int64_t r0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * BR;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t qoff = h * p.hs, kvoff = g * p.hs;
  const int64_t last = r0 + BR < p.T ? r0 + BR : p.T;  // keys >= last are masked for every row
  const int n_tiles = static_cast<int>((last + BC - 1) / BC);

  // cp.async groups: {Q}, {K0, V0}, then one (possibly empty) group per loop iteration.
  load_rows<T, D, BR>(Qs, x.q, b, r0, p.ldq, qoff, p);
  cp_async_commit();
  load_rows<T, D, BC>(Ks, x.k, b, 0, p.ldkv, kvoff, p);
  load_rows<T, D, BC>(Vs, x.v, b, 0, p.ldkv, kvoff, p);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();  // Q visible to every warp
  uint32_t qf[D / 16][4];
  load_a<D>(qf, Qs + warp * kWarpRows * LD, LD);

  float o[D / 8][4];
  zero(o);
  // Rows row_g (e = 0, 1) and row_g + 8 (e = 2, 3) of the C fragments; m in base-2 units,
  // l is this lane's partial sum over its columns (the quad's partials are added at the end).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int64_t row_g = r0 + warp * kWarpRows + lane / 4;

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    __syncthreads();  // every warp finished tile j-1, so buffer buf^1 may be overwritten
    if (j + 1 < n_tiles) {
      load_rows<T, D, BC>(Ks + (buf ^ 1) * BC * LD, x.k, b, (j + 1) * int64_t{BC}, p.ldkv, kvoff, p);
      load_rows<T, D, BC>(Vs + (buf ^ 1) * BC * LD, x.v, b, (j + 1) * int64_t{BC}, p.ldkv, kvoff, p);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile j (the previous group) landed
    __syncthreads();     // ... for every thread's copies
    const T* Kt = Ks + buf * BC * LD;
    const T* Vt = Vs + buf * BC * LD;

    float s[BC / 8][4];
    zero(s);
    gemm_nt<D, BC>(s, qf, Kt, LD);
    // Positions within the head in 32 bits (T < 2^31: the tensors are indexed in 64 bits).
    const int c0 = j * BC, Ti = static_cast<int>(p.T), rg = static_cast<int>(row_g);
    const bool need_mask = attn_mma::tile_needs_mask(r0, BR, c0, BC, p.T);  // diagonal tile or the end of T
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = c0 + 8 * n + attn_mma::frag_c_col(lane, e), row = rg + 8 * (e / 2);
        float v = s[n][e] * p.scale_log2;
        // Rows >= T are never stored; keeping them unmasked keeps every row's max finite.
        if (need_mask && (key > row || key >= Ti)) v = -INFINITY;  // score_masked without the row test
        s[n][e] = v;
        mx[e / 2] = fmaxf(mx[e / 2], v);
      }
    float mu[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The 4 lanes of a quad (lane/4 equal) hold the 64 columns of one row.
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r]);
      const float alpha = m[r] == -INFINITY ? 0.0f : ex2(m[r] - m_new);
      mu[r] = m_new == -INFINITY ? 0.0f : m_new;  // a fully masked row (never for t < T) stays 0
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][2 * r] *= alpha;
        o[n][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pv = ex2(s[n][e] - mu[e / 2]);
        s[n][e] = pv;
        l[e / 2] += pv;
      }
    uint32_t pa[BC / 16][4];
    acc_to_a<BC, T>(pa, s);
    gemm_nn<BC, D>(o, pa, Vt, LD);
  }
  cp_async_wait<0>();  // nothing is pending (the last group is empty); no copy outlives the block

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = 1.0f / l[r];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = row_g + 8 * (e / 2);
      const int col = 8 * n + attn_mma::frag_c_col(lane, e);
      if (row < p.T && col < p.hs) out[(b * p.T + row) * p.ldo() + h * p.hs + col] = from_f32<T>(o[n][e] * inv[e / 2]);
    }
  if (lane % 4 == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row_g + 8 * r;
      if (row >= p.T) continue;
      float* st = stats + (bh * p.T + row) * attn_tile::kStatsPerRow;
      st[0] = m[r] * kLn2;  // back to natural units: the CPU kernel's row max of scale·q·k
      st[1] = l[r];
    }
}

template <typename T, int D> void launch_forward(Stream& s, T* out, float* stats, Qkv<T> x, const Params& p) {
  constexpr int LD = attn_mma::smem_stride(D);
  const size_t bytes = static_cast<size_t>(kBlockRows + 4 * kBlockCols) * LD * sizeof(T);
  const dim3 grid(static_cast<unsigned>((p.T + kBlockRows - 1) / kBlockRows), static_cast<unsigned>(p.B * p.H));
  ZT_CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
  flash_fwd_kernel<T, D><<<grid, kThreads, bytes, native(s)>>>(out, stats, x, p);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace

template <typename T> void flash_forward(Stream& s, T* out, float* stats, Qkv<T> x, const Params& p) {
  switch (attn_mma::head_dim(p.hs)) {
    case 32: launch_forward<T, 32>(s, out, stats, x, p); break;
    case 64: launch_forward<T, 64>(s, out, stats, x, p); break;
    case 96: launch_forward<T, 96>(s, out, stats, x, p); break;
    default: launch_forward<T, 128>(s, out, stats, x, p); break;
  }
}
template void flash_forward<bf16>(Stream&, bf16*, float*, Qkv<bf16>, const Params&);
template void flash_forward<fp16>(Stream&, fp16*, float*, Qkv<fp16>, const Params&);

}  // namespace zt::cuda_detail::flash
