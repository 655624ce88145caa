// cpu_attention_tiled.cpp — memory-efficient causal attention on the CPU backend: the executable
// reference of the tiling scheme and per-tile math in zerotrain/kernels/attention_tile.h (the CUDA
// kernel in csrc/kernels/cuda/attention_tiled.cu runs the same scheme).
//
// One implementation serves GPT's packed qkv[B,T,3C] (attention_tiled_*) and grouped-query
// attention's separate q[B,T,H·hs], k, v [B,T,Hkv·hs] (attention_gqa_*): operands are base
// pointers and row strides, and query head h reads key/value head h / (H/Hkv) in place (repeated
// K/V are never materialised). The forward is split over (b, h) pairs, the backward over (b,
// key/value head) pairs (each writes only its own output slices: no races).
// Within a pair, a head's q, k, v (and dout, out in backward) are fp32 [T,hs] rows — read in place
// from fp32 tensors, widened into per-thread copies for 16-bit ones — and every tile product is
// an fp32 OpenBLAS sgemm of at most tile_q·tile_k·hs multiply-adds. bf16 where the bf16 GEMM is
// the vdpbf16ps one (cpu::active_bf16_gemm() == Dot) is read in place as bf16 rows instead, and
// every tile product runs on that GEMM with an fp32 result: the probability and score-gradient
// tiles (P, dS; fp32 as the softmax computes them) are rounded to bf16 as they enter a product,
// as the CUDA kernels pack P and dS to 16 bits for their tensor-core products. The statistics,
// softmax and gradient accumulators stay fp32.
// Memory: per thread O(T·hs) fp32 scratch for 16-bit dtypes (the widened heads, unless read in
// place; dq, dk, dv in backward, which fp32 accumulates in place) plus one tile_q×tile_k score
// tile (and its bf16 copy) — never T×T.
// Determinism: the tiling depends only on (T, tile_q, tile_k), and each tile's product runs
// single-threaded in its OpenMP thread (cpu_gemm.cpp, cpu_gemm_bf16.cpp), so every element is
// summed in the same order for any thread count.
// Per-row tile math runs on the SIMD rows of cpu_vec_kernels.h (ISA picked at run time), which
// compute attn_tile::unnormalised_p / recomputed_p / score_grad bitwise; a forward row sum is the
// fixed 16-lane order of vec::exp_sum, so results depend neither on the ISA nor the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"
#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::cpu_ops {
namespace {

// One operand of a tile product: fp32 rows (f), or bf16 rows (b: the vdpbf16ps path, where both
// operands of every product are bf16); row t at f + t·ld (b + t·ld).
struct Rows {
  const float* f = nullptr;
  const uint16_t* b = nullptr;
  int64_t ld = 0;
  Rows from(int64_t t) const { return {f ? f + t * ld : nullptr, b ? b + t * ld : nullptr, ld}; }
};

// C[M,N] = alpha op(A) op(B) + beta C, C fp32: sgemm on fp32 rows, the vdpbf16ps GEMM with an fp32
// result on bf16 rows; either runs single-threaded inside the attention's parallel region.
void mm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const Rows& A, const Rows& B, float beta,
        float* C, int64_t ldc) {
  if (A.b) gemm_bf16_dot<float>(ta, tb, M, N, K, alpha, A.b, A.ld, B.b, B.ld, beta, C, ldc);
  else sgemm_rm(ta, tb, M, N, K, alpha, A.f, A.ld, B.f, B.ld, beta, C, ldc);
}

// Whether T's heads are read in place as bf16 rows and multiplied on the vdpbf16ps GEMM.
template <typename T>
bool bf16_products() {
  return std::is_same_v<T, bf16> && cpu::active_bf16_gemm() == cpu::Bf16Gemm::Dot;
}

// A probability / score-gradient tile [rows, cols] (fp32, row stride cols) as a product's operand:
// itself, or (bf16 products) rounded to bf16 into t16.
Rows tile_operand(const vec::Kernels& vk, const float* t, int64_t rows, int64_t cols, bool bf16_rows,
                  std::vector<bf16>& t16) {
  if (!bf16_rows) return {t, nullptr, cols};
  t16.resize(static_cast<size_t>(rows * cols));
  narrow_n(vk, t, t16.data(), rows * cols);
  return {nullptr, reinterpret_cast<const uint16_t*>(t16.data()), cols};
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

// A head's [T, hs] rows as the tile products read them: fp32 tensors in place; bf16 ones in place
// as bf16 rows when bf16_rows; other 16-bit ones widened into buf (resized on first use).
template <typename T>
Rows head_rows(const vec::Kernels& vk, const T* base, int64_t b, int64_t h, int64_t T_, int64_t stride, int64_t hs,
               std::vector<float>& buf, bool bf16_rows) {
  if constexpr (std::is_same_v<T, float>) {
    return {base + b * T_ * stride + h * hs, nullptr, stride};
  } else {
    if (bf16_rows) return {nullptr, reinterpret_cast<const uint16_t*>(base + b * T_ * stride + h * hs), stride};
    buf.resize(static_cast<size_t>(T_ * hs));
    load_head(vk, base, b, h, T_, stride, 0, hs, buf.data());
    return {buf.data(), nullptr, hs};
  }
}

// Row t of a head's rows in fp32: in place, or bf16 widened into buf (hs floats).
const float* row_f32(const vec::Kernels& vk, const Rows& r, int64_t t, int64_t hs, float* buf) {
  if (r.f) return r.f + t * r.ld;
  widen_n(vk, reinterpret_cast<const bf16*>(r.b + t * r.ld), buf, hs);
  return buf;
}

// Where a head's fp32 [T, hs] gradient rows accumulate: row t at p + t·ld.
struct GradRows {
  float* p;
  int64_t ld;
  float* row(int64_t t) const { return p + t * ld; }
};

// Key columns query tile [r0, r0+rows) reads from key tile c0: up to the tile's last query row.
int64_t key_cols(int64_t c0, int64_t tile_k, int64_t r0, int64_t rows) { return std::min(tile_k, r0 + rows - c0); }

// One attention call's operands, GPT's packed qkv and grouped-query attention's separate q, k, v
// alike: row t of query head h of batch row b is q + (b·T + t)·ldq + h·hs; key/value head g's
// rows are k (v) + (b·T + t)·ldkv + g·hs; query head h reads key/value head h / (H/Hkv). The
// gradients dq, dk, dv (backward) have their inputs' strides; out and dout are [B,T,H·hs].
template <typename T>
struct Operands {
  const T *q, *k, *v;
  int64_t ldq, ldkv;
};
struct Dims {
  int64_t B, T, H, Hkv, hs;
  int64_t group() const { return H / Hkv; }
};

template <typename T>
void tiled_forward(T* o, float* st, const Operands<T>& x, const Dims& d, Tiles tl) {
  const int64_t T_ = d.T, H = d.H, hs = d.hs, G = d.group(), ldo = H * hs;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const vec::Kernels& vk = vec::active();
  const bool in_bf16 = bf16_products<T>();
#pragma omp parallel if (d.B * H * T_ * T_ * hs > kParallelGrain)
  {
    // Per-thread scratch, every element written before it is read for each pair.
    std::vector<float> qb, kb, vb, acc(static_cast<size_t>(tl.q * hs));
    std::vector<float> S(static_cast<size_t>(tl.q * tl.k)), m(tl.q), l(tl.q);
    std::vector<bf16> S16;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < d.B * H; ++bh) {
      const int64_t b = bh / H, h = bh % H, g = h / G;
      const Rows q = head_rows(vk, x.q, b, h, T_, x.ldq, hs, qb, in_bf16),
                 k = head_rows(vk, x.k, b, g, T_, x.ldkv, hs, kb, in_bf16),
                 v = head_rows(vk, x.v, b, g, T_, x.ldkv, hs, vb, in_bf16);
      for (int64_t r0 = 0; r0 < T_; r0 += tl.q) {
        const int64_t rows = std::min(tl.q, T_ - r0);
        std::fill(m.begin(), m.end(), -INFINITY);
        std::fill(l.begin(), l.end(), 0.0f);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t c0 = 0; c0 < r0 + rows; c0 += tl.k) {
          const int64_t cols = key_cols(c0, tl.k, r0, rows);
          mm(false, true, rows, cols, hs, sc, q.from(r0), k.from(c0), 0.0f, S.data(), cols);
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
          mm(false, false, rows, hs, cols, 1.0f, tile_operand(vk, S.data(), rows, cols, in_bf16, S16), v.from(c0), 1.0f,
             acc.data(), hs);
        }
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t t = r0 + r;
          const float inv = 1.0f / l[r];
          T* orow = o + (b * T_ + t) * ldo + h * hs;
          if constexpr (std::is_same_v<T, float>) {
            vec::scale_row(vk, orow, hs, inv, acc.data() + r * hs);
          } else {  // acc·inv in place (acc is refilled for the next query tile), rounded once
            vec::scale_row(vk, acc.data() + r * hs, hs, inv);
            narrow_n(vk, acc.data() + r * hs, orow, hs);
          }
          float* s_row = st + (bh * T_ + t) * attn_tile::kStatsPerRow;
          s_row[0] = m[r];
          s_row[1] = l[r];
        }
      }
    }
  }
}

// One query head's fp32 rows (q, its key/value head's k and v, dout, out) and where its
// gradients accumulate (dq: its own rows; dk, dv: its key/value head's, shared by the group).
struct HeadInputs {
  Rows q, k, v, go, yo;
};
struct HeadGrads {
  GradRows q, k, v;
};
// Per-thread backward scratch, written before read: widened 16-bit heads, the fp32 gradients of
// 16-bit dtypes, the rows' D_t, the probability / score-gradient tiles and (bf16 products) their
// bf16 copy and two widened rows.
struct BackwardScratch {
  BackwardScratch(size_t grad_el, int64_t T_, size_t tile, int64_t hs)
      : dq(grad_el), dk(grad_el), dv(grad_el), D(static_cast<size_t>(T_)), P(tile), dP(tile),
        row_go(static_cast<size_t>(hs)), row_yo(static_cast<size_t>(hs)) {}
  std::vector<float> qb, kb, vb, gob, yob, dq, dk, dv, D, P, dP, row_go, row_yo;
  std::vector<bf16> tile16;
};

// The backward of one query head over every (query tile, key tile) pair, in the fixed tile order;
// st: the head's [T, 2] statistics rows.
void backward_head(const vec::Kernels& vk, const HeadInputs& in, const HeadGrads& gr, const float* st, int64_t T_,
                   int64_t hs, Tiles tl, BackwardScratch& w) {
  const float sc = math::attention_scale(static_cast<int>(hs));
  const Rows &q = in.q, &k = in.k, &v = in.v, &go = in.go;
  const bool in_bf16 = q.b != nullptr;
  float* D = w.D.data();
  float* P = w.P.data();
  float* dP = w.dP.data();
  for (int64_t t = 0; t < T_; ++t)  // dout_t·out_t
    D[t] = vec::dot(vk, row_f32(vk, go, t, hs, w.row_go.data()), row_f32(vk, in.yo, t, hs, w.row_yo.data()), hs);
  for (int64_t r0 = 0; r0 < T_; r0 += tl.q) {
    const int64_t rows = std::min(tl.q, T_ - r0);
    const Rows qB = q.from(r0), goB = go.from(r0);
    for (int64_t c0 = 0; c0 < r0 + rows; c0 += tl.k) {
      const int64_t cols = key_cols(c0, tl.k, r0, rows);
      mm(false, true, rows, cols, hs, sc, qB, k.from(c0), 0.0f, P, cols);
      for (int64_t r = 0; r < rows; ++r) {
        const float* s_row = st + (r0 + r) * attn_tile::kStatsPerRow;
        const float mr = s_row[0], inv_l = 1.0f / s_row[1];
        const int64_t vis = std::max<int64_t>(0, attn_tile::visible_keys(r0 + r, c0, cols));
        float* prow = P + r * cols;
        std::fill(prow + vis, prow + cols, -INFINITY);   // exp_nonpos(-inf) * inv_l = +0, as masked
        vec::exp_scale(vk, prow, prow, cols, mr, inv_l);  // recomputed_p
      }
      mm(true, false, cols, hs, rows, 1.0f, tile_operand(vk, P, rows, cols, in_bf16, w.tile16), goB, 1.0f, gr.v.row(c0),
         gr.v.ld);
      mm(false, true, rows, cols, hs, 1.0f, goB, v.from(c0), 0.0f, dP, cols);
      for (int64_t r = 0; r < rows; ++r)  // dP becomes dS (masked entries have p = 0)
        vec::score_grad(vk, dP + r * cols, P + r * cols, cols, D[r0 + r], sc);
      const Rows dS = tile_operand(vk, dP, rows, cols, in_bf16, w.tile16);  // P's bf16 copy is no longer read
      mm(false, false, rows, hs, cols, 1.0f, dS, k.from(c0), 1.0f, gr.q.row(r0), gr.q.ld);
      mm(true, false, cols, hs, rows, 1.0f, dS, qB, 1.0f, gr.k.row(c0), gr.k.ld);
    }
  }
}

// Work is split over (b, key/value head) pairs: a pair's thread runs the group's query heads in
// order h = g·G, g·G + 1, ..., so each dk/dv element sums its group in a fixed order and no other
// thread writes the pair's dq, dk, dv rows. The gradients are overwritten: fp32 zeroes a head's
// rows and accumulates in place (every tile GEMM adds into the gradient tensors); 16-bit
// accumulates a query head's dq and the pair's dk, dv in fp32 and stores each with one rounding
// per element (never reading the tensor's old values).
template <typename T>
void tiled_backward(T* dq, T* dk, T* dv, const T* dy, const T* y, const float* st, const Operands<T>& x,
                    const Dims& d, Tiles tl) {
  const int64_t T_ = d.T, H = d.H, hs = d.hs, G = d.group(), ldo = H * hs;
  const vec::Kernels& vk = vec::active();
  constexpr bool kInPlace = std::is_same_v<T, float>;
  const bool in_bf16 = bf16_products<T>();
#pragma omp parallel if (d.B * H * T_ * T_ * hs > kParallelGrain)
  {
    const size_t n_el = kInPlace ? 0 : static_cast<size_t>(T_ * hs), tile = static_cast<size_t>(tl.q * tl.k);
    BackwardScratch w(n_el, T_, tile, hs);
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < d.B * d.Hkv; ++bg) {
      const int64_t b = bg / d.Hkv, g = bg % d.Hkv;
      HeadGrads gr{{w.dq.data(), hs}, {w.dk.data(), hs}, {w.dv.data(), hs}};
      if constexpr (kInPlace) {
        zero_head(dk, b, g, T_, x.ldkv, 0, hs);
        zero_head(dv, b, g, T_, x.ldkv, 0, hs);
        gr.k = {dk + b * T_ * x.ldkv + g * hs, x.ldkv}, gr.v = {dv + b * T_ * x.ldkv + g * hs, x.ldkv};
      } else {
        std::fill(w.dk.begin(), w.dk.end(), 0.0f);
        std::fill(w.dv.begin(), w.dv.end(), 0.0f);
      }
      HeadInputs in{{}, head_rows(vk, x.k, b, g, T_, x.ldkv, hs, w.kb, in_bf16),
                    head_rows(vk, x.v, b, g, T_, x.ldkv, hs, w.vb, in_bf16), {}, {}};
      for (int64_t h = g * G; h < (g + 1) * G; ++h) {
        if constexpr (kInPlace) {
          zero_head(dq, b, h, T_, x.ldq, 0, hs);
          gr.q = {dq + b * T_ * x.ldq + h * hs, x.ldq};
        } else {
          std::fill(w.dq.begin(), w.dq.end(), 0.0f);
        }
        in.q = head_rows(vk, x.q, b, h, T_, x.ldq, hs, w.qb, in_bf16);
        in.go = head_rows(vk, dy, b, h, T_, ldo, hs, w.gob, in_bf16);
        in.yo = head_rows(vk, y, b, h, T_, ldo, hs, w.yob, in_bf16);
        backward_head(vk, in, gr, st + (b * H + h) * T_ * attn_tile::kStatsPerRow, T_, hs, tl, w);
        if constexpr (!kInPlace) store_head(vk, dq, b, h, T_, x.ldq, 0, hs, w.dq.data());
      }
      if constexpr (!kInPlace) {
        store_head(vk, dk, b, g, T_, x.ldkv, 0, hs, w.dk.data());
        store_head(vk, dv, b, g, T_, x.ldkv, 0, hs, w.dv.data());
      }
    }
  }
}

// GPT's packed qkv[B,T,3C] (and dqkv) as operands: q, k, v are the thirds of a row, Hkv = H.
template <typename T>
Operands<T> packed(const T* qkv, int64_t C) {
  return {qkv, qkv + C, qkv + 2 * C, 3 * C, 3 * C};
}

// Grouped-query attention's separate q[B,T,H·hs] and k, v [B,T,Hkv·hs] as operands.
template <typename T>
Operands<T> separate(const TensorView& q, const TensorView& k, const TensorView& v, int64_t ldq, int64_t ldkv) {
  return {static_cast<const T*>(q.data), static_cast<const T*>(k.data), static_cast<const T*>(v.data), ldq, ldkv};
}

}  // namespace

void attention_tiled_forward(const TensorView& out, const TensorView& stats, const TensorView& qkv, int64_t B,
                             int64_t T_, int64_t C, int64_t H, int64_t tile_q, int64_t tile_k) {
  if (B == 0 || T_ == 0) return;
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    tiled_forward(static_cast<T*>(out.data), static_cast<float*>(stats.data),
                  packed(static_cast<const T*>(qkv.data), C), Dims{B, T_, H, H, C / H}, tiles_of(tile_q, tile_k));
  });
}

void attention_tiled_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                              const TensorView& out, const TensorView& stats, int64_t B, int64_t T_, int64_t C,
                              int64_t H, int64_t tile_q, int64_t tile_k) {
  if (B == 0 || T_ == 0) return;
  dispatch_dtype(dqkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dx = static_cast<T*>(dqkv.data);
    tiled_backward(dx, dx + C, dx + 2 * C, static_cast<const T*>(dout.data), static_cast<const T*>(out.data),
                   static_cast<const float*>(stats.data), packed(static_cast<const T*>(qkv.data), C),
                   Dims{B, T_, H, H, C / H}, tiles_of(tile_q, tile_k));
  });
}

void attention_gqa_forward(const TensorView& out, const TensorView& stats, const TensorView& q, const TensorView& k,
                           const TensorView& v, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t hs,
                           int64_t tile_q, int64_t tile_k) {
  if (B == 0 || T_ == 0) return;
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T> x = separate<T>(q, k, v, H * hs, Hkv * hs);
    tiled_forward(static_cast<T*>(out.data), static_cast<float*>(stats.data), x, Dims{B, T_, H, Hkv, hs},
                  tiles_of(tile_q, tile_k));
  });
}

void attention_gqa_backward(const TensorView& dq, const TensorView& dk, const TensorView& dv, const TensorView& dout,
                            const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out,
                            const TensorView& stats, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t hs,
                            int64_t tile_q, int64_t tile_k) {
  if (B == 0 || T_ == 0) return;
  dispatch_dtype(dq.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Operands<T> x = separate<T>(q, k, v, H * hs, Hkv * hs);
    tiled_backward(static_cast<T*>(dq.data), static_cast<T*>(dk.data), static_cast<T*>(dv.data),
                   static_cast<const T*>(dout.data), static_cast<const T*>(out.data),
                   static_cast<const float*>(stats.data), x, Dims{B, T_, H, Hkv, hs}, tiles_of(tile_q, tile_k));
  });
}

}  // namespace zt::cpu_ops
