// attention_decode.cu — the key/value cache ops of incremental decoding on the CUDA backend
// (contracts in op_list.h), for GPT's packed qkv rows (kv_cache_write, attention_decode) and
// grouped-query attention's separate q, k, v (kv_cache_write_gqa, attention_decode_gqa): the same
// kernels over base pointers and row strides. Cache layout [Hkv, Tmax, hs] (Hkv = H for GPT);
// query head h reads cache head h / (H/Hkv).
//
// decode: one block per query head. The pos+1 scores live in dynamic shared memory (fp32, at most
// kMaxPositions of them); each thread scores keys t = tid, tid + blockDim, ...; the max and the
// sum of exponentials are deterministic block reductions (cuda_common.cuh); then thread i of the
// block sums p_t · v[t, i] over t in order for its output channels. Deterministic: every
// reduction has an order fixed by the launch shape.
#include <cmath>

#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/math.h"

namespace zt::cuda_detail {
namespace {

constexpr int kDecodeThreads = 128;
constexpr int64_t kMaxPositions = 12 * 1024;  // 48 KiB of fp32 scores: the default shared memory limit

// Rows n of k and v (head g at k + n·ld + g·hs) into cache rows pos + n of head g.
template <typename T>
__global__ void kv_cache_write_kernel(T* kc, T* vc, const T* k, const T* v, int64_t ld, int64_t N, int64_t Hkv,
                                      int64_t hs, int64_t Tmax, int64_t pos) {
  const int64_t C = Hkv * hs, total = N * C;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t n = idx / C, c = idx - n * C, g = c / hs, i = c - g * hs;
    const int64_t dst = (g * Tmax + pos + n) * hs + i;
    kc[dst] = k[n * ld + c];
    vc[dst] = v[n * ld + c];
  }
}

template <typename T>
__global__ void attention_decode_kernel(T* out, const T* q_all, const T* kc, const T* vc, int64_t H, int64_t Hkv,
                                        int64_t hs, int64_t Tmax, int64_t pos, float sc) {
  extern __shared__ float scores[];  // [pos + 1]
  __shared__ float red[32];
  const int64_t h = blockIdx.x, g = h / (H / Hkv), n = pos + 1;
  const T* q = q_all + h * hs;
  const T* k = kc + g * Tmax * hs;
  const T* v = vc + g * Tmax * hs;
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

void cache_write(Stream& s, const TensorView& k_cache, const TensorView& v_cache, DType dt, const void* k,
                 const void* v, int64_t ld, int64_t N, int64_t Hkv, int64_t hs, int64_t pos) {
  if (N == 0) return;
  const int64_t Tmax = k_cache.numel() / (Hkv * hs);
  ZT_DISPATCH_DTYPE(dt, X,
                    kv_cache_write_kernel<X><<<grid_for(N * Hkv * hs, 256), 256, 0, native(s)>>>(
                        static_cast<X*>(k_cache.data), static_cast<X*>(v_cache.data), static_cast<const X*>(k),
                        static_cast<const X*>(v), ld, N, Hkv, hs, Tmax, pos);
                    ZT_CUDA_LAUNCH_CHECK());
}

void decode(Stream& s, const char* op, const TensorView& out, const void* q, const TensorView& k_cache,
            const TensorView& v_cache, int64_t H, int64_t Hkv, int64_t hs, int64_t pos) {
  const int64_t Tmax = k_cache.numel() / (Hkv * hs);
  ZT_CHECK(pos + 1 <= kMaxPositions, std::string(op) + " (CUDA): " + std::to_string(pos + 1) +
                                         " cached positions, more than the " + std::to_string(kMaxPositions) +
                                         " its shared-memory scores hold");
  const float sc = math::attention_scale(static_cast<int>(hs));
  const size_t smem = static_cast<size_t>(pos + 1) * sizeof(float);
  ZT_DISPATCH_DTYPE(out.dtype, X,
                    attention_decode_kernel<X><<<static_cast<unsigned>(H), kDecodeThreads, smem, native(s)>>>(
                        static_cast<X*>(out.data), static_cast<const X*>(q), static_cast<const X*>(k_cache.data),
                        static_cast<const X*>(v_cache.data), H, Hkv, hs, Tmax, pos, sc);
                    ZT_CUDA_LAUNCH_CHECK());
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace cuda_detail;

void kv_cache_write(Stream& s, const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N,
                    int64_t C, int64_t H, int64_t pos) {
  if (N == 0) return;
  const size_t third = static_cast<size_t>(C) * dtype_size(qkv.dtype);
  const char* x = static_cast<const char*>(qkv.data);
  cache_write(s, k_cache, v_cache, qkv.dtype, x + third, x + 2 * third, 3 * C, N, H, C / H, pos);
}

void attention_decode(Stream& s, const TensorView& out, const TensorView& qkv, const TensorView& k_cache,
                      const TensorView& v_cache, int64_t C, int64_t H, int64_t pos) {
  decode(s, "attention_decode", out, qkv.data, k_cache, v_cache, H, H, C / H, pos);
}

void kv_cache_write_gqa(Stream& s, const TensorView& k_cache, const TensorView& v_cache, const TensorView& k,
                        const TensorView& v, int64_t N, int64_t Hkv, int64_t hs, int64_t pos) {
  cache_write(s, k_cache, v_cache, k.dtype, k.data, v.data, Hkv * hs, N, Hkv, hs, pos);
}

void attention_decode_gqa(Stream& s, const TensorView& out, const TensorView& q, const TensorView& k_cache,
                          const TensorView& v_cache, int64_t H, int64_t Hkv, int64_t hs, int64_t pos) {
  decode(s, "attention_decode_gqa", out, q.data, k_cache, v_cache, H, Hkv, hs, pos);
}

}  // namespace zt::cuda_ops
