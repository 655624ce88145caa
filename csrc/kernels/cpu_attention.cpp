// cpu_attention.cpp — causal self-attention (GPT-2 layout) on the CPU backend.
// qkv[B,T,3C]: q = channels [0,C), k = [C,2C), v = [2C,3C); head h owns channels h*hs..(h+1)*hs
// of each, hs = C/H. Scores are scaled by 1/sqrt(hs); att[B,H,T,T] (fp32) keeps the softmax
// probabilities (zero above the diagonal). Work is split over (b, h) pairs: each pair reads and
// writes only its own slices, so there are no races and every sum has a fixed order.
#include <cmath>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

// Copies head h of q, k, v (or of dq, dk, dv shaped the same) for batch b into fp32 [T,hs] rows.
template <typename T>
void load_head(const T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride, int64_t offset, int64_t hs,
               float* dst) {
  for (int64_t t = 0; t < T_; ++t) {
    const T* src = base + (b * T_ + t) * row_stride + offset + h * hs;
    for (int64_t i = 0; i < hs; ++i) dst[t * hs + i] = to_f32(src[i]);
  }
}

// base[b,t,offset + h*hs + i] += src[t*hs + i] (one rounding per element).
template <typename T>
void add_head(T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride, int64_t offset, int64_t hs,
              const float* src) {
  for (int64_t t = 0; t < T_; ++t) {
    T* dst = base + (b * T_ + t) * row_stride + offset + h * hs;
    for (int64_t i = 0; i < hs; ++i) dst[i] = from_f32<T>(to_f32(dst[i]) + src[t * hs + i]);
  }
}

}  // namespace

void attention_forward(const TensorView& out, const TensorView& att, const TensorView& qkv, int64_t B, int64_t T_,
                       int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const float sc = math::attention_scale(static_cast<int>(hs));
  float* att_p = static_cast<float*>(att.data);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(qkv.data);
#pragma omp parallel for schedule(static) if (B * H * T_ * T_ * hs > kParallelGrain)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      std::vector<float> q(T_ * hs), k(T_ * hs), v(T_ * hs), y(hs);
      load_head(x, b, h, T_, 3 * C, 0, hs, q.data());
      load_head(x, b, h, T_, 3 * C, C, hs, k.data());
      load_head(x, b, h, T_, 3 * C, 2 * C, hs, v.data());
      for (int64_t t = 0; t < T_; ++t) {
        float* row = att_p + (bh * T_ + t) * T_;
        const float* qt = q.data() + t * hs;
        float maxv = -INFINITY;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* kt = k.data() + t2 * hs;
          float dot = 0.0f;
          for (int64_t i = 0; i < hs; ++i) dot += qt[i] * kt[i];
          row[t2] = dot * sc;
          if (row[t2] > maxv) maxv = row[t2];
        }
        float sum = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          row[t2] = expf(row[t2] - maxv);
          sum += row[t2];
        }
        const float inv = 1.0f / sum;
        for (int64_t t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
        for (int64_t t2 = t + 1; t2 < T_; ++t2) row[t2] = 0.0f;
        for (int64_t i = 0; i < hs; ++i) y[i] = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* vt = v.data() + t2 * hs;
          for (int64_t i = 0; i < hs; ++i) y[i] += row[t2] * vt[i];
        }
        T* orow = o + (b * T_ + t) * C + h * hs;
        for (int64_t i = 0; i < hs; ++i) orow[i] = from_f32<T>(y[i]);
      }
    }
  });
}

void attention_backward(const TensorView& dqkv, const TensorView& datt_scratch, const TensorView& dout,
                        const TensorView& qkv, const TensorView& att, int64_t B, int64_t T_, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const float* att_p = static_cast<const float*>(att.data);
  float* datt_p = static_cast<float*>(datt_scratch.data);
  dispatch_dtype(dqkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dx = static_cast<T*>(dqkv.data);
    const T* x = static_cast<const T*>(qkv.data);
    const T* dy = static_cast<const T*>(dout.data);
#pragma omp parallel for schedule(static) if (B * H * T_ * T_ * hs > kParallelGrain)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      const size_t n = static_cast<size_t>(T_ * hs);
      std::vector<float> q(n), k(n), v(n), go(n), dq(n, 0.0f), dk(n, 0.0f), dv(n, 0.0f);
      load_head(x, b, h, T_, 3 * C, 0, hs, q.data());
      load_head(x, b, h, T_, 3 * C, C, hs, k.data());
      load_head(x, b, h, T_, 3 * C, 2 * C, hs, v.data());
      load_head(dy, b, h, T_, C, 0, hs, go.data());
      for (int64_t t = 0; t < T_; ++t) {
        const float* prow = att_p + (bh * T_ + t) * T_;
        float* drow = datt_p + (bh * T_ + t) * T_;
        const float* got = go.data() + t * hs;
        // out[t] = sum_t2 p[t2] v[t2]  =>  dp[t2] = dout[t].v[t2],  dv[t2] += p[t2] dout[t]
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* vt = v.data() + t2 * hs;
          float* dvt = dv.data() + t2 * hs;
          float dot = 0.0f;
          for (int64_t i = 0; i < hs; ++i) {
            dot += got[i] * vt[i];
            dvt[i] += prow[t2] * got[i];
          }
          drow[t2] = dot;
        }
        // softmax backward: ds[t2] = p[t2] (dp[t2] - sum_t3 p[t3] dp[t3])
        float pdp = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) pdp += prow[t2] * drow[t2];
        const float* qt = q.data() + t * hs;
        float* dqt = dq.data() + t * hs;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float ds = prow[t2] * (drow[t2] - pdp) * sc;  // grad of the scaled score q.k*sc
          drow[t2] = ds;
          const float* kt = k.data() + t2 * hs;
          float* dkt = dk.data() + t2 * hs;
          for (int64_t i = 0; i < hs; ++i) {
            dqt[i] += ds * kt[i];
            dkt[i] += ds * qt[i];
          }
        }
        for (int64_t t2 = t + 1; t2 < T_; ++t2) drow[t2] = 0.0f;
      }
      add_head(dx, b, h, T_, 3 * C, 0, hs, dq.data());
      add_head(dx, b, h, T_, 3 * C, C, hs, dk.data());
      add_head(dx, b, h, T_, 3 * C, 2 * C, hs, dv.data());
    }
  });
}

}  // namespace zt::cpu_ops
