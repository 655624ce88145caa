// attention_tiled.cu — memory-efficient causal attention on the CUDA backend: the tiling scheme
// and per-tile math of zerotrain/kernels/attention_tile.h (CPU reference:
// csrc/kernels/cpu/cpu_attention_tiled.cpp), for GPT's packed qkv (attention_tiled_*) and
// grouped-query attention's separate q, k, v (attention_gqa_*): every kernel reads its operands
// through base pointers and row strides, query head h with key/value head h / (H/Hkv) (no repeated
// K/V). bf16 / fp16 run the tensor-core kernels of attention_flash_fwd.cu / attention_flash_bwd.cu
// (mma.sync, register-resident softmax); this file holds the launchers and the fp32 kernels (SIMT
// products, 64-row query tiles, 32-key tiles).
//
// fp32 kernels. Tiles: query tiles of kTileQ = 64 rows, key tiles of kSK = 32 rows; the head is
// padded to HP = round_up(hs, 16) columns with zeros in shared memory (hs <= 128).
//  forward        one block per (b, h, query tile); warp w owns query rows 16w..16w+15 and runs
//                 the online softmax for them (lane j = key column j of the tile).
//  backward dK,dV one block per (b, key/value head g, key tile); warp w owns key rows 16w..16w+15
//                 and, for each query head of g's group in order, visits the query tiles that can
//                 see them: Sᵀ = K Qᵀ, Pᵀ from the saved (m, l), dV += Pᵀ dO, dPᵀ = V dOᵀ, dSᵀ,
//                 dK += dSᵀ Q.
//  backward dQ    one block per (b, h, query tile): S = Q Kᵀ, P, dP = dO Vᵀ, dS, dQ += dS K.
// The two backward kernels cover the same (query tile, key tile) pairs as the CPU loop; each
// output element is written by exactly one block (no atomics, deterministic), in a different
// summation order than the CPU (agreement is within fp32 tolerance, not bitwise).
// D_t = dout_t·out_t is computed first into the stream's scratch (B·H·T floats).
#include <initializer_list>
#include <type_traits>

#include "attention_mma.cuh"
#include "cuda_common.cuh"
#include "zerotrain/kernels/attention_tile.h"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

constexpr int kBQ = static_cast<int>(attn_tile::kTileQ);  // 64
constexpr int kBK = static_cast<int>(attn_tile::kTileK);  // 64
// The fp32 SIMT kernels run key tiles of 32 (a lane per key): fp32 tiles of 64 keys would exceed
// sm_80's 163 KiB of shared memory per block at hs = 128. Only the order of fp32 sums differs.
constexpr int kSK = 32;
constexpr int kMaxHead = 128;
static_assert(kBQ % 16 == 0, "warps of 16 query rows");
static_assert(kBQ == attn_mma::kBlockRows && kBK == attn_mma::kBlockCols,
              "the 16-bit kernels run the shared default tiles");

// C[16 x N] (fp32, ldc) = (accumulate ? C : 0) + A[16 x K] · B, A row-major (lda); B is [K x N]
// row-major (ldb) or, when b_trans, stored as [N x K] row-major (ldb). SIMT lanes, shared memory.
template <bool b_trans>
__device__ void warp_mma(const float* A, int lda, const float* B, int ldb, float* C, int ldc, int N, int K,
                         bool accumulate) {
  const int lane = threadIdx.x & 31;
  for (int idx = lane; idx < 16 * N; idx += 32) {
    const int r = idx / N, c = idx % N;
    float s = accumulate ? C[r * ldc + c] : 0.0f;
    for (int k = 0; k < K; ++k) s += A[r * lda + k] * (b_trans ? B[c * ldb + k] : B[k * ldb + c]);
    C[r * ldc + c] = s;
  }
  __syncwarp();
}

// The operands' layout as flash::Params describes it (strides ldq, ldkv; out rows H·hs).
struct Shape {
  int64_t B, T, H, Hkv, hs, ldq, ldkv;
  int HP;  // hs rounded up to 16
  __device__ int64_t ldo() const { return H * hs; }
  __device__ int64_t group() const { return H / Hkv; }
};
template <typename T> using Qkv = flash::Qkv<T>;
template <typename T> using DQkv = flash::DQkv<T>;

// rows [t0, t0+n) of the head at column col0 of rows row_stride apart, into dst[n][HP] (zero
// padding), all threads.
template <typename T>
__device__ void load_tile(T* dst, const T* base, int64_t b, int64_t col0, int64_t t0, int n, int64_t row_stride,
                          const Shape& sh) {
  for (int idx = threadIdx.x; idx < n * sh.HP; idx += blockDim.x) {
    const int r = idx / sh.HP, i = idx % sh.HP;
    const int64_t t = t0 + r;
    dst[idx] = (t < sh.T && i < sh.hs) ? base[(b * sh.T + t) * row_stride + col0 + i] : from_f32<T>(0.0f);
  }
}

// Shared-memory carving; offsets rounded to 256 bytes like the host-side sizes (tile_bytes).
__host__ __device__ constexpr size_t round256(size_t b) { return (b + 255) & ~size_t(255); }
template <typename T> __device__ T* carve(char*& p, size_t n) {
  T* out = reinterpret_cast<T*>(p);
  p += round256(n * sizeof(T));
  return out;
}

template <typename T>
__global__ void tiled_forward_kernel(T* out, float* stats, Qkv<T> x, Shape sh, float sc) {
  extern __shared__ __align__(256) char smem[];
  const int64_t bh = blockIdx.y, b = bh / sh.H, h = bh % sh.H, r0 = static_cast<int64_t>(blockIdx.x) * kBQ;
  const int64_t kvoff = h / sh.group() * sh.hs;
  const int HP = sh.HP, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  char* p = smem;
  T* Qs = carve<T>(p, kBQ * HP);
  T* Ks = carve<T>(p, kSK * HP);
  T* Vs = carve<T>(p, kSK * HP);
  T* Ps = carve<T>(p, kBQ * kSK);
  float* S = carve<float>(p, kBQ * kSK);
  float* O = carve<float>(p, kBQ * HP);
  float* m = carve<float>(p, kBQ);
  float* l = carve<float>(p, kBQ);
  load_tile(Qs, x.q, b, h * sh.hs, r0, kBQ, sh.ldq, sh);
  for (int i = threadIdx.x; i < kBQ * HP; i += blockDim.x) O[i] = 0.0f;
  for (int i = threadIdx.x; i < kBQ; i += blockDim.x) { m[i] = -INFINITY; l[i] = 0.0f; }
  const int64_t last = min(sh.T, r0 + kBQ);  // keys beyond the tile's last row are masked
  const int wr = warp * 16;                  // this warp's first row in the tile
  for (int64_t c0 = 0; c0 < last; c0 += kSK) {
    __syncthreads();  // previous tile's K/V no longer read
    load_tile(Ks, x.k, b, kvoff, c0, kSK, sh.ldkv, sh);
    load_tile(Vs, x.v, b, kvoff, c0, kSK, sh.ldkv, sh);
    __syncthreads();
    warp_mma<true>(Qs + wr * HP, HP, Ks, HP, S + wr * kSK, kSK, kSK, HP, false);
    for (int r = wr; r < wr + 16; ++r) {
      const int64_t t = r0 + r;
      const int64_t vis = t < sh.T ? attn_tile::visible_keys(t, c0, (sh.T - c0 < kSK ? sh.T - c0 : int64_t{kSK})) : 0;
      const bool on = lane < vis;
      const float s = on ? S[r * kSK + lane] * sc : -INFINITY;
      float alpha = 1.0f, pr = 0.0f;
      if (vis > 0) {
        float mr = m[r];
        alpha = attn_tile::rescale_running_max(mr, warp_max(s));
        pr = on ? attn_tile::unnormalised_p(s, mr) : 0.0f;
        const float sum = warp_sum(pr);
        __syncwarp();
        if (lane == 0) { m[r] = mr; l[r] = alpha * l[r] + sum; }
      }
      Ps[r * kSK + lane] = from_f32<T>(pr);
      for (int i = lane; i < HP; i += 32) O[r * HP + i] *= alpha;
    }
    __syncwarp();
    warp_mma<false>(Ps + wr * kSK, kSK, Vs, HP, O + wr * HP, HP, HP, kSK, true);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kBQ * HP; idx += blockDim.x) {
    const int r = idx / HP, i = idx % HP;
    const int64_t t = r0 + r;
    if (t >= sh.T || i >= sh.hs) continue;
    out[(b * sh.T + t) * sh.ldo() + h * sh.hs + i] = from_f32<T>(O[idx] / l[r]);
    if (i == 0) {
      stats[(bh * sh.T + t) * attn_tile::kStatsPerRow] = m[r];
      stats[(bh * sh.T + t) * attn_tile::kStatsPerRow + 1] = l[r];
    }
  }
}

// D[bh·T + t] = dout_t · out_t (fp32), one warp per row.
template <typename T>
__global__ void row_dot_kernel(float* D, const T* dout, const T* out, Shape sh) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= sh.B * sh.H * sh.T) return;
  const int64_t bh = row / sh.T, t = row % sh.T, b = bh / sh.H, h = bh % sh.H;
  const int64_t at = (b * sh.T + t) * sh.ldo() + h * sh.hs;
  float s = 0.0f;
  for (int64_t i = threadIdx.x & 31; i < sh.hs; i += 32) s += to_f32(dout[at + i]) * to_f32(out[at + i]);
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) D[row] = s;
}

// dk, dv rows [c0, c0+kSK) of key/value head g += the block's fp32 dK, dV ([kSK][HP]), all threads.
template <typename T>
__device__ void add_kv_rows(DQkv<T> dx, const float* dK, const float* dV, int64_t b, int64_t g, int64_t c0,
                            const Shape& sh) {
  for (int idx = threadIdx.x; idx < kSK * sh.HP; idx += blockDim.x) {
    const int j = idx / sh.HP, i = idx % sh.HP;
    const int64_t key = c0 + j;
    if (key >= sh.T || i >= sh.hs) continue;
    const int64_t at = (b * sh.T + key) * sh.ldkv + g * sh.hs + i;
    dx.k[at] = from_f32<T>(to_f32(dx.k[at]) + dK[idx]);
    dx.v[at] = from_f32<T>(to_f32(dx.v[at]) + dV[idx]);
  }
}

// dK, dV for key tile blockIdx.x (kSK rows, two warps) of key/value head g: the group's query
// heads h = g·G .. g·G+G-1 in order, each over the query tiles that see the key tile.
template <typename T>
__global__ void tiled_dkdv_kernel(DQkv<T> dx, const T* dout, Qkv<T> x, const float* stats, const float* D, Shape sh,
                                  float sc) {
  extern __shared__ __align__(256) char smem[];
  const int64_t bg = blockIdx.y, b = bg / sh.Hkv, g = bg % sh.Hkv, c0 = static_cast<int64_t>(blockIdx.x) * kSK;
  const int HP = sh.HP, wr = (threadIdx.x >> 5) * 16, lane = threadIdx.x & 31;
  char* p = smem;
  T* Ks = carve<T>(p, kSK * HP);
  T* Vs = carve<T>(p, kSK * HP);
  T* Qs = carve<T>(p, kBQ * HP);
  T* dOs = carve<T>(p, kBQ * HP);
  T* PT = carve<T>(p, kSK * kBQ);
  float* ST = carve<float>(p, kSK * kBQ);
  float* dK = carve<float>(p, kSK * HP);
  float* dV = carve<float>(p, kSK * HP);
  float* dPTs = carve<float>(p, kSK * kBQ);
  load_tile(Ks, x.k, b, g * sh.hs, c0, kSK, sh.ldkv, sh);
  load_tile(Vs, x.v, b, g * sh.hs, c0, kSK, sh.ldkv, sh);
  for (int i = threadIdx.x; i < kSK * HP; i += blockDim.x) dK[i] = dV[i] = 0.0f;
  for (int64_t h = g * sh.group(); h < (g + 1) * sh.group(); ++h) {
    const int64_t bh = b * sh.H + h;
    for (int64_t r0 = c0 / kBQ * kBQ; r0 < sh.T; r0 += kBQ) {
      __syncthreads();
      load_tile(Qs, x.q, b, h * sh.hs, r0, kBQ, sh.ldq, sh);
      load_tile(dOs, dout, b, h * sh.hs, r0, kBQ, sh.ldo(), sh);
      __syncthreads();
      warp_mma<true>(Ks + wr * HP, HP, Qs, HP, ST + wr * kBQ, kBQ, kBQ, HP, false);  // Sᵀ = K Qᵀ
      for (int j = wr; j < wr + 16; ++j) {
        for (int r = lane; r < kBQ; r += 32) {
          const int64_t t = r0 + r, key = c0 + j;
          float pv = 0.0f;
          if (t < sh.T && key < sh.T && key <= t) {
            const float* srow = stats + (bh * sh.T + t) * attn_tile::kStatsPerRow;
            pv = attn_tile::recomputed_p(ST[j * kBQ + r] * sc, srow[0], 1.0f / srow[1]);
          }
          ST[j * kBQ + r] = pv;
          PT[j * kBQ + r] = from_f32<T>(pv);
        }
      }
      __syncwarp();
      warp_mma<false>(PT + wr * kBQ, kBQ, dOs, HP, dV + wr * HP, HP, HP, kBQ, true);  // dV += Pᵀ dO
      warp_mma<true>(Vs + wr * HP, HP, dOs, HP, dPTs + wr * kBQ, kBQ, kBQ, HP, false);
      for (int j = wr; j < wr + 16; ++j)
        for (int r = lane; r < kBQ; r += 32) {
          const int64_t t = r0 + r;
          const float dval = t < sh.T ? D[bh * sh.T + t] : 0.0f;
          PT[j * kBQ + r] = from_f32<T>(attn_tile::score_grad(ST[j * kBQ + r], dPTs[j * kBQ + r], dval, sc));
        }
      __syncwarp();
      warp_mma<false>(PT + wr * kBQ, kBQ, Qs, HP, dK + wr * HP, HP, HP, kBQ, true);  // dK += dSᵀ Q
    }
  }
  __syncthreads();
  add_kv_rows(dx, dK, dV, b, g, c0, sh);
}

// dQ for query tile blockIdx.x (kBQ rows, four warps).
template <typename T>
__global__ void tiled_dq_kernel(T* dq, const T* dout, Qkv<T> x, const float* stats, const float* D, Shape sh,
                                float sc) {
  extern __shared__ __align__(256) char smem[];
  const int64_t bh = blockIdx.y, b = bh / sh.H, h = bh % sh.H, r0 = static_cast<int64_t>(blockIdx.x) * kBQ;
  const int64_t kvoff = h / sh.group() * sh.hs;
  const int HP = sh.HP, wr = (threadIdx.x >> 5) * 16, lane = threadIdx.x & 31;
  char* p = smem;
  T* Qs = carve<T>(p, kBQ * HP);
  T* dOs = carve<T>(p, kBQ * HP);
  T* Ks = carve<T>(p, kSK * HP);
  T* Vs = carve<T>(p, kSK * HP);
  T* dSs = carve<T>(p, kBQ * kSK);
  float* S = carve<float>(p, kBQ * kSK);
  float* dP = carve<float>(p, kBQ * kSK);
  float* dQ = carve<float>(p, kBQ * HP);
  load_tile(Qs, x.q, b, h * sh.hs, r0, kBQ, sh.ldq, sh);
  load_tile(dOs, dout, b, h * sh.hs, r0, kBQ, sh.ldo(), sh);
  for (int i = threadIdx.x; i < kBQ * HP; i += blockDim.x) dQ[i] = 0.0f;
  const int64_t last = min(sh.T, r0 + kBQ);
  for (int64_t c0 = 0; c0 < last; c0 += kSK) {
    __syncthreads();
    load_tile(Ks, x.k, b, kvoff, c0, kSK, sh.ldkv, sh);
    load_tile(Vs, x.v, b, kvoff, c0, kSK, sh.ldkv, sh);
    __syncthreads();
    warp_mma<true>(Qs + wr * HP, HP, Ks, HP, S + wr * kSK, kSK, kSK, HP, false);    // S = Q Kᵀ
    warp_mma<true>(dOs + wr * HP, HP, Vs, HP, dP + wr * kSK, kSK, kSK, HP, false);  // dP = dO Vᵀ
    for (int r = wr; r < wr + 16; ++r) {
      const int64_t t = r0 + r, key = c0 + lane;
      float ds = 0.0f;
      if (t < sh.T && key < sh.T && key <= t) {
        const float* srow = stats + (bh * sh.T + t) * attn_tile::kStatsPerRow;
        const float pv = attn_tile::recomputed_p(S[r * kSK + lane] * sc, srow[0], 1.0f / srow[1]);
        ds = attn_tile::score_grad(pv, dP[r * kSK + lane], D[bh * sh.T + t], sc);
      }
      dSs[r * kSK + lane] = from_f32<T>(ds);
    }
    __syncwarp();
    warp_mma<false>(dSs + wr * kSK, kSK, Ks, HP, dQ + wr * HP, HP, HP, kSK, true);  // dQ += dS K
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kBQ * HP; idx += blockDim.x) {
    const int r = idx / HP, i = idx % HP;
    const int64_t t = r0 + r;
    if (t >= sh.T || i >= sh.hs) continue;
    T* q = dq + (b * sh.T + t) * sh.ldq + h * sh.hs + i;
    *q = from_f32<T>(to_f32(*q) + dQ[idx]);
  }
}

size_t tile_bytes(size_t n, size_t elem) { return round256(n * elem); }

size_t forward_smem(int HP, size_t e) {
  return tile_bytes(kBQ * HP, e) + 2 * tile_bytes(kSK * HP, e) + tile_bytes(kBQ * kSK, e) +
         tile_bytes(kBQ * kSK, 4) + tile_bytes(kBQ * HP, 4) + 2 * tile_bytes(kBQ, 4);
}
size_t dkdv_smem(int HP, size_t e) {
  return 2 * tile_bytes(kSK * HP, e) + 2 * tile_bytes(kBQ * HP, e) + tile_bytes(kSK * kBQ, e) +
         2 * tile_bytes(kSK * kBQ, 4) + 2 * tile_bytes(kSK * HP, 4);
}
size_t dq_smem(int HP, size_t e) {
  return 2 * tile_bytes(kBQ * HP, e) + 2 * tile_bytes(kSK * HP, e) + tile_bytes(kBQ * kSK, e) +
         2 * tile_bytes(kBQ * kSK, 4) + tile_bytes(kBQ * HP, 4);
}

Shape shape_of(const char* op, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t hs, int64_t ldq, int64_t ldkv,
               int64_t tile_q, int64_t tile_k) {
  ZT_CHECK(hs <= kMaxHead, std::string(op) + ": head size " + std::to_string(hs) + " exceeds the CUDA kernel's " +
                               std::to_string(kMaxHead));
  ZT_CHECK((tile_q == 0 || tile_q == kBQ) && (tile_k == 0 || tile_k == kBK),
           std::string(op) + ": the CUDA kernel runs tile_q=" + std::to_string(kBQ) + ", tile_k=" +
               std::to_string(kBK) + " only (pass 0 for the defaults)");
  return {B, T, H, Hkv, hs, ldq, ldkv, static_cast<int>((hs + 15) / 16 * 16)};
}

// Opts the kernel into `bytes` of dynamic shared memory (above the 48 KiB default) and launches it.
template <typename... KArgs, typename... Args>
void launch_smem(void (*kernel)(KArgs...), dim3 grid, int threads, size_t bytes, Stream& s, Args... args) {
  ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  kernel<<<grid, threads, bytes, native(s)>>>(args...);
  ZT_CUDA_LAUNCH_CHECK();
}

void forward_fp32(Stream& s, float* out, float* stats, Qkv<float> x, const Shape& sh) {
  const dim3 grid(static_cast<unsigned>((sh.T + kBQ - 1) / kBQ), static_cast<unsigned>(sh.B * sh.H));
  const float sc = math::attention_scale(static_cast<int>(sh.hs));
  launch_smem(tiled_forward_kernel<float>, grid, kBQ / 16 * 32, forward_smem(sh.HP, sizeof(float)), s, out, stats, x,
              sh, sc);
}

void backward_fp32(Stream& s, DQkv<float> dx, const float* dout, Qkv<float> x, const float* out, const float* stats,
                   const Shape& sh) {
  const float sc = math::attention_scale(static_cast<int>(sh.hs));
  const int64_t rows = sh.B * sh.H * sh.T;
  float* D = static_cast<float*>(scratch(s, static_cast<size_t>(rows) * sizeof(float)));
  row_dot_kernel<float><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, native(s)>>>(D, dout, out, sh);
  ZT_CUDA_LAUNCH_CHECK();
  const unsigned key_tiles = static_cast<unsigned>((sh.T + kSK - 1) / kSK);
  launch_smem(tiled_dkdv_kernel<float>, dim3(key_tiles, static_cast<unsigned>(sh.B * sh.Hkv)), kSK / 16 * 32,
              dkdv_smem(sh.HP, sizeof(float)), s, dx, dout, x, stats, static_cast<const float*>(D), sh, sc);
  launch_smem(tiled_dq_kernel<float>,
              dim3(static_cast<unsigned>((sh.T + kBQ - 1) / kBQ), static_cast<unsigned>(sh.B * sh.H)), kBQ / 16 * 32,
              dq_smem(sh.HP, sizeof(float)), s, dx.q, dout, x, stats, static_cast<const float*>(D), sh, sc);
}

// The 16-bit kernels' parameters; vec when every row the kernels copy (q, k, v, and dout in
// backward: rows H·hs apart) starts 16-byte aligned.
template <typename T>
flash::Params flash_params(const Shape& sh, Qkv<T> x, const T* dout) {
  auto ok = [&](const T* base, int64_t stride) {
    return attn_mma::vector_loads_ok(sh.hs, stride, reinterpret_cast<uintptr_t>(base));
  };
  const bool vec = ok(x.q, sh.ldq) && ok(x.k, sh.ldkv) && ok(x.v, sh.ldkv) && (!dout || ok(dout, sh.H * sh.hs));
  const float sc = math::attention_scale(static_cast<int>(sh.hs));
  return {sh.B, sh.T, sh.H, sh.Hkv, sh.hs, sh.ldq, sh.ldkv, sc, sc * flash::kLog2e, vec};
}

template <typename T> void forward_any(Stream& s, T* out, float* stats, Qkv<T> x, const Shape& sh) {
  if constexpr (std::is_same_v<T, float>) {
    forward_fp32(s, out, stats, x, sh);
  } else {
    flash::flash_forward(s, out, stats, x, flash_params<T>(sh, x, nullptr));
  }
}

template <typename T>
void backward_any(Stream& s, DQkv<T> dx, const T* dout, Qkv<T> x, const T* out, const float* stats, const Shape& sh) {
  if constexpr (std::is_same_v<T, float>) {
    backward_fp32(s, dx, dout, x, out, stats, sh);
  } else {
    flash::flash_backward(s, dx, dout, x, out, stats, flash_params<T>(sh, x, dout));
  }
}

// The backward kernels add each gradient element into its tensor (once, in a fixed order); the ops
// overwrite, so their gradient tensors start at zero (all-zero bits: 0.0 in every dtype).
void overwrite_start(Stream& s, std::initializer_list<const TensorView*> grads) {
  for (const TensorView* g : grads) ZT_CUDA_CHECK(cudaMemsetAsync(g->data, 0, g->nbytes(), native(s)));
}

// GPT's packed qkv[B,T,3C] (and dqkv) as the operands: the thirds of a row, rows 3C apart.
template <typename T> Qkv<T> packed(const T* qkv, int64_t C) { return {qkv, qkv + C, qkv + 2 * C}; }
template <typename T> DQkv<T> packed_grads(T* dqkv, int64_t C) { return {dqkv, dqkv + C, dqkv + 2 * C}; }

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void attention_tiled_forward(Stream& s, const TensorView& out, const TensorView& stats, const TensorView& qkv,
                             int64_t B, int64_t T, int64_t C, int64_t H, int64_t tile_q, int64_t tile_k) {
  const Shape sh = shape_of("attention_tiled_forward", B, T, H, H, C / H, 3 * C, 3 * C, tile_q, tile_k);
  if (B == 0 || T == 0 || C == 0) return;
  ZT_DISPATCH_DTYPE(out.dtype, X, forward_any(s, static_cast<X*>(out.data), static_cast<float*>(stats.data),
                                              packed(static_cast<const X*>(qkv.data), C), sh));
}

void attention_tiled_backward(Stream& s, const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                              const TensorView& out, const TensorView& stats, int64_t B, int64_t T, int64_t C,
                              int64_t H, int64_t tile_q, int64_t tile_k) {
  const Shape sh = shape_of("attention_tiled_backward", B, T, H, H, C / H, 3 * C, 3 * C, tile_q, tile_k);
  if (B == 0 || T == 0 || C == 0) return;
  overwrite_start(s, {&dqkv});
  ZT_DISPATCH_DTYPE(dqkv.dtype, X,
                    backward_any(s, packed_grads(static_cast<X*>(dqkv.data), C), static_cast<const X*>(dout.data),
                                 packed(static_cast<const X*>(qkv.data), C), static_cast<const X*>(out.data),
                                 static_cast<const float*>(stats.data), sh));
}

void attention_gqa_forward(Stream& s, const TensorView& out, const TensorView& stats, const TensorView& q,
                           const TensorView& k, const TensorView& v, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                           int64_t hs, int64_t tile_q, int64_t tile_k) {
  const Shape sh = shape_of("attention_gqa_forward", B, T, H, Hkv, hs, H * hs, Hkv * hs, tile_q, tile_k);
  if (B == 0 || T == 0) return;
  ZT_DISPATCH_DTYPE(out.dtype, X,
                    forward_any(s, static_cast<X*>(out.data), static_cast<float*>(stats.data),
                                Qkv<X>{static_cast<const X*>(q.data), static_cast<const X*>(k.data),
                                       static_cast<const X*>(v.data)},
                                sh));
}

void attention_gqa_backward(Stream& s, const TensorView& dq, const TensorView& dk, const TensorView& dv,
                            const TensorView& dout, const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& out, const TensorView& stats, int64_t B, int64_t T, int64_t H,
                            int64_t Hkv, int64_t hs, int64_t tile_q, int64_t tile_k) {
  const Shape sh = shape_of("attention_gqa_backward", B, T, H, Hkv, hs, H * hs, Hkv * hs, tile_q, tile_k);
  if (B == 0 || T == 0) return;
  overwrite_start(s, {&dq, &dk, &dv});
  ZT_DISPATCH_DTYPE(dq.dtype, X,
                    backward_any(s, DQkv<X>{static_cast<X*>(dq.data), static_cast<X*>(dk.data),
                                            static_cast<X*>(dv.data)},
                                 static_cast<const X*>(dout.data),
                                 Qkv<X>{static_cast<const X*>(q.data), static_cast<const X*>(k.data),
                                        static_cast<const X*>(v.data)},
                                 static_cast<const X*>(out.data), static_cast<const float*>(stats.data), sh));
}

}  // namespace zt::cuda_ops
