// attention_ref.h — GPT-2 and grouped-query causal attention in double precision, written
// independently of the kernels: the reference of the materialised, tiled and grouped-query
// attention tests.
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

// Grouped-query causal attention: q[B,T,H·hs], k and v [B,T,Hkv·hs]; query head h attends with
// key/value head h / (H/Hkv). Scores q·k/sqrt(hs), softmax over keys u <= t.
struct GqaDims {
  int64_t B, T, H, Hkv, hs;
};
struct GqaGrads {
  std::vector<double> dq, dk, dv;
};

// Calls f(b, h, g, t, p) for every query row with p[u] (u <= t) its softmax probabilities.
template <typename F>
void gqa_rows(const std::vector<double>& q, const std::vector<double>& k, const GqaDims& d, F&& f) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.hs));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t g = h / (d.H / d.Hkv);
      for (int64_t t = 0; t < d.T; ++t) {
        std::vector<double> p(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          double sc = 0;
          for (int64_t i = 0; i < d.hs; ++i)
            sc += q[((b * d.T + t) * d.H + h) * d.hs + i] * k[((b * d.T + u) * d.Hkv + g) * d.hs + i];
          p[u] = sc * scale;
          mx = std::max(mx, p[u]);
        }
        for (int64_t u = 0; u <= t; ++u) sum += (p[u] = std::exp(p[u] - mx));
        for (double& x : p) x /= sum;
        f(b, h, g, t, p);
      }
    }
}

// out[B,T,H·hs].
inline std::vector<double> gqa_attention_ref(const std::vector<double>& q, const std::vector<double>& k,
                                             const std::vector<double>& v, const GqaDims& d) {
  std::vector<double> out(d.B * d.T * d.H * d.hs, 0.0);
  gqa_rows(q, k, d, [&](int64_t b, int64_t h, int64_t g, int64_t t, const std::vector<double>& p) {
    for (int64_t u = 0; u <= t; ++u)
      for (int64_t i = 0; i < d.hs; ++i)
        out[((b * d.T + t) * d.H + h) * d.hs + i] += p[u] * v[((b * d.T + u) * d.Hkv + g) * d.hs + i];
  });
  return out;
}

// The gradients of Σ dout·out with respect to q, k, v (softmax backward, analytic).
inline GqaGrads gqa_attention_grad_ref(const std::vector<double>& q, const std::vector<double>& k,
                                       const std::vector<double>& v, const std::vector<double>& dout,
                                       const GqaDims& d) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.hs));
  GqaGrads gr{std::vector<double>(q.size(), 0.0), std::vector<double>(k.size(), 0.0),
              std::vector<double>(v.size(), 0.0)};
  gqa_rows(q, k, d, [&](int64_t b, int64_t h, int64_t g, int64_t t, const std::vector<double>& p) {
    const int64_t qt = ((b * d.T + t) * d.H + h) * d.hs;
    auto kv = [&](int64_t u) { return ((b * d.T + u) * d.Hkv + g) * d.hs; };
    std::vector<double> dp(t + 1, 0.0);
    double dsum = 0;
    for (int64_t u = 0; u <= t; ++u) {
      for (int64_t i = 0; i < d.hs; ++i) {
        dp[u] += dout[qt + i] * v[kv(u) + i];
        gr.dv[kv(u) + i] += p[u] * dout[qt + i];
      }
      dsum += p[u] * dp[u];
    }
    for (int64_t u = 0; u <= t; ++u) {
      const double ds = p[u] * (dp[u] - dsum) * scale;
      for (int64_t i = 0; i < d.hs; ++i) {
        gr.dq[qt + i] += ds * k[kv(u) + i];
        gr.dk[kv(u) + i] += ds * q[qt + i];
      }
    }
  });
  return gr;
}

}  // namespace zt::test
