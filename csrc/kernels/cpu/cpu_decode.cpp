// cpu_decode.cpp — the key/value cache ops of incremental decoding on the CPU backend
// (contracts in op_list.h), for GPT's packed qkv rows (kv_cache_write, attention_decode) and
// grouped-query attention's separate q, k, v (kv_cache_write_gqa, attention_decode_gqa): one
// implementation over base pointers and row strides. Cache layout [Hkv, Tmax, hs] (Hkv = H for
// GPT); query head h reads cache head h / (H/Hkv).
// The decode computes the scores, the softmax (max-subtracted, expf, one sequential sum) and the
// weighted sum of v in fp32, in a fixed order: repeated runs are bitwise equal.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

// Rows n = 0..N-1 of k and v (head g at k + n·ld + g·hs) into cache rows pos + n of head g.
template <typename T>
void cache_write(T* kc, T* vc, const T* k, const T* v, int64_t ld, int64_t N, int64_t Hkv, int64_t hs, int64_t Tmax,
                 int64_t pos) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < Hkv; ++g) {
      const int64_t src = n * ld + g * hs, dst = (g * Tmax + pos + n) * hs;
      std::copy(k + src, k + src + hs, kc + dst);
      std::copy(v + src, v + src + hs, vc + dst);
    }
}

// o[h·hs ..] = softmax(q_h·kᵀ/sqrt(hs))·v over cache rows 0..pos of head h / (H/Hkv), every head h.
template <typename T>
void decode(T* o, const T* q, const T* kc, const T* vc, int64_t H, int64_t Hkv, int64_t hs, int64_t Tmax,
            int64_t pos) {
  const int64_t n = pos + 1, G = H / Hkv;
  const float sc = math::attention_scale(static_cast<int>(hs));
  std::vector<float> p(static_cast<size_t>(n)), y(static_cast<size_t>(hs));
  for (int64_t h = 0; h < H; ++h) {
    const T* k = kc + h / G * Tmax * hs;
    const T* v = vc + h / G * Tmax * hs;
    float maxv = -INFINITY;
    for (int64_t t = 0; t < n; ++t) {
      float d = 0.0f;
      for (int64_t i = 0; i < hs; ++i) d += to_f32(q[h * hs + i]) * to_f32(k[t * hs + i]);
      p[t] = d * sc;
      maxv = std::max(maxv, p[t]);
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n; ++t) {
      p[t] = expf(p[t] - maxv);
      sum += p[t];
    }
    const float inv = 1.0f / sum;
    std::fill(y.begin(), y.end(), 0.0f);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < hs; ++i) y[i] += p[t] * inv * to_f32(v[t * hs + i]);
    for (int64_t i = 0; i < hs; ++i) o[h * hs + i] = from_f32<T>(y[i]);
  }
}

}  // namespace

void kv_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N, int64_t C,
                    int64_t H, int64_t pos) {
  dispatch_dtype(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(qkv.data);
    cache_write(static_cast<T*>(k_cache.data), static_cast<T*>(v_cache.data), x + C, x + 2 * C, 3 * C, N, H, C / H,
                k_cache.numel() / C, pos);
  });
}

void attention_decode(const TensorView& out, const TensorView& qkv, const TensorView& k_cache,
                      const TensorView& v_cache, int64_t C, int64_t H, int64_t pos) {
  dispatch_dtype(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    decode(static_cast<T*>(out.data), static_cast<const T*>(qkv.data), static_cast<const T*>(k_cache.data),
           static_cast<const T*>(v_cache.data), H, H, C / H, k_cache.numel() / C, pos);
  });
}

void kv_cache_write_gqa(const TensorView& k_cache, const TensorView& v_cache, const TensorView& k, const TensorView& v,
                        int64_t N, int64_t Hkv, int64_t hs, int64_t pos) {
  dispatch_dtype(k.dtype, [&](auto tag) {
    using T = decltype(tag);
    cache_write(static_cast<T*>(k_cache.data), static_cast<T*>(v_cache.data), static_cast<const T*>(k.data),
                static_cast<const T*>(v.data), Hkv * hs, N, Hkv, hs, k_cache.numel() / (Hkv * hs), pos);
  });
}

void attention_decode_gqa(const TensorView& out, const TensorView& q, const TensorView& k_cache,
                          const TensorView& v_cache, int64_t H, int64_t Hkv, int64_t hs, int64_t pos) {
  dispatch_dtype(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    decode(static_cast<T*>(out.data), static_cast<const T*>(q.data), static_cast<const T*>(k_cache.data),
           static_cast<const T*>(v_cache.data), H, Hkv, hs, k_cache.numel() / (Hkv * hs), pos);
  });
}

}  // namespace zt::cpu_ops
