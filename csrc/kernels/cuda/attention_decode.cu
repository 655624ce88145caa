// attention_decode.cu — the key/value cache ops of incremental decoding on the CUDA backend
// (contracts in op_list.h). Cache layout [H, Tmax, hs].
//
// attention_decode: one block per head. The pos+1 scores live in dynamic shared memory (fp32,
// at most kMaxPositions of them); each thread scores keys t = tid, tid + blockDim, ...; the max
// and the sum of exponentials are deterministic block reductions (cuda_common.cuh); then thread i
// of the block sums p_t · v[t, i] over t in order for its output channels. Deterministic: every
// reduction has an order fixed by the launch shape.
#include <cmath>

#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/math.h"

namespace zt::cuda_detail {
namespace {

constexpr int kDecodeThreads = 128;
constexpr int64_t kMaxPositions = 12 * 1024;  // 48 KiB of fp32 scores: the default shared memory limit

template <typename T>
__global__ void kv_cache_write_kernel(T* kc, T* vc, const T* qkv, int64_t N, int64_t C, int64_t H, int64_t Tmax,
                                      int64_t pos) {
  const int64_t hs = C / H, total = N * C;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t n = idx / C, c = idx - n * C, h = c / hs, i = c - h * hs;
    const int64_t dst = (h * Tmax + pos + n) * hs + i;
    kc[dst] = qkv[n * 3 * C + C + c];
    vc[dst] = qkv[n * 3 * C + 2 * C + c];
  }
}

template <typename T>
__global__ void attention_decode_kernel(T* out, const T* qkv, const T* kc, const T* vc, int64_t C, int64_t H,
                                        int64_t Tmax, int64_t pos, float sc) {
  extern __shared__ float scores[];  // [pos + 1]
  __shared__ float red[32];
  const int64_t hs = C / H, h = blockIdx.x, n = pos + 1;
  const T* q = qkv + h * hs;
  const T* k = kc + h * Tmax * hs;
  const T* v = vc + h * Tmax * hs;
  float local_max = -INFINITY;
  for (int64_t t = threadIdx.x; t < n; t += blockDim.x) {
    float d = 0.0f;
    for (int64_t i = 0; i < hs; ++i) d += to_f32(q[i]) * to_f32(k[t * hs + i]);
    scores[t] = d * sc;
    local_max = fmaxf(local_max, scores[t]);
  }
  const float maxv = block_max(local_max, red);
  float local_sum = 0.0f;
  for (int64_t t = threadIdx.x; t < n; t += blockDim.x) {
    scores[t] = expf(scores[t] - maxv);
    local_sum += scores[t];
  }
  const float inv = 1.0f / block_sum(local_sum, red);  // block_sum synchronises: every score is written
  for (int64_t i = threadIdx.x; i < hs; i += blockDim.x) {
    float y = 0.0f;
    for (int64_t t = 0; t < n; ++t) y += scores[t] * inv * to_f32(v[t * hs + i]);
    out[h * hs + i] = from_f32<T>(y);
  }
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace cuda_detail;

void kv_cache_write(Stream& s, const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N,
                    int64_t C, int64_t H, int64_t pos) {
  if (N == 0) return;
  const int64_t Tmax = k_cache.numel() / C;
  ZT_DISPATCH_DTYPE(qkv.dtype, X,
                    kv_cache_write_kernel<X><<<grid_for(N * C, 256), 256, 0, native(s)>>>(
                        static_cast<X*>(k_cache.data), static_cast<X*>(v_cache.data),
                        static_cast<const X*>(qkv.data), N, C, H, Tmax, pos);
                    ZT_CUDA_LAUNCH_CHECK());
}

void attention_decode(Stream& s, const TensorView& out, const TensorView& qkv, const TensorView& k_cache,
                      const TensorView& v_cache, int64_t C, int64_t H, int64_t pos) {
  const int64_t Tmax = k_cache.numel() / C;
  ZT_CHECK(pos + 1 <= kMaxPositions, "attention_decode (CUDA): " + std::to_string(pos + 1) +
                                         " cached positions, more than the " + std::to_string(kMaxPositions) +
                                         " its shared-memory scores hold");
  const float sc = math::attention_scale(static_cast<int>(C / H));
  const size_t smem = static_cast<size_t>(pos + 1) * sizeof(float);
  ZT_DISPATCH_DTYPE(qkv.dtype, X,
                    attention_decode_kernel<X><<<static_cast<unsigned>(H), kDecodeThreads, smem, native(s)>>>(
                        static_cast<X*>(out.data), static_cast<const X*>(qkv.data),
                        static_cast<const X*>(k_cache.data), static_cast<const X*>(v_cache.data), C, H, Tmax, pos,
                        sc);
                    ZT_CUDA_LAUNCH_CHECK());
}

}  // namespace zt::cuda_ops
