// cpu_vec.cpp — the scalar table of cpu_vec_kernels.h (baseline x86-64; also runs every tail),
// the ISA selection and the drivers that split work into whole blocks plus a scalar tail.
#include <cmath>

#include "cpu_vec_kernels.h"
#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/kernels/math.h"
#include "zerotrain/kernels/math_llama.h"

namespace zt::cpu_ops::vec {
static_assert(kExpMin == math::kExpNonposMin, "the SIMD exp underflows where math::exp_nonpos does");
namespace {

void gelu_forward_s(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = math::gelu(x[i]);
}
void gelu_backward_s(float* dinp, const float* x, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dinp[i] = dinp[i] + dout[i] * math::gelu_grad(x[i]);
}
void gelu_backward_inplace_s(float* d, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = 0.0f + d[i] * math::gelu_grad(x[i]);
}
float row_max_s(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
// Lane j % 16 of the partial sums, exactly as the SIMD paths accumulate (so also for tails).
void row_exp_s(const float* x, float* e, int64_t n, float m, float* acc16) {
  for (int64_t i = 0; i < n; ++i) {
    e[i] = math::exp_nonpos(x[i] - m);
    acc16[i % kBlock] += e[i];
  }
}
void row_scale_s(float* d, const float* e, int64_t n, float inv, float dloss) {
  for (int64_t i = 0; i < n; ++i) d[i] = dloss * (e[i] * inv);
}

void exp_scale_s(const float* s, float* p, int64_t n, float m, float inv) {
  for (int64_t i = 0; i < n; ++i) p[i] = math::exp_nonpos(s[i] - m) * inv;
}
void score_grad_s(float* d, const float* p, int64_t n, float dr, float scale) {
  for (int64_t i = 0; i < n; ++i) d[i] = p[i] * (d[i] - dr) * scale;
}

// The LayerNorm rows: lane j % 16 as the SIMD paths accumulate; the element math of math.h.
void sum16_s(const float* x, int64_t n, float* acc16) {
  for (int64_t i = 0; i < n; ++i) acc16[i % kBlock] += x[i];
}
void sqdev16_s(const float* x, int64_t n, float m, float* acc16) {
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - m;
    acc16[i % kBlock] += d * d;
  }
}
void ln_out_s(float* o, const float* x, const float* w, const float* b, int64_t n, float m, float rs) {
  for (int64_t i = 0; i < n; ++i) o[i] = (x[i] - m) * rs * w[i] + b[i];
}
void ln_dsums_s(const float* x, const float* dy, const float* w, int64_t n, float m, float rs, float* a16,
                float* b16) {
  for (int64_t i = 0; i < n; ++i) {
    const float nr = (x[i] - m) * rs, dn = w[i] * dy[i];
    a16[i % kBlock] += dn;
    b16[i % kBlock] += dn * nr;
  }
}
void ln_dinp_s(float* dx, const float* x, const float* dy, const float* w, int64_t n, float m, float rs, float dmean,
               float dnmean) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dx[i] + math::layernorm_dinp(w[i] * dy[i], (x[i] - m) * rs, dmean, dnmean, rs);
}

void ln_cols_s(float* acc_w, float* acc_b, const float* x, const float* dy, int64_t n, float m, float rs) {
  for (int64_t i = 0; i < n; ++i) {
    acc_w[i] += (x[i] - m) * rs * dy[i];
    acc_b[i] += dy[i];
  }
}

void add_to_s(float* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + x[i];
}
void dot16_s(const float* a, const float* b, int64_t n, float* acc16) {
  for (int64_t i = 0; i < n; ++i) acc16[i % kBlock] += a[i] * b[i];
}

void swiglu_forward_s(float* o, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = math::silu(g[i]) * u[i];
}
void swiglu_backward_s(float* dg, float* du, const float* dy, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i], ui = u[i], dyi = dy[i];
    dg[i] = dyi * ui * math::silu_grad(gi);
    du[i] = dyi * math::silu(gi);
  }
}

int64_t whole_blocks(int64_t n) { return n - n % kBlock; }

// The fixed tree over 16 partial sums: lane l += lane l + h for h = 8, 4, 2, 1.
float reduce16(float* acc) {
  for (int64_t h = kBlock / 2; h >= 1; h /= 2) {
    for (int64_t l = 0; l < h; ++l) acc[l] += acc[l + h];
  }
  return acc[0];
}

}  // namespace

const Kernels kScalar{"scalar",    gelu_forward_s, gelu_backward_s, row_max_s, row_exp_s, row_scale_s,
                      exp_scale_s, score_grad_s,   sum16_s,         sqdev16_s, ln_out_s,  ln_dsums_s,
                      ln_dinp_s,   ln_cols_s,      gelu_backward_inplace_s, add_to_s, dot16_s,
                      swiglu_forward_s, swiglu_backward_s};

const Kernels& active() { return for_isa(cpu::active_isa()); }

const Kernels& for_isa(cpu::Isa isa) {
  switch (isa) {
    case cpu::Isa::Avx512: return kAvx512;
    case cpu::Isa::Avx2: return kAvx2;
    case cpu::Isa::Scalar: break;
  }
  return kScalar;
}

void gelu_forward(const Kernels& k, float* out, const float* x, int64_t n) {
  const int64_t nb = whole_blocks(n);
  k.gelu_forward(out, x, nb);
  gelu_forward_s(out + nb, x + nb, n - nb);
}

void gelu_backward(const Kernels& k, float* dinp, const float* x, const float* dout, int64_t n) {
  const int64_t nb = whole_blocks(n);
  k.gelu_backward(dinp, x, dout, nb);
  gelu_backward_s(dinp + nb, x + nb, dout + nb, n - nb);
}

void gelu_backward_inplace(const Kernels& k, float* d, const float* x, int64_t n) {
  const int64_t nb = whole_blocks(n);
  k.gelu_backward_inplace(d, x, nb);
  gelu_backward_inplace_s(d + nb, x + nb, n - nb);
}

void swiglu_forward(const Kernels& k, float* o, const float* g, const float* u, int64_t n) {
  const int64_t nb = whole_blocks(n);
  k.swiglu_forward(o, g, u, nb);
  swiglu_forward_s(o + nb, g + nb, u + nb, n - nb);
}

void swiglu_backward(const Kernels& k, float* dg, float* du, const float* dy, const float* g, const float* u,
                     int64_t n) {
  const int64_t nb = whole_blocks(n);
  k.swiglu_backward(dg, du, dy, g, u, nb);
  swiglu_backward_s(dg + nb, du + nb, dy + nb, g + nb, u + nb, n - nb);
}

float row_max(const Kernels& k, const float* x, int64_t n) {
  const int64_t nb = whole_blocks(n);
  const float mb = k.row_max(x, nb), mt = row_max_s(x + nb, n - nb);
  return mt > mb ? mt : mb;
}

float exp_sum(const Kernels& k, const float* x, float* e, int64_t n, float m) {
  const int64_t nb = whole_blocks(n);
  float acc[kBlock] = {};
  k.row_exp(x, e, nb, m, acc);
  row_exp_s(x + nb, e + nb, n - nb, m, acc);  // the tail's j - nb is its lane: nb % 16 == 0
  return reduce16(acc);
}

void exp_scale(const Kernels& k, const float* s, float* p, int64_t n, float m, float inv) {
  const int64_t nb = whole_blocks(n);
  k.exp_scale(s, p, nb, m, inv);
  exp_scale_s(s + nb, p + nb, n - nb, m, inv);
}

void score_grad(const Kernels& k, float* d, const float* p, int64_t n, float dr, float scale) {
  const int64_t nb = whole_blocks(n);
  k.score_grad(d, p, nb, dr, scale);
  score_grad_s(d + nb, p + nb, n - nb, dr, scale);
}

// In the LayerNorm drivers, too, the tail's j - nb is its lane (nb % 16 == 0).
float sum(const Kernels& k, const float* x, int64_t n) {
  const int64_t nb = whole_blocks(n);
  float acc[kBlock] = {};
  k.sum16(x, nb, acc);
  sum16_s(x + nb, n - nb, acc);
  return reduce16(acc);
}

float sq_dev_sum(const Kernels& k, const float* x, int64_t n, float m) {
  const int64_t nb = whole_blocks(n);
  float acc[kBlock] = {};
  k.sqdev16(x, nb, m, acc);
  sqdev16_s(x + nb, n - nb, m, acc);
  return reduce16(acc);
}

void layernorm_out(const Kernels& k, float* o, const float* x, const float* w, const float* b, int64_t n, float m,
                   float rs) {
  const int64_t nb = whole_blocks(n);
  k.ln_out(o, x, w, b, nb, m, rs);
  ln_out_s(o + nb, x + nb, w + nb, b + nb, n - nb, m, rs);
}

void layernorm_dsums(const Kernels& k, const float* x, const float* dy, const float* w, int64_t n, float m, float rs,
                     float* dsum, float* dnsum) {
  const int64_t nb = whole_blocks(n);
  float a[kBlock] = {}, b[kBlock] = {};
  k.ln_dsums(x, dy, w, nb, m, rs, a, b);
  ln_dsums_s(x + nb, dy + nb, w + nb, n - nb, m, rs, a, b);
  *dsum = reduce16(a);
  *dnsum = reduce16(b);
}

void layernorm_dinp(const Kernels& k, float* dx, const float* x, const float* dy, const float* w, int64_t n, float m,
                    float rs, float dmean, float dnmean) {
  const int64_t nb = whole_blocks(n);
  k.ln_dinp(dx, x, dy, w, nb, m, rs, dmean, dnmean);
  ln_dinp_s(dx + nb, x + nb, dy + nb, w + nb, n - nb, m, rs, dmean, dnmean);
}

void layernorm_cols(const Kernels& k, float* acc_w, float* acc_b, const float* x, const float* dy, int64_t n, float m,
                    float rs) {
  const int64_t nb = whole_blocks(n);
  k.ln_cols(acc_w, acc_b, x, dy, nb, m, rs);
  ln_cols_s(acc_w + nb, acc_b + nb, x + nb, dy + nb, n - nb, m, rs);
}

void scale_row(const Kernels& k, float* d, int64_t n, float a, const float* src) {
  // row_scale computes dloss * (e * inv); with dloss = 1 that is e * inv exactly.
  if (src == nullptr) src = d;
  const int64_t nb = whole_blocks(n);
  k.row_scale(d, src, nb, a, 1.0f);
  row_scale_s(d + nb, src + nb, n - nb, a, 1.0f);
}

void add_to(const Kernels& k, float* acc, const float* x, int64_t n) {
  const int64_t nb = whole_blocks(n);
  k.add_to(acc, x, nb);
  add_to_s(acc + nb, x + nb, n - nb);
}

float dot(const Kernels& k, const float* a, const float* b, int64_t n) {
  const int64_t nb = whole_blocks(n);
  float acc[kBlock] = {};
  k.dot16(a, b, nb, acc);
  dot16_s(a + nb, b + nb, n - nb, acc);
  return reduce16(acc);
}

float softmax_xent_row(const Kernels& k, const float* x, float* d, int64_t V, int32_t target, float dloss) {
  const float m = row_max(k, x, V);
  // -log p[target] = log(sum) - (x[target] - max), from the logit (read before d, which may alias x).
  const float shifted_target = x[target] - m;
  const float sum = exp_sum(k, x, d, V, m);
  const float e_target = d[target];
  const float inv = 1.0f / sum;
  const int64_t nb = whole_blocks(V);
  k.row_scale(d, d, nb, inv, dloss);
  row_scale_s(d + nb, d + nb, V - nb, inv, dloss);
  d[target] = dloss * (e_target * inv - 1.0f);
  return logf(sum) - shifted_target;
}

}  // namespace zt::cpu_ops::vec
