// cpu_decode.cpp — the key/value cache ops of incremental decoding on the CPU backend
// (contracts in op_list.h). Cache layout [H, Tmax, hs]; qkv rows as attention_forward's.
// attention_decode computes the scores, the softmax (max-subtracted, expf, one sequential sum)
// and the weighted sum of v in fp32, in a fixed order: repeated runs are bitwise equal.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {

void kv_cache_write(const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N, int64_t C,
                    int64_t H, int64_t pos) {
  const int64_t hs = C / H, Tmax = k_cache.numel() / C;
  dispatch_dtype(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(qkv.data);
    T* kc = static_cast<T*>(k_cache.data);
    T* vc = static_cast<T*>(v_cache.data);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h) {
        const T* row = x + n * 3 * C + h * hs;
        const int64_t dst = (h * Tmax + pos + n) * hs;
        std::copy(row + C, row + C + hs, kc + dst);
        std::copy(row + 2 * C, row + 2 * C + hs, vc + dst);
      }
  });
}

void attention_decode(const TensorView& out, const TensorView& qkv, const TensorView& k_cache,
                      const TensorView& v_cache, int64_t C, int64_t H, int64_t pos) {
  const int64_t hs = C / H, Tmax = k_cache.numel() / C, n = pos + 1;
  const float sc = math::attention_scale(static_cast<int>(hs));
  dispatch_dtype(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* q = static_cast<const T*>(qkv.data);
    const T* kc = static_cast<const T*>(k_cache.data);
    const T* vc = static_cast<const T*>(v_cache.data);
    T* o = static_cast<T*>(out.data);
    std::vector<float> p(static_cast<size_t>(n)), y(static_cast<size_t>(hs));
    for (int64_t h = 0; h < H; ++h) {
      const T* k = kc + h * Tmax * hs;
      const T* v = vc + h * Tmax * hs;
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
  });
}

}  // namespace zt::cpu_ops
