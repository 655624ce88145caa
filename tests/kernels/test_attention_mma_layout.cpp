// The index math of the tensor-core attention kernels (zerotrain/kernels/attention_mma_layout.h),
// checked on the CPU: (1) the fragment layouts against the PTX ISA's formulas for mma.m16n8k16
// (.bf16/.f16 A and B, .f32 C), written here independently in the ISA's own terms; (2) a host
// emulation of one warp's ldmatrix.x4 (+ .trans) and mma.sync, driven by the kernels' addressing
// functions and loop structure (csrc/kernels/cuda/attention_mma.cuh: load_a, gemm_nt, gemm_nn, acc_to_a),
// against plain matrix products; (3) the forward's per-warp online softmax on those fragments
// (quad reductions, diagonal / end-of-T masks) against a double-precision causal attention;
// (4) the backward's dK/dV and dQ warp steps (recomputed P from lse₂, masks, dS) likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "zerotrain/core/dtype.h"
#include "zerotrain/kernels/attention_mma_layout.h"

namespace zt::test {
namespace {

namespace am = zt::attn_mma;

// ---- (1) PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" ----
// groupID = laneid >> 2, threadID_in_group = laneid % 4; element i of the thread's fragment.
struct RowCol { int row, col; };
RowCol ptx_a(int lane, int i) {  // a0..a7 (four .b32 registers of two 16-bit elements)
  const int g = lane >> 2, t = lane % 4;
  const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
  const int col = i < 4 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8;
  return {row, col};
}
RowCol ptx_b(int lane, int i) {  // b0..b3: row = k, col = n
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8, g};
}
RowCol ptx_c(int lane, int i) {  // c0..c3
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}

TEST(AttentionMmaLayout, FragmentsMatchPtxIsa) {
  std::set<int> a_cells, b_cells, c_cells;
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      const RowCol r = ptx_a(lane, e);
      EXPECT_EQ(am::frag_a_row(lane, e), r.row) << "A lane " << lane << " e " << e;
      EXPECT_EQ(am::frag_a_col(lane, e), r.col) << "A lane " << lane << " e " << e;
      a_cells.insert(r.row * 16 + r.col);
    }
    for (int e = 0; e < 4; ++e) {
      const RowCol b = ptx_b(lane, e), c = ptx_c(lane, e);
      EXPECT_EQ(am::frag_b_k(lane, e), b.row) << "B lane " << lane << " e " << e;
      EXPECT_EQ(am::frag_b_n(lane, e), b.col) << "B lane " << lane << " e " << e;
      EXPECT_EQ(am::frag_c_row(lane, e), c.row) << "C lane " << lane << " e " << e;
      EXPECT_EQ(am::frag_c_col(lane, e), c.col) << "C lane " << lane << " e " << e;
      b_cells.insert(b.row * 8 + b.col);
      c_cells.insert(c.row * 8 + c.col);
    }
  }
  // Each fragment covers its matrix exactly once (32 lanes x elements = cells).
  EXPECT_EQ(a_cells.size(), 256u);
  EXPECT_EQ(b_cells.size(), 128u);
  EXPECT_EQ(c_cells.size(), 128u);
  // The ldmatrix addresses: lane l points at row l % 8 of matrix l / 8, each matrix 8-aligned.
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(am::ldsm_a_row(lane) % 8, lane % 8);
    EXPECT_EQ(am::ldsm_bt_row(lane) % 8, lane % 8);
    EXPECT_EQ(am::ldsm_a_col(lane) % 8, 0);
    EXPECT_EQ(am::ldsm_bt_col(lane) % 8, 0);
  }
  EXPECT_EQ(am::head_dim(1), 32);
  EXPECT_EQ(am::head_dim(64), 64);
  EXPECT_EQ(am::head_dim(65), 96);
  EXPECT_EQ(am::head_dim(80), 96);
  EXPECT_EQ(am::head_dim(128), 128);
  for (int D : {32, 64, 96, 128}) {
    EXPECT_EQ(am::smem_stride(D) * 2 % 16, 0) << "cp.async rows 16-byte aligned, D " << D;
    // Conflict-free ldmatrix: the 8 rows of one 8x8 matrix start in 8 distinct 16-byte bank groups.
    std::set<int> groups;
    for (int r = 0; r < 8; ++r) groups.insert((r * am::smem_stride(D) * 2 / 16) % 8);
    EXPECT_EQ(groups.size(), 8u) << "D " << D;
  }
  // Masks: a tile needs the per-element test exactly when one of its scores is masked.
  for (int64_t T : {1, 63, 64, 65, 130})
    for (int64_t r0 = 0; r0 < T; r0 += 64)
      for (int64_t c0 = 0; c0 <= r0; c0 += 32) {
        bool any = false;
        for (int64_t r = r0; r < r0 + 64; ++r)
          for (int64_t c = c0; c < c0 + 32; ++c) any = any || am::score_masked(r, c, T);
        EXPECT_EQ(am::tile_needs_mask(r0, 64, c0, 32, T), any) << "T " << T << " r0 " << r0 << " c0 " << c0;
      }
  EXPECT_TRUE(am::vector_loads_ok(64, 2304, 256));
  EXPECT_FALSE(am::vector_loads_ok(20, 2304, 256));
  EXPECT_FALSE(am::vector_loads_ok(64, 2300, 256));
  EXPECT_FALSE(am::vector_loads_ok(64, 2304, 258));
}

// ---- (2) host emulation of one warp ----
// 16-bit shared memory holds bf16 bits; a register is two of them (low = even element).
using Smem = std::vector<uint16_t>;
using Regs = std::array<uint32_t, 4>;  // per lane
using WarpRegs = std::array<Regs, 32>;
using Acc = std::array<std::array<float, 4>, 32>;  // per lane, one 16x8 C fragment

uint16_t bf(float v) { return f32_to_bf16_bits(v); }
float fb(uint16_t h) { return bf16_bits_to_f32(h); }
uint32_t pack(float lo, float hi) { return uint32_t{bf(lo)} | (uint32_t{bf(hi)} << 16); }
float lo_of(uint32_t r) { return fb(static_cast<uint16_t>(r & 0xffff)); }
float hi_of(uint32_t r) { return fb(static_cast<uint16_t>(r >> 16)); }

// ldmatrix.x4 (ISA semantics): lane l supplies the address of row l % 8 of matrix l / 8 (here an
// element offset into smem); register j of lane receives matrix j's (row lane/4, cols 2(lane%4)+{0,1}),
// with .trans (rows 2(lane%4)+{0,1}, col lane/4).
WarpRegs ldmatrix_x4(const Smem& sm, const std::array<int, 32>& addr, int ld, bool trans) {
  WarpRegs out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < 4; ++j) {
      uint16_t h[2];
      for (int k = 0; k < 2; ++k) {
        const int row = trans ? 2 * (lane % 4) + k : lane / 4, col = trans ? lane / 4 : 2 * (lane % 4) + k;
        h[k] = sm[static_cast<size_t>(addr[8 * j + row] + col)];
      }
      out[lane][j] = uint32_t{h[0]} | (uint32_t{h[1]} << 16);
    }
  (void)ld;
  return out;
}

// mma.m16n8k16 (ISA semantics through the independent ptx_* layouts): c += a · b.
void mma(Acc& c, const WarpRegs& a, const std::array<std::array<uint32_t, 2>, 32>& b) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const RowCol rc = ptx_a(lane, i);
      A[rc.row][rc.col] = i % 2 ? hi_of(a[lane][i / 2]) : lo_of(a[lane][i / 2]);
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = ptx_b(lane, i);
      B[rc.row][rc.col] = i % 2 ? hi_of(b[lane][i / 2]) : lo_of(b[lane][i / 2]);
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const RowCol rc = ptx_c(lane, i);
      double s = 0;
      for (int k = 0; k < 16; ++k) s += double{A[rc.row][k]} * B[k][rc.col];
      c[lane][i] += static_cast<float>(s);
    }
}

// The kernels' helpers (attention_mma.cuh), step for step, on the emulated warp.
// load_a: a[kk] from the 16 x K row-major tile at element offset `tile`.
std::vector<WarpRegs> load_a(const Smem& sm, int tile, int ld, int K) {
  std::vector<WarpRegs> a;
  for (int kk = 0; kk < K / 16; ++kk) {
    std::array<int, 32> addr;
    for (int l = 0; l < 32; ++l) addr[l] = tile + am::ldsm_a_row(l) * ld + am::ldsm_a_col(l) + kk * 16;
    a.push_back(ldmatrix_x4(sm, addr, ld, false));
  }
  return a;
}
std::array<std::array<uint32_t, 2>, 32> pair(const WarpRegs& r, int first) {
  std::array<std::array<uint32_t, 2>, 32> b;
  for (int l = 0; l < 32; ++l) b[l] = {r[l][first], r[l][first + 1]};
  return b;
}
// gemm_nt: c[N/8] += A · Btᵀ, Bt N x K row-major at offset bt; gemm_nn: c += A · Bm, Bm K x N.
void gemm(std::vector<Acc>& c, const std::vector<WarpRegs>& a, const Smem& sm, int bmat, int ld, int K, int N,
          bool nn_form) {
  for (int kk = 0; kk < K / 16; ++kk)
    for (int nn = 0; nn < N / 16; ++nn) {
      std::array<int, 32> addr;
      for (int l = 0; l < 32; ++l)
        addr[l] = nn_form ? bmat + (am::ldsm_bk_row(l) + kk * 16) * ld + am::ldsm_bk_col(l) + nn * 16
                          : bmat + (am::ldsm_bt_row(l) + nn * 16) * ld + am::ldsm_bt_col(l) + kk * 16;
      const WarpRegs b = ldmatrix_x4(sm, addr, ld, nn_form);
      mma(c[2 * nn], a[kk], pair(b, 0));
      mma(c[2 * nn + 1], a[kk], pair(b, 2));
    }
}
std::vector<WarpRegs> acc_to_a(const std::vector<Acc>& c) {
  std::vector<WarpRegs> a(c.size() / 2);
  for (size_t kk = 0; kk < a.size(); ++kk)
    for (int l = 0; l < 32; ++l)
      a[kk][l] = {pack(c[2 * kk][l][0], c[2 * kk][l][1]), pack(c[2 * kk][l][2], c[2 * kk][l][3]),
                  pack(c[2 * kk + 1][l][0], c[2 * kk + 1][l][1]), pack(c[2 * kk + 1][l][2], c[2 * kk + 1][l][3])};
  return a;
}
// The value at (row, col) of a 16 x (8·c.size()) accumulator, found through the C layout.
float acc_at(const std::vector<Acc>& c, int row, int col) {
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < 4; ++e)
      if (am::frag_c_row(l, e) == row && 8 * (col / 8) + am::frag_c_col(l, e) == col) return c[col / 8][l][e];
  ADD_FAILURE() << "no lane holds (" << row << ", " << col << ")";
  return NAN;
}

// Small multiples of 1/8: products and sums are exact in fp32, bf16 holds them exactly.
float small(std::mt19937& rng) { return static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f; }

TEST(AttentionMmaLayout, EmulatedWarpGemmsMatchMatrixProducts) {
  std::mt19937 rng(11);
  for (int D : {32, 64, 96, 128}) {
    const int ld = am::smem_stride(D), N = 64;
    // A tile (16 x D) at offset 0, a [N][D] tile ("K": B for gemm_nt) and a [N][D] one read as [k][n].
    Smem sm(static_cast<size_t>((16 + 2 * N) * ld), bf(NAN));  // padding columns poisoned: never read
    const int qa = 0, kb = 16 * ld, vb = (16 + N) * ld;
    std::vector<std::vector<float>> Q(16, std::vector<float>(D)), K(N, std::vector<float>(D));
    std::vector<std::vector<float>> V(N, std::vector<float>(D));
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < D; ++c) sm[qa + r * ld + c] = bf(Q[r][c] = small(rng));
    for (int r = 0; r < N; ++r)
      for (int c = 0; c < D; ++c) {
        sm[kb + r * ld + c] = bf(K[r][c] = small(rng));
        sm[vb + r * ld + c] = bf(V[r][c] = small(rng));
      }
    // S = Q Kᵀ (16 x N).
    std::vector<Acc> s(N / 8, Acc{});
    gemm(s, load_a(sm, qa, ld, D), sm, kb, ld, D, N, false);
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < N; ++c) {
        double ref = 0;
        for (int k = 0; k < D; ++k) ref += double{Q[r][k]} * K[c][k];
        ASSERT_EQ(acc_at(s, r, c), static_cast<float>(ref)) << "S D " << D << " (" << r << "," << c << ")";
      }
    // P = S / 64 (exact in bf16), repacked in registers, O = P V (16 x D): the P·V step.
    for (auto& f : s)
      for (auto& lane : f)
        for (float& v : lane) v /= 64.0f;
    std::vector<Acc> o(D / 8, Acc{});
    gemm(o, acc_to_a(s), sm, vb, ld, N, D, true);
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < D; ++c) {
        double ref = 0;
        for (int k = 0; k < N; ++k) {
          double sk = 0;
          for (int i = 0; i < D; ++i) sk += double{Q[r][i]} * K[k][i];
          ref += static_cast<double>(bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(sk / 64.0)))) * V[k][c];
        }
        ASSERT_NEAR(acc_at(o, r, c), ref, 1e-4 * (1 + std::fabs(ref))) << "O D " << D << " (" << r << "," << c << ")";
      }
  }
}

// ---- (3) the forward's per-warp online softmax on fragments ----
// One warp owns query rows row0..row0+15 of a head; key tiles of 64 (the kernel's BC); the scores
// come from the emulated gemm_nt, the mask / max / sum bookkeeping is the kernel's (by lane, e).
TEST(AttentionMmaLayout, EmulatedForwardWarpMatchesCausalAttention) {
  std::mt19937 rng(5);
  const int D = 64, ld = am::smem_stride(D), BC = am::kBlockCols;
  for (int T : {1, 20, 64, 100, 150}) {
    for (int row0 : {0, 16, 48, 64, 96, 128}) {
      if (row0 >= T) continue;
      const int hs = 48;  // zero-padded to D = 64 like the kernels' shared tiles
      std::vector<std::vector<float>> q(T, std::vector<float>(D, 0.0f)), k = q, v = q;
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < hs; ++c) {
          q[t][c] = fb(bf(small(rng)));
          k[t][c] = fb(bf(small(rng)));
          v[t][c] = fb(bf(small(rng)));
        }
      const float scale = 1.0f / std::sqrt(float(hs)), scale_log2 = scale * 1.4426950408889634f;
      const int r0 = row0 / 64 * 64;                      // the block's query tile
      const int last = std::min(T, r0 + 64), n_tiles = (last + BC - 1) / BC;
      Smem qs(static_cast<size_t>(16 * ld), 0);
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < D; ++c) qs[r * ld + c] = row0 + r < T ? bf(q[row0 + r][c]) : 0;
      const std::vector<WarpRegs> qf = load_a(qs, 0, ld, D);
      std::vector<Acc> o(D / 8, Acc{});
      float m[32][2], l[32][2];
      for (int lane = 0; lane < 32; ++lane) m[lane][0] = m[lane][1] = -INFINITY, l[lane][0] = l[lane][1] = 0;
      for (int j = 0; j < n_tiles; ++j) {
        const int c0 = j * BC;
        Smem kv(static_cast<size_t>(2 * BC * ld), 0);  // rows beyond T zero-filled (cp.async zfill)
        for (int r = 0; r < BC; ++r)
          for (int c = 0; c < D; ++c)
            if (c0 + r < T) kv[r * ld + c] = bf(k[c0 + r][c]), kv[(BC + r) * ld + c] = bf(v[c0 + r][c]);
        std::vector<Acc> s(BC / 8, Acc{});
        gemm(s, qf, kv, 0, ld, D, BC, false);
        const bool need_mask = am::tile_needs_mask(r0, 64, c0, BC, T);
        float mx[32][2];
        for (int lane = 0; lane < 32; ++lane) {
          mx[lane][0] = mx[lane][1] = -INFINITY;
          const int rg = row0 + lane / 4;
          for (int n = 0; n < BC / 8; ++n)
            for (int e = 0; e < 4; ++e) {
              const int key = c0 + 8 * n + am::frag_c_col(lane, e), row = rg + 8 * (e / 2);
              float x = s[n][lane][e] * scale_log2;
              if (need_mask && (key > row || key >= T)) x = -INFINITY;
              s[n][lane][e] = x;
              mx[lane][e / 2] = std::fmax(mx[lane][e / 2], x);
            }
        }
        for (int lane = 0; lane < 32; ++lane)  // the two shfl_xor steps: the quad's max
          for (int r = 0; r < 2; ++r) {
            float q4 = -INFINITY;
            for (int x = 0; x < 4; ++x) q4 = std::fmax(q4, mx[(lane & ~3) + x][r]);
            const float m_new = std::fmax(m[lane][r], q4);
            const float alpha = m[lane][r] == -INFINITY ? 0.0f : std::exp2(m[lane][r] - m_new);
            const float mu = m_new == -INFINITY ? 0.0f : m_new;
            m[lane][r] = m_new;
            l[lane][r] *= alpha;
            for (int n = 0; n < D / 8; ++n) o[n][lane][2 * r] *= alpha, o[n][lane][2 * r + 1] *= alpha;
            for (int n = 0; n < BC / 8; ++n)
              for (int e = 2 * r; e < 2 * r + 2; ++e) {
                const float pv = std::exp2(s[n][lane][e] - mu);
                s[n][lane][e] = pv;
                l[lane][r] += pv;
              }
          }
        gemm(o, acc_to_a(s), kv, BC * ld, ld, BC, D, true);
      }
      for (int lane = 0; lane < 32; ++lane)
        for (int e = 0; e < 4; ++e) {
          const int row = row0 + lane / 4 + 8 * (e / 2);
          if (row >= T) continue;
          float lsum = 0;
          for (int x = 0; x < 4; ++x) lsum += l[(lane & ~3) + x][e / 2];
          // Double reference of this row: softmax over keys 0..row.
          std::vector<double> sc(row + 1);
          double mxr = -INFINITY, den = 0;
          for (int key = 0; key <= row; ++key) {
            double d = 0;
            for (int c = 0; c < D; ++c) d += double{q[row][c]} * k[key][c];
            sc[key] = d * scale;
            mxr = std::max(mxr, sc[key]);
          }
          for (double& x : sc) den += std::exp(x - mxr);
          EXPECT_NEAR(m[lane][e / 2] * 0.6931471805599453, mxr, 1e-5) << "T " << T << " row " << row;
          EXPECT_NEAR(lsum, den, 1e-4 * den) << "T " << T << " row " << row;
          for (int n = 0; n < D / 8; ++n) {
            const int col = 8 * n + am::frag_c_col(lane, e);
            double ref = 0;
            for (int key = 0; key <= row; ++key) ref += std::exp(sc[key] - mxr) / den * v[key][col];
            // P is rounded to bf16 before P·V (2^-9 relative per term).
            EXPECT_NEAR(o[n][lane][e] / lsum, ref, 8e-3) << "T " << T << " row " << row << " col " << col;
          }
        }
    }
  }
}

// ---- (4) the backward's per-warp steps on fragments (attention_flash_bwd.cu) ----
// dK/dV: a warp owns keys key0..key0+15 and visits query tiles of BQ from its block's first key;
// dQ: a warp owns queries row0..row0+15 and visits key tiles of BC; P from lse₂ = log2(Σ exp(s − m)) + m·log2e.
// Both against a double-precision causal attention backward of one head.
struct Head {
  int T, D, hs;
  std::vector<std::vector<float>> q, k, v, dout;
  std::vector<double> lse2, Dt;  // per query row
  std::vector<std::vector<double>> dq, dk, dv;
};
Head make_head(std::mt19937& rng, int T, int hs) {
  const int D = am::head_dim(hs);
  Head h{T, D, hs, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  auto mat = [&] {
    std::vector<std::vector<float>> m(T, std::vector<float>(D, 0.0f));
    for (auto& r : m)
      for (int c = 0; c < hs; ++c) r[c] = small(rng);
    return m;
  };
  h.q = mat(), h.k = mat(), h.v = mat(), h.dout = mat();
  const double sc = 1.0 / std::sqrt(double(hs));
  h.lse2.assign(T, 0), h.Dt.assign(T, 0);
  h.dq.assign(T, std::vector<double>(D, 0)), h.dk = h.dq, h.dv = h.dq;
  for (int t = 0; t < T; ++t) {
    std::vector<double> s(t + 1), P(t + 1), dP(t + 1);
    double mx = -INFINITY, den = 0;
    for (int j = 0; j <= t; ++j) {
      double d = 0;
      for (int c = 0; c < D; ++c) d += double{h.q[t][c]} * h.k[j][c];
      mx = std::max(mx, s[j] = d * sc);
    }
    for (int j = 0; j <= t; ++j) den += std::exp(s[j] - mx);
    h.lse2[t] = mx / std::log(2.0) + std::log2(den);
    std::vector<double> o(D, 0);
    for (int j = 0; j <= t; ++j) {
      P[j] = std::exp(s[j] - mx) / den;
      for (int c = 0; c < D; ++c) o[c] += P[j] * h.v[j][c];
    }
    for (int c = 0; c < D; ++c) h.Dt[t] += double{h.dout[t][c]} * o[c];
    for (int j = 0; j <= t; ++j) {
      double dpj = 0;
      for (int c = 0; c < D; ++c) dpj += double{h.dout[t][c]} * h.v[j][c];
      const double ds = P[j] * (dpj - h.Dt[t]) * sc;
      for (int c = 0; c < D; ++c) {
        h.dv[j][c] += P[j] * h.dout[t][c];
        h.dq[t][c] += ds * h.k[j][c];
        h.dk[j][c] += ds * h.q[t][c];
      }
    }
  }
  return h;
}
// Rows [t0, t0+R) of m into a zero-filled [R][smem_stride(D)] bf16 tile (zero beyond T).
Smem tile_of(const std::vector<std::vector<float>>& m, int t0, int R, int D) {
  const int ld = am::smem_stride(D);
  Smem sm(static_cast<size_t>(R * ld), 0);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < D; ++c)
      if (t0 + r < static_cast<int>(m.size())) sm[r * ld + c] = bf(m[t0 + r][c]);
  return sm;
}

TEST(AttentionMmaLayout, EmulatedBackwardWarpsMatchCausalAttention) {
  std::mt19937 rng(9);
  for (auto [T, hs] : {std::pair<int, int>{1, 32}, {70, 32}, {130, 64}, {100, 80}}) {
    const Head h = make_head(rng, T, hs);
    const int D = h.D, ld = am::smem_stride(D), BQ = D <= 64 ? 64 : 32;  // bwd_cols<D>()
    const float scale = 1.0f / std::sqrt(float(hs)), scale_log2 = scale * 1.4426950408889634f;
    // Reference gradients are of the exact softmax; the emulation rounds P and dS to bf16.
    auto close = [&](double got, double ref, const char* what, int row, int col) {
      EXPECT_NEAR(got, ref, 2e-2 * (1 + std::fabs(ref))) << what << " T " << T << " hs " << hs << " (" << row << ","
                                                         << col << ")";
    };
    for (int key0 = 0; key0 < T; key0 += 16) {  // dK/dV warp: block c0 = key0 / 64 * 64
      const int c0 = key0 / 64 * 64, rstart = c0 / BQ * BQ;
      const Smem kv = tile_of(h.k, key0, 16, D), vv = tile_of(h.v, key0, 16, D);
      std::vector<Acc> dk(D / 8, Acc{}), dv(D / 8, Acc{});
      for (int r0 = rstart; r0 < T; r0 += BQ) {
        const Smem qt = tile_of(h.q, r0, BQ, D), dot = tile_of(h.dout, r0, BQ, D);
        std::vector<Acc> st(BQ / 8, Acc{}), dpt(BQ / 8, Acc{});
        gemm(st, load_a(kv, 0, ld, D), qt, 0, ld, D, BQ, false);
        const bool need_mask = am::tile_needs_mask(r0, BQ, c0, 64, T);
        for (int lane = 0; lane < 32; ++lane)
          for (int n = 0; n < BQ / 8; ++n)
            for (int e = 0; e < 4; ++e) {
              const int qc = 8 * n + am::frag_c_col(lane, e), qq = r0 + qc, key = key0 + lane / 4 + 8 * (e / 2);
              const bool masked = need_mask && am::score_masked(qq, key, T);
              const float l2 = qq < T ? static_cast<float>(h.lse2[qq]) : 0.0f;
              st[n][lane][e] = masked ? 0.0f : std::exp2(st[n][lane][e] * scale_log2 - l2);
            }
        gemm(dv, acc_to_a(st), dot, 0, ld, BQ, D, true);
        gemm(dpt, load_a(vv, 0, ld, D), dot, 0, ld, D, BQ, false);
        for (int lane = 0; lane < 32; ++lane)
          for (int n = 0; n < BQ / 8; ++n)
            for (int e = 0; e < 4; ++e) {
              const int qq = r0 + 8 * n + am::frag_c_col(lane, e);
              const float dd = qq < T ? static_cast<float>(h.Dt[qq]) : 0.0f;
              dpt[n][lane][e] = st[n][lane][e] * (dpt[n][lane][e] - dd) * scale;
            }
        gemm(dk, acc_to_a(dpt), qt, 0, ld, BQ, D, true);
      }
      for (int r = 0; r < 16 && key0 + r < T; ++r)
        for (int c = 0; c < hs; ++c) {
          close(acc_at(dk, r, c), h.dk[key0 + r][c], "dK", key0 + r, c);
          close(acc_at(dv, r, c), h.dv[key0 + r][c], "dV", key0 + r, c);
        }
    }
    for (int row0 = 0; row0 < T; row0 += 16) {  // dQ warp: block r0 = row0 / 64 * 64, key tiles of BQ
      const int r0 = row0 / 64 * 64, last = std::min(T, r0 + 64);
      const Smem qs = tile_of(h.q, row0, 16, D), ds = tile_of(h.dout, row0, 16, D);
      std::vector<Acc> dq(D / 8, Acc{});
      for (int c0 = 0; c0 < last; c0 += BQ) {
        const Smem kt = tile_of(h.k, c0, BQ, D), vt = tile_of(h.v, c0, BQ, D);
        std::vector<Acc> s(BQ / 8, Acc{}), dp(BQ / 8, Acc{});
        gemm(s, load_a(qs, 0, ld, D), kt, 0, ld, D, BQ, false);
        gemm(dp, load_a(ds, 0, ld, D), vt, 0, ld, D, BQ, false);
        const bool need_mask = am::tile_needs_mask(r0, 64, c0, BQ, T);
        for (int lane = 0; lane < 32; ++lane)
          for (int n = 0; n < BQ / 8; ++n)
            for (int e = 0; e < 4; ++e) {
              const int key = c0 + 8 * n + am::frag_c_col(lane, e), row = row0 + lane / 4 + 8 * (e / 2);
              const bool masked = need_mask && am::score_masked(row, key, T);
              const float l2 = row < T ? static_cast<float>(h.lse2[row]) : 0.0f;
              const float dd = row < T ? static_cast<float>(h.Dt[row]) : 0.0f;
              const float pv = masked ? 0.0f : std::exp2(s[n][lane][e] * scale_log2 - l2);
              s[n][lane][e] = pv * (dp[n][lane][e] - dd) * scale;
            }
        gemm(dq, acc_to_a(s), kt, 0, ld, BQ, D, true);
      }
      for (int r = 0; r < 16 && row0 + r < T; ++r)
        for (int c = 0; c < hs; ++c) close(acc_at(dq, r, c), h.dq[row0 + r][c], "dQ", row0 + r, c);
    }
  }
}

}  // namespace
}  // namespace zt::test
