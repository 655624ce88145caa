// layernorm.cu — LayerNorm over the last dim on the CUDA backend.
//
// Forward: one warp per row [C]; fp32 two-pass statistics (mean, then sum (x - mean)^2),
// rstd = math::layernorm_rstd; out = (x - mean) rstd w + b. mean[N], rstd[N] are fp32.
// Backward: one warp per row for dinp (+=, math::layernorm_dinp); dweight and dbias (+=).
// Warp reductions are butterflies, so every lane holds the same row statistic and the order
// never depends on the launch; no float atomics anywhere (repeated runs are bitwise equal).
//
// Two paths, chosen on the host by layernorm_groups_per_lane (vector_path.h):
//  * vector (C % 8 == 0, every operand 16-byte aligned, C <= 2048 forward / 1024 backward):
//    lane l holds groups l, l + 32, ... (8 elements each, 128-bit loads/stores) of its row in
//    registers, G groups a lane (a template parameter). Backward also keeps dweight/dbias
//    partial sums per lane over a block's rows (kLnRowsPerBlock, warps in row order), adds the
//    warps in warp order in shared memory, writes partial[block][2][C], and
//    colreduce_finish_kernel adds the blocks in block order: fixed by (N, C) alone.
//  * scalar (anything else: misaligned views, C not a multiple of 8, wide rows): strided loops,
//    dweight/dbias by the two-pass column reduction (column_reduce.cuh).
// The per-element expressions are the same on both paths; the sums differ in order only.
#include "column_reduce.cuh"
#include "cuda_common.cuh"
#include "map_kernel.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/vector_path.h"

namespace zt::cuda_detail {
namespace {

constexpr int kWarpsPerBlock = 8;

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                         const T* bias, float eps, int64_t N, int64_t C) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= N) return;
  const T* x = inp + row * C;
  float sum = 0.0f;
  for (int64_t j = lane; j < C; j += 32) sum += to_f32(x[j]);
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t j = lane; j < C; j += 32) {
    float d = to_f32(x[j]) - m;
    sq += d * d;
  }
  const float rs = math::layernorm_rstd(warp_sum(sq) / static_cast<float>(C), eps);
  T* o = out + row * C;
  for (int64_t j = lane; j < C; j += 32) {
    float n = (to_f32(x[j]) - m) * rs;
    o[j] = from_f32<T>(n * to_f32(weight[j]) + to_f32(bias[j]));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

template <typename T>
__global__ void layernorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean,
                                      const float* rstd, int64_t N, int64_t C) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= N) return;
  const T* x = inp + row * C;
  const T* dy = dout + row * C;
  const float m = mean[row], rs = rstd[row];
  float dnorm_sum = 0.0f, dnorm_n_sum = 0.0f;
  for (int64_t j = lane; j < C; j += 32) {
    float n = (to_f32(x[j]) - m) * rs;
    float dnorm = to_f32(weight[j]) * to_f32(dy[j]);
    dnorm_sum += dnorm;
    dnorm_n_sum += dnorm * n;
  }
  const float dnorm_mean = warp_sum(dnorm_sum) / static_cast<float>(C);
  const float dnorm_n_mean = warp_sum(dnorm_n_sum) / static_cast<float>(C);
  T* dx = dinp + row * C;
  for (int64_t j = lane; j < C; j += 32) {
    float n = (to_f32(x[j]) - m) * rs;
    float dnorm = to_f32(weight[j]) * to_f32(dy[j]);
    dx[j] = from_f32<T>(to_f32(dx[j]) + math::layernorm_dinp(dnorm, n, dnorm_mean, dnorm_n_mean, rs));
  }
}

// ---- vector path ---------------------------------------------------------------------------
constexpr int kLnRowsPerBlock = 32;  // backward: rows per block (4 per warp)

// G groups of 8 per lane; groups q = lane + 32 g < C / 8 are real.
template <typename T, int G>
__global__ void layernorm_forward_vec_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                             const T* bias, float eps, int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= N) return;
  const int64_t groups = C / kMapChunk;
  const T* x = inp + row * C;
  float xv[G][kMapChunk];
  float sum = 0.0f;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t q = lane + 32 * g;
    if (q < groups) {
      load_group_typed(xv[g], x + q * kMapChunk);
#pragma unroll
      for (int k = 0; k < kMapChunk; ++k) sum += xv[g][k];
    }
  }
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane + 32 * g < groups) {
#pragma unroll
      for (int k = 0; k < kMapChunk; ++k) {
        const float d = xv[g][k] - m;
        sq += d * d;
      }
    }
  }
  const float rs = math::layernorm_rstd(warp_sum(sq) / static_cast<float>(C), eps);
  T* o = out + row * C;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t q = lane + 32 * g;
    if (q >= groups) continue;
    float w[kMapChunk], b[kMapChunk];
    load_group_typed(w, weight + q * kMapChunk);
    load_group_typed(b, bias + q * kMapChunk);
    MapChunk<T> r;
#pragma unroll
    for (int k = 0; k < kMapChunk; ++k) {
      const float n = (xv[g][k] - m) * rs;
      r.v[k] = from_f32<T>(n * w[k] + b[k]);
    }
    *reinterpret_cast<MapChunk<T>*>(o + q * kMapChunk) = r;
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

// dinp += (per row); partial[block][0][c] = Σ dout·n, partial[block][1][c] = Σ dout over the
// block's rows. Dynamic shared memory: 2·C floats.
template <typename T, int G>
__global__ void layernorm_backward_vec_kernel(T* dinp, float* partial, const T* dout, const T* inp, const T* weight,
                                              const float* mean, const float* rstd, int64_t N, int64_t C) {
  extern __shared__ float acc_sm[];  // [2][C]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t groups = C / kMapChunk;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kLnRowsPerBlock;
  const int64_t r1 = min(N, r0 + kLnRowsPerBlock);
  float dw[G][kMapChunk], db[G][kMapChunk];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int k = 0; k < kMapChunk; ++k) dw[g][k] = db[g][k] = 0.0f;
  for (int64_t row = r0 + warp; row < r1; row += kWarpsPerBlock) {
    const T* x = inp + row * C;
    const T* dy = dout + row * C;
    const float m = mean[row], rs = rstd[row];
    float nv[G][kMapChunk], gv[G][kMapChunk];
    float dnorm_sum = 0.0f, dnorm_n_sum = 0.0f;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int64_t q = lane + 32 * g;
      if (q >= groups) continue;
      float w[kMapChunk];
      load_group_typed(nv[g], x + q * kMapChunk);
      load_group_typed(gv[g], dy + q * kMapChunk);
      load_group_typed(w, weight + q * kMapChunk);
#pragma unroll
      for (int k = 0; k < kMapChunk; ++k) {
        const float n = (nv[g][k] - m) * rs;
        nv[g][k] = n;
        const float dnorm = w[k] * gv[g][k];
        dnorm_sum += dnorm;
        dnorm_n_sum += dnorm * n;
      }
    }
    const float dnorm_mean = warp_sum(dnorm_sum) / static_cast<float>(C);
    const float dnorm_n_mean = warp_sum(dnorm_n_sum) / static_cast<float>(C);
    T* dx = dinp + row * C;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int64_t q = lane + 32 * g;
      if (q >= groups) continue;
      float w[kMapChunk], d[kMapChunk];
      load_group_typed(w, weight + q * kMapChunk);
      load_group_typed(d, dx + q * kMapChunk);
      MapChunk<T> r;
#pragma unroll
      for (int k = 0; k < kMapChunk; ++k) {
        const float dnorm = w[k] * gv[g][k];
        r.v[k] = from_f32<T>(d[k] + math::layernorm_dinp(dnorm, nv[g][k], dnorm_mean, dnorm_n_mean, rs));
        dw[g][k] += nv[g][k] * gv[g][k];  // (x - mean) rstd dout, as LayernormParamTerms
        db[g][k] += gv[g][k];
      }
      *reinterpret_cast<MapChunk<T>*>(dx + q * kMapChunk) = r;
    }
  }
  // Warps add into shared memory one after another, in warp order (deterministic).
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    if (warp == w) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int64_t q = lane + 32 * g;
        if (q >= groups) continue;
#pragma unroll
        for (int k = 0; k < kMapChunk; ++k) {
          const int64_t c = q * kMapChunk + k;
          acc_sm[c] = (w == 0 ? 0.0f : acc_sm[c]) + dw[g][k];
          acc_sm[C + c] = (w == 0 ? 0.0f : acc_sm[C + c]) + db[g][k];
        }
      }
    }
    __syncthreads();
  }
  float* out = partial + static_cast<int64_t>(blockIdx.x) * 2 * C;
  for (int64_t c = threadIdx.x; c < 2 * C; c += blockDim.x) out[c] = acc_sm[c];
}

template <typename T, int G>
void launch_layernorm_backward_vec(Stream& s, T* dinp, ColOutputs<T, 2> dweight_dbias, const T* dout, const T* inp,
                                   const T* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t blocks = (N + kLnRowsPerBlock - 1) / kLnRowsPerBlock;
  auto* partial = static_cast<float*>(scratch(s, static_cast<size_t>(blocks * 2 * C) * sizeof(float)));
  const size_t smem = static_cast<size_t>(2 * C) * sizeof(float);  // <= 8 KiB (C <= 1024)
  layernorm_backward_vec_kernel<T, G><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, smem, native(s)>>>(
      dinp, partial, dout, inp, weight, mean, rstd, N, C);
  ZT_CUDA_LAUNCH_CHECK();
  colreduce_finish_kernel<T, 2><<<static_cast<unsigned>((C + 255) / 256), 256, 0, native(s)>>>(
      C, blocks, partial, dweight_dbias);
  ZT_CUDA_LAUNCH_CHECK();
}

// Row r's terms for dweight[c] (dout * n) and dbias[c] (dout).
template <typename T> struct LayernormParamTerms {
  const T* dout;
  const T* inp;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void operator()(int64_t r, int64_t c, float (&v)[2]) const {
    float g = to_f32(dout[r * C + c]);
    v[0] += (to_f32(inp[r * C + c]) - mean[r]) * rstd[r] * g;
    v[1] += g;
  }
};

unsigned row_blocks(int64_t N) { return static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void layernorm_forward(Stream& s, const TensorView& out, const TensorView& mean, const TensorView& rstd,
                       const TensorView& inp, const TensorView& weight, const TensorView& bias, float eps) {
  const int64_t C = weight.numel(), N = mean.numel();
  if (C == 0 || N == 0) return;
  const void* ptrs[4] = {out.data, inp.data, weight.data, bias.data};
  const int G = layernorm_groups_per_lane(C, ptrs, 4, kLnFwdMaxGroupsPerLane);
  ZT_DISPATCH_DTYPE(out.dtype, T, {
    T* o = static_cast<T*>(out.data);
    float* m = static_cast<float*>(mean.data);
    float* rs = static_cast<float*>(rstd.data);
    const T* x = static_cast<const T*>(inp.data);
    const T* w = static_cast<const T*>(weight.data);
    const T* b = static_cast<const T*>(bias.data);
    const dim3 grid(row_blocks(N)), block(kWarpsPerBlock * 32);
    switch (G) {
      case 1: layernorm_forward_vec_kernel<T, 1><<<grid, block, 0, native(s)>>>(o, m, rs, x, w, b, eps, N, C); break;
      case 2: layernorm_forward_vec_kernel<T, 2><<<grid, block, 0, native(s)>>>(o, m, rs, x, w, b, eps, N, C); break;
      case 3: layernorm_forward_vec_kernel<T, 3><<<grid, block, 0, native(s)>>>(o, m, rs, x, w, b, eps, N, C); break;
      case 4: layernorm_forward_vec_kernel<T, 4><<<grid, block, 0, native(s)>>>(o, m, rs, x, w, b, eps, N, C); break;
      case 5: case 6: case 7: case 8:
        layernorm_forward_vec_kernel<T, 8><<<grid, block, 0, native(s)>>>(o, m, rs, x, w, b, eps, N, C); break;
      default: layernorm_forward_kernel<T><<<grid, block, 0, native(s)>>>(o, m, rs, x, w, b, eps, N, C); break;
    }
    ZT_CUDA_LAUNCH_CHECK();
  });
}

void layernorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd) {
  const int64_t C = weight.numel(), N = mean.numel();
  if (C == 0 || N == 0) return;
  const void* ptrs[4] = {dinp.data, dout.data, inp.data, weight.data};
  const int G = layernorm_groups_per_lane(C, ptrs, 4, kLnBwdMaxGroupsPerLane);
  ZT_DISPATCH_DTYPE(dinp.dtype, T, {
    const T* dy = static_cast<const T*>(dout.data);
    const T* x = static_cast<const T*>(inp.data);
    const float* m = static_cast<const float*>(mean.data);
    const float* rs = static_cast<const float*>(rstd.data);
    T* dx = static_cast<T*>(dinp.data);
    const ColOutputs<T, 2> dwdb{{grad_out<T>(dweight), grad_out<T>(dbias)}};
    const T* w = static_cast<const T*>(weight.data);
    switch (G) {
      case 1: return launch_layernorm_backward_vec<T, 1>(s, dx, dwdb, dy, x, w, m, rs, N, C);
      case 2: return launch_layernorm_backward_vec<T, 2>(s, dx, dwdb, dy, x, w, m, rs, N, C);
      case 3: return launch_layernorm_backward_vec<T, 3>(s, dx, dwdb, dy, x, w, m, rs, N, C);
      case 4: return launch_layernorm_backward_vec<T, 4>(s, dx, dwdb, dy, x, w, m, rs, N, C);
      default: break;  // the scalar path below
    }
    layernorm_dinp_kernel<T><<<row_blocks(N), kWarpsPerBlock * 32, 0, native(s)>>>(
        static_cast<T*>(dinp.data), dy, x, static_cast<const T*>(weight.data), m, rs, N, C);
    ZT_CUDA_LAUNCH_CHECK();
    launch_colreduce<T, 2>(s, N, C, dwdb,
                           LayernormParamTerms<T>{dy, x, m, rs, C});
  });
}

}  // namespace zt::cuda_ops
