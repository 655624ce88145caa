// llama_ops_ref.h — double-precision references of the Llama block's ops (RMSNorm, rotary
// embedding, SwiGLU) with their analytic backward, for the kernel tests. Written from the
// formulas, independently of the kernels; the tests check each analytic backward against
// central finite differences of its forward.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace zt::test {

// RMSNorm over rows of C: out = x rstd w, rstd = 1 / sqrt(mean x² + eps).
inline std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w, int64_t N,
                                       int64_t C, double eps, std::vector<double>* rstd = nullptr) {
  std::vector<double> out(static_cast<size_t>(N * C));
  for (int64_t i = 0; i < N; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < C; ++j) ss += x[i * C + j] * x[i * C + j];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
    for (int64_t j = 0; j < C; ++j) out[i * C + j] = x[i * C + j] * rs * w[j];
    if (rstd) (*rstd)[i] = rs;
  }
  return out;
}
// Gradients of dot(dy, rmsnorm_ref(x, w)): dx = rs (w dy − x rs mean(w dy x rs)), dw = Σ rows dy x rs.
inline void rmsnorm_backward_ref(const std::vector<double>& dy, const std::vector<double>& x,
                                 const std::vector<double>& w, int64_t N, int64_t C, double eps,
                                 std::vector<double>* dx, std::vector<double>* dw) {
  std::vector<double> rstd(static_cast<size_t>(N));
  rmsnorm_ref(x, w, N, C, eps, &rstd);
  dx->assign(static_cast<size_t>(N * C), 0.0);
  dw->assign(static_cast<size_t>(C), 0.0);
  for (int64_t i = 0; i < N; ++i) {
    const double rs = rstd[i];
    double m = 0;
    for (int64_t j = 0; j < C; ++j) m += w[j] * dy[i * C + j] * x[i * C + j] * rs;
    m /= static_cast<double>(C);
    for (int64_t j = 0; j < C; ++j) {
      (*dx)[i * C + j] = rs * (w[j] * dy[i * C + j] - x[i * C + j] * rs * m);
      (*dw)[j] += dy[i * C + j] * x[i * C + j] * rs;
    }
  }
}

// Rotary embedding of x[B,T,nh·hs] with table[Tmax,hs] (cos | sin), positions pos + t.
// sign = +1: forward rotation; sign = −1: its transpose (the backward of a gradient).
inline std::vector<double> rope_ref(const std::vector<double>& x, const std::vector<float>& table, int64_t B,
                                    int64_t T, int64_t nh, int64_t hs, int64_t pos, double sign = 1.0) {
  std::vector<double> out(x);
  const int64_t half = hs / 2;
  for (int64_t r = 0; r < B * T; ++r) {
    const float* cs = table.data() + (pos + r % T) * hs;
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t o = r * nh * hs + h * hs;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cs[i], s = sign * static_cast<double>(cs[half + i]);
        const double a = x[o + i], b = x[o + half + i];
        out[o + i] = a * c - b * s;
        out[o + half + i] = b * c + a * s;
      }
    }
  }
  return out;
}

inline double sigmoid_ref(double g) { return 1.0 / (1.0 + std::exp(-g)); }
// SwiGLU: out = silu(g) u; gradients of dot(dy, out): dg = dy u σ (1 + g (1 − σ)), du = dy g σ.
inline std::vector<double> swiglu_ref(const std::vector<double>& g, const std::vector<double>& u) {
  std::vector<double> out(g.size());
  for (size_t i = 0; i < g.size(); ++i) out[i] = g[i] * sigmoid_ref(g[i]) * u[i];
  return out;
}
inline void swiglu_backward_ref(const std::vector<double>& dy, const std::vector<double>& g,
                                const std::vector<double>& u, std::vector<double>* dg, std::vector<double>* du) {
  dg->resize(g.size());
  du->resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = sigmoid_ref(g[i]);
    (*dg)[i] = dy[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
    (*du)[i] = dy[i] * g[i] * s;
  }
}

}  // namespace zt::test
