// rmsnorm.cu — RMSNorm over the last dim on the CUDA backend (Llama).
//
// Forward: one warp per row [C]; rstd = math::layernorm_rstd(Σ x² / C, eps) in fp32 (warp
// butterfly, so every lane holds the same rstd), out = x rstd w. rstd[N] is fp32.
// Backward: one warp per row for dinp (+=, math::rmsnorm_dinp with the row mean of
// w dout x rstd); dweight (+=) by the two-pass column reduction (column_reduce.cuh): per-chunk
// partial sums, then the chunks in chunk order. No float atomics: repeated runs are bitwise
// equal, and the order is fixed by (N, C) alone.
#include "column_reduce.cuh"
#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/math_llama.h"

namespace zt::cuda_detail {
namespace {

constexpr int kRmsWarpsPerBlock = 8;

unsigned rms_row_blocks(int64_t N) { return static_cast<unsigned>((N + kRmsWarpsPerBlock - 1) / kRmsWarpsPerBlock); }

template <typename T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, float eps, int64_t N,
                                       int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRmsWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= N) return;
  const T* x = inp + row * C;
  float sq = 0.0f;
  for (int64_t j = lane; j < C; j += 32) {
    const float v = to_f32(x[j]);
    sq += v * v;
  }
  const float rs = math::layernorm_rstd(warp_sum(sq) / static_cast<float>(C), eps);
  T* o = out + row * C;
  for (int64_t j = lane; j < C; j += 32) o[j] = from_f32<T>(to_f32(x[j]) * rs * to_f32(weight[j]));
  if (lane == 0) rstd[row] = rs;
}

template <typename T>
__global__ void rmsnorm_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* rstd,
                                    int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRmsWarpsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= N) return;
  const T* x = inp + row * C;
  const T* dy = dout + row * C;
  const float rs = rstd[row];
  float dn_n = 0.0f;  // Σ (w dout) (x rstd), as the CPU backend
  for (int64_t j = lane; j < C; j += 32) dn_n += to_f32(weight[j]) * to_f32(dy[j]) * (to_f32(x[j]) * rs);
  const float dn_n_mean = warp_sum(dn_n) / static_cast<float>(C);
  T* dx = dinp + row * C;
  for (int64_t j = lane; j < C; j += 32) {
    const float dnorm = to_f32(weight[j]) * to_f32(dy[j]);
    dx[j] = from_f32<T>(to_f32(dx[j]) + math::rmsnorm_dinp(dnorm, to_f32(x[j]) * rs, dn_n_mean, rs));
  }
}

// Row r's term for dweight[c]: x rstd dout.
template <typename T> struct RmsnormWeightTerm {
  const T* dout;
  const T* inp;
  const float* rstd;
  int64_t C;
  __device__ void operator()(int64_t r, int64_t c, float (&v)[1]) const {
    v[0] += to_f32(inp[r * C + c]) * rstd[r] * to_f32(dout[r * C + c]);
  }
};

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void rmsnorm_forward(Stream& s, const TensorView& out, const TensorView& rstd, const TensorView& inp,
                     const TensorView& weight, float eps) {
  const int64_t C = weight.numel(), N = rstd.numel();
  if (C == 0 || N == 0) return;
  ZT_DISPATCH_DTYPE(out.dtype, T, {
    rmsnorm_forward_kernel<T><<<rms_row_blocks(N), kRmsWarpsPerBlock * 32, 0, native(s)>>>(
        static_cast<T*>(out.data), static_cast<float*>(rstd.data), static_cast<const T*>(inp.data),
        static_cast<const T*>(weight.data), eps, N, C);
    ZT_CUDA_LAUNCH_CHECK();
  });
}

void rmsnorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dout,
                      const TensorView& inp, const TensorView& weight, const TensorView& rstd) {
  const int64_t C = weight.numel(), N = rstd.numel();
  if (C == 0 || N == 0) return;
  ZT_DISPATCH_DTYPE(dinp.dtype, T, {
    const T* dy = static_cast<const T*>(dout.data);
    const T* x = static_cast<const T*>(inp.data);
    const float* rs = static_cast<const float*>(rstd.data);
    rmsnorm_dinp_kernel<T><<<rms_row_blocks(N), kRmsWarpsPerBlock * 32, 0, native(s)>>>(
        static_cast<T*>(dinp.data), dy, x, static_cast<const T*>(weight.data), rs, N, C);
    ZT_CUDA_LAUNCH_CHECK();
    launch_colreduce<T, 1>(s, N, C, ColOutputs<T, 1>{{grad_out<T>(dweight)}},
                           RmsnormWeightTerm<T>{dy, x, rs, C});
  });
}

}  // namespace zt::cuda_ops
