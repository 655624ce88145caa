// layernorm.cu — LayerNorm over the last dim on the CUDA backend.
//
// Forward: one warp per row [C]; fp32 two-pass statistics (mean, then sum (x - mean)^2),
// rstd = math::layernorm_rstd; out = (x - mean) rstd w + b. mean[N], rstd[N] are fp32.
// Backward: one warp per row for dinp (+=, math::layernorm_dinp); dweight and dbias (+=) by the
// deterministic two-pass column reduction (column_reduce.cuh). Warp reductions are butterflies,
// so every lane holds the same row statistic and the order never depends on the launch.
#include "column_reduce.cuh"
#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

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
  ZT_DISPATCH_DTYPE(out.dtype, T,
                    layernorm_forward_kernel<T><<<row_blocks(N), kWarpsPerBlock * 32, 0, native(s)>>>(
                        static_cast<T*>(out.data), static_cast<float*>(mean.data), static_cast<float*>(rstd.data),
                        static_cast<const T*>(inp.data), static_cast<const T*>(weight.data),
                        static_cast<const T*>(bias.data), eps, N, C);
                    ZT_CUDA_LAUNCH_CHECK());
}

void layernorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd) {
  const int64_t C = weight.numel(), N = mean.numel();
  if (C == 0 || N == 0) return;
  ZT_DISPATCH_DTYPE(dinp.dtype, T, {
    const T* dy = static_cast<const T*>(dout.data);
    const T* x = static_cast<const T*>(inp.data);
    const float* m = static_cast<const float*>(mean.data);
    const float* rs = static_cast<const float*>(rstd.data);
    layernorm_dinp_kernel<T><<<row_blocks(N), kWarpsPerBlock * 32, 0, native(s)>>>(
        static_cast<T*>(dinp.data), dy, x, static_cast<const T*>(weight.data), m, rs, N, C);
    ZT_CUDA_LAUNCH_CHECK();
    launch_colreduce<T, 2>(s, N, C, ColOutputs<T, 2>{{static_cast<T*>(dweight.data), static_cast<T*>(dbias.data)}},
                           LayernormParamTerms<T>{dy, x, m, rs, C});
  });
}

}  // namespace zt::cuda_ops
