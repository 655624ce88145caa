// cpu_attention.cpp — causal self-attention (GPT-2 layout) on the CPU backend.
// qkv[B,T,3C]: q = channels [0,C), k = [C,2C), v = [2C,3C); head h owns channels h*hs..(h+1)*hs
// of each, hs = C/H. Scores are scaled by 1/sqrt(hs); att[B,H,T,T] (fp32) keeps the softmax
// probabilities (zero above the diagonal). Work is split over (b, h) pairs: each pair reads and
// writes only its own slices, so there are no races.
//
// Within a pair, query rows are processed in blocks of R rows; block [r0, r0+R) only needs keys
// [0, n), n = r0 + R (causal), and every product is an fp32 OpenBLAS sgemm on fp32 copies of the
// head ([T,hs] rows): S = sc·Q_blk·K[0:n]ᵀ, Y = P·V[0:n]; backward dP = dY·Vᵀ, dV += Pᵀ·dY,
// dQ += dS·K, dK += dSᵀ·Q. Probabilities above the diagonal inside a block are exactly 0, so the
// block products equal the causal sums (0·v = 0 for finite v). Determinism: the block split
// depends only on (T, hs); each block's GEMMs run single-threaded inside the (b, h) pair's
// OpenMP thread (cpu_gemm.cpp), so every element's sum has the same order for any thread count.

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

// Query rows per block: a block's GEMMs do at most R·T·hs ≈ 2^18 multiply-adds; at least 8 rows
// so each GEMM has some width.
int64_t block_rows(int64_t T_, int64_t hs) {
  return std::clamp<int64_t>(262143 / std::max<int64_t>(1, T_ * hs), 8, 64);
}

void mm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
        int64_t ldb, float beta, float* C, int64_t ldc) {
  sgemm_rm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void attention_forward(const TensorView& out, const TensorView& att, const TensorView& qkv, int64_t B, int64_t T_,
                       int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const int64_t R = block_rows(T_, hs);
  float* att_p = static_cast<float*>(att.data);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(qkv.data);
#pragma omp parallel for schedule(static) if (B * H * T_ * T_ * hs > kParallelGrain)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      std::vector<float> q(T_ * hs), k(T_ * hs), v(T_ * hs), y(T_ * hs);
      load_head(x, b, h, T_, 3 * C, 0, hs, q.data());
      load_head(x, b, h, T_, 3 * C, C, hs, k.data());
      load_head(x, b, h, T_, 3 * C, 2 * C, hs, v.data());
      float* att_bh = att_p + bh * T_ * T_;  // [T,T]
      for (int64_t r0 = 0; r0 < T_; r0 += R) {
        const int64_t rows = std::min(R, T_ - r0), n = r0 + rows;
        float* S = att_bh + r0 * T_;  // rows [r0, r0+rows), columns [0, n) valid after the GEMM
        mm(false, true, rows, n, hs, sc, q.data() + r0 * hs, hs, k.data(), hs, 0.0f, S, T_);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t t = r0 + r;
          float* row = S + r * T_;
          float maxv = -INFINITY;
          for (int64_t t2 = 0; t2 <= t; ++t2) maxv = std::max(maxv, row[t2]);
          float sum = 0.0f;
          for (int64_t t2 = 0; t2 <= t; ++t2) {
            row[t2] = expf(row[t2] - maxv);
            sum += row[t2];
          }
          const float inv = 1.0f / sum;
          for (int64_t t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
          for (int64_t t2 = t + 1; t2 < T_; ++t2) row[t2] = 0.0f;
        }
        mm(false, false, rows, hs, n, 1.0f, S, T_, v.data(), hs, 0.0f, y.data() + r0 * hs, hs);
      }
      for (int64_t t = 0; t < T_; ++t) {
        T* orow = o + (b * T_ + t) * C + h * hs;
        for (int64_t i = 0; i < hs; ++i) orow[i] = from_f32<T>(y[t * hs + i]);
      }
    }
  });
}

void attention_backward(const TensorView& dqkv, const TensorView& datt_scratch, const TensorView& dout,
                        const TensorView& qkv, const TensorView& att, int64_t B, int64_t T_, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const int64_t R = block_rows(T_, hs);
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
      const size_t n_el = static_cast<size_t>(T_ * hs);
      std::vector<float> q(n_el), k(n_el), v(n_el), go(n_el), dq(n_el, 0.0f), dk(n_el, 0.0f), dv(n_el, 0.0f);
      load_head(x, b, h, T_, 3 * C, 0, hs, q.data());
      load_head(x, b, h, T_, 3 * C, C, hs, k.data());
      load_head(x, b, h, T_, 3 * C, 2 * C, hs, v.data());
      load_head(dy, b, h, T_, C, 0, hs, go.data());
      const float* P_bh = att_p + bh * T_ * T_;
      float* D_bh = datt_p + bh * T_ * T_;
      for (int64_t r0 = 0; r0 < T_; r0 += R) {
        const int64_t rows = std::min(R, T_ - r0), n = r0 + rows;
        const float* P = P_bh + r0 * T_;
        float* D = D_bh + r0 * T_;
        const float* goB = go.data() + r0 * hs;
        // out[t] = sum_t2 p[t2] v[t2]  =>  dp[t2] = dout[t].v[t2],  dv[t2] += p[t2] dout[t]
        mm(false, true, rows, n, hs, 1.0f, goB, hs, v.data(), hs, 0.0f, D, T_);
        mm(true, false, n, hs, rows, 1.0f, P, T_, goB, hs, 1.0f, dv.data(), hs);
        // softmax backward: ds[t2] = p[t2] (dp[t2] - sum_t3 p[t3] dp[t3]), times sc (scaled score)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t t = r0 + r;
          const float* prow = P + r * T_;
          float* drow = D + r * T_;
          float pdp = 0.0f;
          for (int64_t t2 = 0; t2 <= t; ++t2) pdp += prow[t2] * drow[t2];
          for (int64_t t2 = 0; t2 <= t; ++t2) drow[t2] = prow[t2] * (drow[t2] - pdp) * sc;
          for (int64_t t2 = t + 1; t2 < T_; ++t2) drow[t2] = 0.0f;
        }
        mm(false, false, rows, hs, n, 1.0f, D, T_, k.data(), hs, 1.0f, dq.data() + r0 * hs, hs);
        mm(true, false, n, hs, rows, 1.0f, D, T_, q.data() + r0 * hs, hs, 1.0f, dk.data(), hs);
      }
      add_head(dx, b, h, T_, 3 * C, 0, hs, dq.data());
      add_head(dx, b, h, T_, 3 * C, C, hs, dk.data());
      add_head(dx, b, h, T_, 3 * C, 2 * C, hs, dv.data());
    }
  });
}

}  // namespace zt::cpu_ops
