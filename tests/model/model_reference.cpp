// model_reference.cpp — see model_reference.h.
#include "model_reference.h"

#include <algorithm>

#include <cmath>

namespace zt::ref {
namespace {

using Mat = std::vector<double>;  // row-major

double gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// rows x [n, C] -> layernorm with w, b
Mat layernorm(const Mat& x, int64_t n, int64_t C, const double* w, const double* b) {
  Mat y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < C; ++i) mean += x[r * C + i];
    mean /= C;
    for (int64_t i = 0; i < C; ++i) var += (x[r * C + i] - mean) * (x[r * C + i] - mean);
    var /= C;
    double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int64_t i = 0; i < C; ++i) y[r * C + i] = (x[r * C + i] - mean) * rstd * w[i] + b[i];
  }
  return y;
}

// y[n, out] = x[n, in] · W[in, out] + b  (Conv1D layout)
Mat conv1d(const Mat& x, int64_t n, int64_t in, int64_t out, const double* W, const double* b) {
  Mat y(n * out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * W[i * out + o];
      y[r * out + o] = s;
    }
  return y;
}

double cross_entropy(const double* logits, int64_t V, int32_t target) {
  if (target < 0) return 0.0;
  double mx = logits[0];
  for (int64_t v = 1; v < V; ++v) mx = std::max(mx, logits[v]);
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(logits[v] - mx);
  return std::log(s) + mx - logits[target];
}

}  // namespace

std::vector<double> gpt_logits(const GptConfig& c, const std::vector<double>& flat, const std::vector<int32_t>& tokens,
                               int64_t B, int64_t T) {
  const int64_t V = c.vocab_size, C = c.n_embd, H = c.n_head, hs = C / H, n = B * T;
  const double* p = flat.data();
  const double* wte = p;
  p += V * C;
  const double* wpe = p;
  p += c.n_ctx * C;
  Mat x(n * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < C; ++i) x[(b * T + t) * C + i] = wte[tokens[b * T + t] * C + i] + wpe[t * C + i];
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const double *ln1w = p, *ln1b = p + C;
    p += 2 * C;
    const double *aw = p, *ab = p + C * 3 * C;
    p += C * 3 * C + 3 * C;
    const double *pw = p, *pb = p + C * C;
    p += C * C + C;
    const double *ln2w = p, *ln2b = p + C;
    p += 2 * C;
    const double *fw = p, *fb = p + C * 4 * C;
    p += C * 4 * C + 4 * C;
    const double *fpw = p, *fpb = p + 4 * C * C;
    p += 4 * C * C + C;

    Mat qkv = conv1d(layernorm(x, n, C, ln1w, ln1b), n, C, 3 * C, aw, ab);
    Mat y(n * C, 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
          std::vector<double> s(t + 1);
          double mx = -1e300;
          for (int64_t u = 0; u <= t; ++u) {
            const double* k = &qkv[(b * T + u) * 3 * C + C + h * hs];
            double d = 0;
            for (int64_t i = 0; i < hs; ++i) d += q[i] * k[i];
            s[u] = d / std::sqrt(double(hs));
            mx = std::max(mx, s[u]);
          }
          double z = 0;
          for (int64_t u = 0; u <= t; ++u) z += (s[u] = std::exp(s[u] - mx));
          for (int64_t u = 0; u <= t; ++u) {
            const double* v = &qkv[(b * T + u) * 3 * C + 2 * C + h * hs];
            for (int64_t i = 0; i < hs; ++i) y[(b * T + t) * C + h * hs + i] += s[u] / z * v[i];
          }
        }
    Mat a = conv1d(y, n, C, C, pw, pb);
    for (int64_t i = 0; i < n * C; ++i) x[i] += a[i];
    Mat f = conv1d(layernorm(x, n, C, ln2w, ln2b), n, C, 4 * C, fw, fb);
    for (double& v : f) v = gelu(v);
    Mat m = conv1d(f, n, 4 * C, C, fpw, fpb);
    for (int64_t i = 0; i < n * C; ++i) x[i] += m[i];
  }
  Mat xf = layernorm(x, n, C, p, p + C);
  Mat logits(n * V);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t v = 0; v < V; ++v) {
      double s = 0;
      for (int64_t i = 0; i < C; ++i) s += xf[r * C + i] * wte[v * C + i];
      logits[r * V + v] = s;
    }
  return logits;
}

double gpt_loss(const GptConfig& c, const std::vector<double>& flat, const std::vector<int32_t>& tokens,
                const std::vector<int32_t>& targets, int64_t B, int64_t T) {
  const int64_t V = c.vocab_size, n = B * T;
  const Mat logits = gpt_logits(c, flat, tokens, B, T);
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < n; ++r) {
    total += cross_entropy(&logits[r * V], V, targets[r]);
    counted += targets[r] >= 0 ? 1 : 0;
  }
  return total / std::max<int64_t>(counted, 1);
}

double mlp_loss(const MlpConfig& c, const std::vector<double>& flat, const std::vector<float>& features,
                const std::vector<float>& targets_f, const std::vector<int32_t>& targets, int64_t B) {
  Mat x(features.begin(), features.end());
  const double* p = flat.data();
  const size_t layers = c.dims.size() - 1;
  for (size_t li = 0; li < layers; ++li) {
    const int64_t in = c.dims[li], out = c.dims[li + 1];
    const double *W = p, *b = p + out * in;  // Linear layout W[out, in]
    p += out * in + out;
    Mat y(B * out);
    for (int64_t r = 0; r < B; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = b[o];
        for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * W[o * in + i];
        if (li + 1 < layers) s = c.activation == Activation::GELU ? gelu(s) : std::max(0.0, s);
        y[r * out + o] = s;
      }
    x.swap(y);
  }
  const int64_t K = c.dims.back();
  double total = 0;
  if (c.task == MlpTask::Regression) {
    for (int64_t i = 0; i < B * K; ++i) total += (x[i] - targets_f[i]) * (x[i] - targets_f[i]);
    return total / double(B * K);
  }
  int64_t counted = 0;
  for (int64_t r = 0; r < B; ++r) {
    total += cross_entropy(&x[r * K], K, targets[r]);
    counted += targets[r] >= 0 ? 1 : 0;
  }
  return total / std::max<int64_t>(counted, 1);
}

}  // namespace zt::ref
