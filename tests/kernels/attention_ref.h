// attention_ref.h — GPT-2 causal attention in double precision, written independently of the
// kernels: the reference of the materialised and the tiled attention tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace zt::test {

// out[B,T,C] of GPT-2 causal attention over qkv[B,T,3C]; optional probabilities att[B,H,T,T].
inline std::vector<double> causal_attention_ref(const std::vector<double>& qkv, int64_t B, int64_t T, int64_t C, int64_t H,
                                                std::vector<double>* att = nullptr) {
  const struct { int64_t B, T, C, H; } d{B, T, C, H};
  const int64_t hs = d.C / d.H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> out(d.B * d.T * d.C, 0.0);
  if (att) att->assign(d.B * d.H * d.T * d.T, 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t i) {
    return qkv[(b * d.T + t) * 3 * d.C + part * d.C + h * hs + i];
  };
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      for (int64_t t = 0; t < d.T; ++t) {
        std::vector<double> p(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double sc = 0;
          for (int64_t i = 0; i < hs; ++i) sc += at(b, t, 0, h, i) * at(b, u, 1, h, i);
          p[u] = sc * scale;
          mx = std::max(mx, p[u]);
        }
        for (int64_t u = 0; u <= t; ++u) sum += (p[u] = std::exp(p[u] - mx));
        for (int64_t u = 0; u <= t; ++u) {
          p[u] /= sum;
          if (att) (*att)[((b * d.H + h) * d.T + t) * d.T + u] = p[u];
          for (int64_t i = 0; i < hs; ++i) out[(b * d.T + t) * d.C + h * hs + i] += p[u] * at(b, u, 2, h, i);
        }
      }
    }
  }
  return out;
}

}  // namespace zt::test
