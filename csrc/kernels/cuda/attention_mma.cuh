// attention_mma.cuh — warp-level tensor-core building blocks of the 16-bit tiled attention kernels
// (attention_flash_fwd.cu, attention_flash_bwd.cu): inline-PTX mma.sync m16n8k16 (bf16/fp16 in,
// fp32 accumulate), ldmatrix x4 (+ .trans), cp.async with zero fill, ex2.approx, and the block
// cooperative tile loader. Index math: zerotrain/kernels/attention_mma_layout.h (CPU-tested).
// Requires sm_80+ (cp.async, bf16 mma); the library is built for sm_80 and sm_90.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda_common.cuh"
#include "zerotrain/kernels/attention_mma_layout.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::cuda_detail::flash {

using attn_mma::kBlockCols;
using attn_mma::kBlockRows;
using attn_mma::kWarpRows;
using attn_mma::kWarps;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Problem shape and per-launch constants shared by the three kernels. Query head h of batch row b,
// row t is q + (b·T + t)·ldq + h·hs; it reads key/value head g = h / (H/Hkv), rows
// k (v) + (b·T + t)·ldkv + g·hs. dq, dk, dv have their inputs' strides; out and dout are
// [B,T,H·hs]. GPT's packed qkv[B,T,3C]: q, k, v = qkv + 0, C, 2C, ldq = ldkv = 3C, Hkv = H.
struct Params {
  int64_t B, T, H, Hkv, hs;
  int64_t ldq, ldkv;
  float scale;        // 1/sqrt(hs): the score scale
  float scale_log2;   // scale·log2(e): scores in base-2 units for ex2
  bool vec;           // 16-byte cp.async loads allowed (attn_mma::vector_loads_ok for every input)
  __host__ __device__ int64_t ldo() const { return H * hs; }
  __host__ __device__ int64_t group() const { return H / Hkv; }
};

// The inputs (q, k, v) and the accumulated gradients (dq, dk, dv) of one attention call.
template <typename T> struct Qkv {
  const T *q, *k, *v;
};
template <typename T> struct DQkv {
  T *q, *k, *v;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}

// c (16x8 fp32) += a (16x16) · b (16x8).
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<bf16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<fp16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to nearest even into one 16-bit pair register: lo in bits 0-15.
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<bf16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<fp16>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 2^x, approximate (MUFU; ~2 ulp, +0 for -inf, flushes denormal results to 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// cp.async: copy `bytes` (16) or zero-fill when src_bytes = 0 (the source is then not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are pending (a __syncthreads must follow
// before other threads' copies are read).
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Block-cooperative copy of head rows [t0, t0+R) into dst[R][smem_stride(D)]:
//   dst[r][c] = src[(b·T + t0 + r)·row_stride + col0 + c] for t0 + r < T and c < hs, else 0.
// vec: 16-byte cp.async chunks (hs % 8 == 0, aligned rows), completed by cp_async_wait + barrier;
// otherwise synchronous 2-byte loads (any hs, any alignment), visible after the next barrier.
// Columns D..D+7 of each smem row are padding and never read.
template <typename T, int D, int R>
__device__ __forceinline__ void load_rows(T* dst, const T* src, int64_t b, int64_t t0, int64_t row_stride,
                                          int64_t col0, const Params& p) {
  constexpr int LD = attn_mma::smem_stride(D);
  if (p.vec) {
    constexpr int kChunks = D / 8;
    for (int i = threadIdx.x; i < R * kChunks; i += kThreads) {
      const int r = i / kChunks, c = (i % kChunks) * 8;
      const int64_t t = t0 + r;
      const bool ok = t < p.T && c < p.hs;
      const T* g = ok ? src + (b * p.T + t) * row_stride + col0 + c : src;
      cp_async16(dst + r * LD + c, g, ok);
    }
  } else {
    for (int i = threadIdx.x; i < R * D; i += kThreads) {
      const int r = i / D, c = i % D;
      const int64_t t = t0 + r;
      dst[r * LD + c] = (t < p.T && c < p.hs) ? src[(b * p.T + t) * row_stride + col0 + c] : from_f32<T>(0.0f);
    }
  }
}

// ---- warp tile GEMMs: one warp, a 16-row A block, fp32 C fragments c[n8 tile][4] ----

// a[kk] = A fragment of columns 16kk..16kk+15 of the 16 x K row-major tile at `tile` (stride ld).
template <int K, typename T>
__device__ __forceinline__ void load_a(uint32_t (&a)[K / 16][4], const T* tile, int ld) {
  const int lane = threadIdx.x & 31;
  const T* base = tile + attn_mma::ldsm_a_row(lane) * ld + attn_mma::ldsm_a_col(lane);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) ldsm_x4(a[kk], base + kk * 16);
}

// c[N/8] += A (16 x K, fragments) · Btᵀ, Bt an N x K row-major tile (stride ld): S = Q Kᵀ and kin.
template <int K, int N, typename T>
__device__ __forceinline__ void gemm_nt(float (&c)[N / 8][4], const uint32_t (&a)[K / 16][4], const T* bt, int ld) {
  const int lane = threadIdx.x & 31;
  const T* base = bt + attn_mma::ldsm_bt_row(lane) * ld + attn_mma::ldsm_bt_col(lane);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      uint32_t b[4];
      ldsm_x4(b, base + nn * 16 * ld + kk * 16);
      mma16816<T>(c[2 * nn], a[kk], b[0], b[1]);
      mma16816<T>(c[2 * nn + 1], a[kk], b[2], b[3]);
    }
}

// c[N/8] += A (16 x K, fragments) · Bm, Bm a K x N row-major tile (stride ld): O += P V and kin.
template <int K, int N, typename T>
__device__ __forceinline__ void gemm_nn(float (&c)[N / 8][4], const uint32_t (&a)[K / 16][4], const T* bm, int ld) {
  const int lane = threadIdx.x & 31;
  const T* base = bm + attn_mma::ldsm_bk_row(lane) * ld + attn_mma::ldsm_bk_col(lane);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      uint32_t b[4];
      ldsm_x4_trans(b, base + kk * 16 * ld + nn * 16);
      mma16816<T>(c[2 * nn], a[kk], b[0], b[1]);
      mma16816<T>(c[2 * nn + 1], a[kk], b[2], b[3]);
    }
}

// The C fragments of a 16 x K fp32 tile as the 16-bit A fragments of the same tile (registers only).
template <int K, typename T>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[K / 16][4], const float (&c)[K / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    a[kk][0] = pack2<T>(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack2<T>(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

template <int N> __device__ __forceinline__ void zero(float (&c)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
}

// Launchers (host): the 16-bit (bf16 / fp16) kernels. dq, dk, dv accumulate (+=) like every backward.
template <typename T> void flash_forward(Stream& s, T* out, float* stats, Qkv<T> x, const Params& p);
template <typename T>
void flash_backward(Stream& s, DQkv<T> dx, const T* dout, Qkv<T> x, const T* out, const float* stats,
                    const Params& p);

}  // namespace zt::cuda_detail::flash
