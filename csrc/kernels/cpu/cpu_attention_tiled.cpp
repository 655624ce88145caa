// cpu_attention_tiled.cpp — memory-efficient causal attention on the CPU backend: the executable
// reference of the tiling scheme and per-tile math in zerotrain/kernels/attention_tile.h (the CUDA
// kernel in csrc/kernels/cuda/attention_tiled.cu runs the same scheme).
//
// Work is split over (b, h) pairs (each reads and writes only its own head slices: no races).
// Within a pair, the head's q, k, v (and dout, out in backward) are fp32 [T,hs] rows — read in place
// from fp32 tensors (row stride 3C or C), widened into per-thread copies for 16-bit ones — and
// every tile product is an fp32 OpenBLAS sgemm of at most tile_q·tile_k·hs multiply-adds.
// Memory: per thread O(T·hs) fp32 scratch for 16-bit dtypes (the widened heads; dq, dk, dv in
// backward, which fp32 accumulates in place in dqkv) plus one tile_q×tile_k score tile — never T×T.
// Determinism: the tiling depends only on (T, tile_q, tile_k); OpenBLAS never splits K, so every
// element is summed in the same order for any thread count.
// Per-row tile math runs on the SIMD rows of cpu_vec_kernels.h (ISA picked at run time), which
// compute attn_tile::unnormalised_p / recomputed_p / score_grad bitwise; a forward row sum is the
// fixed 16-lane order of vec::exp_sum, so results depend neither on the ISA nor the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::cpu_ops {
namespace {

void mm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
        int64_t ldb, float beta, float* C, int64_t ldc) {
  sgemm_rm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

struct Tiles {
  int64_t q, k;
};
// The CPU's default tiles (tile_q = tile_k = 0), chosen by measurement, not the CUDA kernel's
// (attn_tile::kTileQ / kTileK, which suit a GPU block): fewer, wider key tiles mean fewer small
// sgemm calls, and short query tiles keep the causally masked work of a diagonal tile small.
// Forward + backward, B=8 C=128 H=4, 1 thread, thread CPU time: T=128 64x32 3.6 ms -> 32x128
// 2.9 ms; T=512 43.2 -> 37.0 ms (docs/bench/log.md).
constexpr int64_t kCpuTileQ = 32;
constexpr int64_t kCpuTileK = 128;
Tiles tiles_of(int64_t tile_q, int64_t tile_k) {
  return {tile_q > 0 ? tile_q : kCpuTileQ, tile_k > 0 ? tile_k : kCpuTileK};
}

// A head's fp32 [T, hs] rows as the tile GEMMs read them: row t at p + t·ld.
struct HeadRows {
  const float* p;
  int64_t ld;
};

// fp32 tensors are read in place; 16-bit ones are widened into buf (resized on first use).
template <typename T>
HeadRows head_rows(const T* base, int64_t b, int64_t h, int64_t T_, int64_t stride, int64_t offset, int64_t hs,
                   std::vector<float>& buf) {
  if constexpr (std::is_same_v<T, float>) {
    return {base + b * T_ * stride + offset + h * hs, stride};
  } else {
    buf.resize(static_cast<size_t>(T_ * hs));
    load_head(base, b, h, T_, stride, offset, hs, buf.data());
    return {buf.data(), hs};
  }
}

// Where a head's fp32 [T, hs] gradient rows accumulate: row t at p + t·ld.
struct GradRows {
  float* p;
  int64_t ld;
  float* row(int64_t t) const { return p + t * ld; }
};

// Key columns query tile [r0, r0+rows) reads from key tile c0: up to the tile's last query row.
int64_t key_cols(int64_t c0, int64_t tile_k, int64_t r0, int64_t rows) { return std::min(tile_k, r0 + rows - c0); }

}  // namespace

void attention_tiled_forward(const TensorView& out, const TensorView& stats, const TensorView& qkv, int64_t B,
                             int64_t T_, int64_t C, int64_t H, int64_t tile_q, int64_t tile_k) {
  const int64_t hs = C / H;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const Tiles tl = tiles_of(tile_q, tile_k);
  const vec::Kernels& vk = vec::active();
  float* st = static_cast<float*>(stats.data);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(qkv.data);
#pragma omp parallel if (B * H * T_ * T_ * hs > kParallelGrain)
    {
      // Per-thread scratch, every element written before it is read for each pair.
      std::vector<float> qb, kb, vb, acc(static_cast<size_t>(tl.q * hs));
      std::vector<float> S(static_cast<size_t>(tl.q * tl.k)), m(tl.q), l(tl.q);
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        const HeadRows q = head_rows(x, b, h, T_, 3 * C, 0, hs, qb), k = head_rows(x, b, h, T_, 3 * C, C, hs, kb),
                       v = head_rows(x, b, h, T_, 3 * C, 2 * C, hs, vb);
        for (int64_t r0 = 0; r0 < T_; r0 += tl.q) {
          const int64_t rows = std::min(tl.q, T_ - r0);
          std::fill(m.begin(), m.end(), -INFINITY);
          std::fill(l.begin(), l.end(), 0.0f);
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t c0 = 0; c0 < r0 + rows; c0 += tl.k) {
            const int64_t cols = key_cols(c0, tl.k, r0, rows);
            mm(false, true, rows, cols, hs, sc, q.p + r0 * q.ld, q.ld, k.p + c0 * k.ld, k.ld, 0.0f, S.data(), cols);
            for (int64_t r = 0; r < rows; ++r) {
              float* srow = S.data() + r * cols;
              const int64_t vis = std::max<int64_t>(0, attn_tile::visible_keys(r0 + r, c0, cols));
              float alpha = 1.0f, sum = 0.0f;
              if (vis > 0) {
                // Masked scores become -inf: no effect on the max, exp_nonpos gives exactly +0 and the
                // lane sums are unchanged by +0, so whole rows run on SIMD with no scalar tail.
                std::fill(srow + vis, srow + cols, -INFINITY);
                alpha = attn_tile::rescale_running_max(m[r], vec::row_max(vk, srow, cols));
                sum = vec::exp_sum(vk, srow, srow, cols, m[r]);  // unnormalised_p
              } else {
                std::fill(srow, srow + cols, 0.0f);
              }
              l[r] = alpha * l[r] + sum;
              if (alpha != 1.0f) vec::scale_row(vk, acc.data() + r * hs, hs, alpha);
            }
            mm(false, false, rows, hs, cols, 1.0f, S.data(), cols, v.p + c0 * v.ld, v.ld, 1.0f, acc.data(), hs);
          }
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = r0 + r;
            const float inv = 1.0f / l[r];
            T* orow = o + (b * T_ + t) * C + h * hs;
            if constexpr (std::is_same_v<T, float>) {
              vec::scale_row(vk, orow, hs, inv, acc.data() + r * hs);
            } else {
              for (int64_t i = 0; i < hs; ++i) orow[i] = from_f32<T>(acc[r * hs + i] * inv);
            }
            float* s_row = st + (bh * T_ + t) * attn_tile::kStatsPerRow;
            s_row[0] = m[r];
            s_row[1] = l[r];
          }
        }
      }
    }
  });
}

void attention_tiled_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                              const TensorView& out, const TensorView& stats, int64_t B, int64_t T_, int64_t C,
                              int64_t H, int64_t tile_q, int64_t tile_k) {
  const int64_t hs = C / H;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const Tiles tl = tiles_of(tile_q, tile_k);
  const vec::Kernels& vk = vec::active();
  const float* st = static_cast<const float*>(stats.data);
  dispatch_dtype(dqkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dx = static_cast<T*>(dqkv.data);
    const T* x = static_cast<const T*>(qkv.data);
    const T* dy = static_cast<const T*>(dout.data);
    const T* y = static_cast<const T*>(out.data);
#pragma omp parallel if (B * H * T_ * T_ * hs > kParallelGrain)
    {
      // Per-thread scratch, written before read. fp32: the tile GEMMs accumulate straight into the
      // pair's own dq/dk/dv slices of dqkv (row stride 3C; no other pair touches them). 16-bit:
      // into fp32 dq, dk, dv (zeroed per pair), added to dqkv with one rounding at the end.
      constexpr bool kInPlace = std::is_same_v<T, float>;
      const size_t n_el = kInPlace ? 0 : static_cast<size_t>(T_ * hs), tile = static_cast<size_t>(tl.q * tl.k);
      std::vector<float> qb, kb, vb, gob, yob, dq(n_el), dk(n_el), dv(n_el), D(T_), P(tile), dP(tile);
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < B * H; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        GradRows gq{dq.data(), hs}, gk{dk.data(), hs}, gv{dv.data(), hs};
        if constexpr (kInPlace) {
          float* base = reinterpret_cast<float*>(dx) + b * T_ * 3 * C + h * hs;
          gq = {base, 3 * C}, gk = {base + C, 3 * C}, gv = {base + 2 * C, 3 * C};
        } else {
          std::fill(dq.begin(), dq.end(), 0.0f);
          std::fill(dk.begin(), dk.end(), 0.0f);
          std::fill(dv.begin(), dv.end(), 0.0f);
        }
        const HeadRows q = head_rows(x, b, h, T_, 3 * C, 0, hs, qb), k = head_rows(x, b, h, T_, 3 * C, C, hs, kb),
                       v = head_rows(x, b, h, T_, 3 * C, 2 * C, hs, vb), go = head_rows(dy, b, h, T_, C, 0, hs, gob),
                       yo = head_rows(y, b, h, T_, C, 0, hs, yob);
        for (int64_t t = 0; t < T_; ++t) D[t] = vec::dot(vk, go.p + t * go.ld, yo.p + t * yo.ld, hs);  // D_t = dout_t·out_t
        for (int64_t r0 = 0; r0 < T_; r0 += tl.q) {
          const int64_t rows = std::min(tl.q, T_ - r0);
          const float* qB = q.p + r0 * q.ld;
          const float* goB = go.p + r0 * go.ld;
          for (int64_t c0 = 0; c0 < r0 + rows; c0 += tl.k) {
            const int64_t cols = key_cols(c0, tl.k, r0, rows);
            mm(false, true, rows, cols, hs, sc, qB, q.ld, k.p + c0 * k.ld, k.ld, 0.0f, P.data(), cols);
            for (int64_t r = 0; r < rows; ++r) {
              const float* s_row = st + (bh * T_ + r0 + r) * attn_tile::kStatsPerRow;
              const float mr = s_row[0], inv_l = 1.0f / s_row[1];
              const int64_t vis = std::max<int64_t>(0, attn_tile::visible_keys(r0 + r, c0, cols));
              float* prow = P.data() + r * cols;
              std::fill(prow + vis, prow + cols, -INFINITY);   // exp_nonpos(-inf) * inv_l = +0, as masked
              vec::exp_scale(vk, prow, prow, cols, mr, inv_l);  // recomputed_p
            }
            mm(true, false, cols, hs, rows, 1.0f, P.data(), cols, goB, go.ld, 1.0f, gv.row(c0), gv.ld);
            mm(false, true, rows, cols, hs, 1.0f, goB, go.ld, v.p + c0 * v.ld, v.ld, 0.0f, dP.data(), cols);
            for (int64_t r = 0; r < rows; ++r) {
              const float* prow = P.data() + r * cols;
              float* drow = dP.data() + r * cols;  // becomes dS (masked entries have p = 0)
              vec::score_grad(vk, drow, prow, cols, D[r0 + r], sc);
            }
            mm(false, false, rows, hs, cols, 1.0f, dP.data(), cols, k.p + c0 * k.ld, k.ld, 1.0f, gq.row(r0), gq.ld);
            mm(true, false, cols, hs, rows, 1.0f, dP.data(), cols, qB, q.ld, 1.0f, gk.row(c0), gk.ld);
          }
        }
        if constexpr (!kInPlace) {
          add_head(dx, b, h, T_, 3 * C, 0, hs, dq.data());
          add_head(dx, b, h, T_, 3 * C, C, hs, dk.data());
          add_head(dx, b, h, T_, 3 * C, 2 * C, hs, dv.data());
        }
      }
    }
  });
}

}  // namespace zt::cpu_ops
