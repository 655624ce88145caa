// Grouped-query attention (attention_gqa_forward / _backward) on the CPU backend: forward and every
// input gradient against a double reference (many B, T around the tile edges, H/Hkv = 1, 2, 4,
// tiles that do and do not divide T); with Hkv == H it is the packed-qkv tiled op bitwise; with
// Hkv < H it is attention over explicitly repeated K/V (dk, dv the sums of the repeated heads'
// gradients); the backward is the same bits at any thread count; bad arguments are rejected.
#include "attention_ref.h"
#include "kernel_test_util.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::test {
namespace {

struct Case {
  int64_t B, T, H, Hkv, hs, tile_q, tile_k;
  GqaDims dims() const { return {B, T, H, Hkv, hs}; }
  int64_t q_el() const { return B * T * H * hs; }
  int64_t kv_el() const { return B * T * Hkv * hs; }
};

std::string tag_of(DType dt, const Case& c) {
  return dt_tag(dt) + " B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " H" + std::to_string(c.H) + " Hkv" +
         std::to_string(c.Hkv) + " hs" + std::to_string(c.hs) + " tiles " + std::to_string(c.tile_q) + "x" +
         std::to_string(c.tile_k);
}

// One forward + backward of the op on given inputs; the gradients start as dq0, dk0, dv0, which
// the op overwrites.
struct GqaRun {
  HostTensor out, stats, dq, dk, dv;
};
GqaRun run_gqa(Stream& s, const Case& c, DType dt, HostTensor& q, HostTensor& k, HostTensor& v, HostTensor& dout,
            const std::vector<double>& dq0, const std::vector<double>& dk0, const std::vector<double>& dv0) {
  GqaRun r{HostTensor(dt, {c.B, c.T, c.H * c.hs}), HostTensor(DType::F32, {c.B, c.H, c.T, attn_tile::kStatsPerRow}),
        HostTensor(dt, {c.B, c.T, c.H * c.hs}), HostTensor(dt, {c.B, c.T, c.Hkv * c.hs}),
        HostTensor(dt, {c.B, c.T, c.Hkv * c.hs})};
  r.dq.fill(dq0);
  r.dk.fill(dk0);
  r.dv.fill(dv0);
  ops::attention_gqa_forward(s, r.out.view(), r.stats.view(), q.view(), k.view(), v.view(), c.B, c.T, c.H, c.Hkv, c.hs,
                             c.tile_q, c.tile_k);
  ops::attention_gqa_backward(s, r.dq.view(), r.dk.view(), r.dv.view(), dout.view(), q.view(), k.view(), v.view(),
                              r.out.view(), r.stats.view(), c.B, c.T, c.H, c.Hkv, c.hs, c.tile_q, c.tile_k);
  s.synchronize();
  return r;
}

// Random inputs of one case: q, k, v, dout and the gradients' starting values.
struct Inputs {
  HostTensor q, k, v, dout, dq0, dk0, dv0;
};
Inputs random_inputs(std::mt19937_64& rng, DType dt, const Case& c) {
  return {random_tensor(rng, dt, {c.B, c.T, c.H * c.hs}, -1.5, 1.5),
          random_tensor(rng, dt, {c.B, c.T, c.Hkv * c.hs}, -1.5, 1.5),
          random_tensor(rng, dt, {c.B, c.T, c.Hkv * c.hs}),
          random_tensor(rng, dt, {c.B, c.T, c.H * c.hs}),
          random_tensor(rng, dt, {c.B, c.T, c.H * c.hs}),
          random_tensor(rng, dt, {c.B, c.T, c.Hkv * c.hs}),
          random_tensor(rng, dt, {c.B, c.T, c.Hkv * c.hs})};
}

// Forward within the dtype's rounding of the double reference; each gradient (started at random
// values) equals the reference gradient within rel of its magnitude.
void check_against_reference(Stream& s, std::mt19937_64& rng, DType dt, const Case& c, double out_tol,
                             double grad_tol) {
  const std::string tag = tag_of(dt, c);
  Inputs in = random_inputs(rng, dt, c);
  GqaRun r = run_gqa(s, c, dt, in.q, in.k, in.v, in.dout, in.dq0.values(), in.dk0.values(), in.dv0.values());
  const auto q = in.q.values(), k = in.k.values(), v = in.v.values();
  expect_close(r.out.values(), gqa_attention_ref(q, k, v, c.dims()), out_tol, out_tol, "out " + tag);
  const GqaGrads g = gqa_attention_grad_ref(q, k, v, in.dout.values(), c.dims());
  expect_overwritten(r.dq.values(), g.dq, grad_tol, "dq " + tag);
  expect_overwritten(r.dk.values(), g.dk, grad_tol, "dk " + tag);
  expect_overwritten(r.dv.values(), g.dv, grad_tol, "dv " + tag);
  const auto st = r.stats.values();
  for (size_t i = 0; i < st.size(); i += 2) {
    ASSERT_TRUE(std::isfinite(st[i])) << "stats " << tag;
    ASSERT_GE(st[i + 1], 1.0) << "stats " << tag;  // the row max contributes exp(0)
  }
}

class GqaAttentionTest : public KernelTest {};

// The analytic double reference is the derivative of the double forward (finite differences).
TEST_F(GqaAttentionTest, ReferenceGradientsMatchFiniteDifferences) {
  const Case c{2, 5, 4, 2, 3, 0, 0};
  const auto q = random_values(rng_, c.q_el(), DType::F32), k = random_values(rng_, c.kv_el(), DType::F32),
             v = random_values(rng_, c.kv_el(), DType::F32), dy = random_values(rng_, c.q_el(), DType::F32);
  const GqaGrads g = gqa_attention_grad_ref(q, k, v, dy, c.dims());
  const std::vector<double> zq(q.size(), 0.0), zkv(k.size(), 0.0);
  using V = std::vector<double>;
  const GqaDims d = c.dims();
  expect_accumulated(g.dq, zq, numeric_grad([&](const V& x) { return dot(dy, gqa_attention_ref(x, k, v, d)); }, q),
                     1e-7, "dq");
  expect_accumulated(g.dk, zkv, numeric_grad([&](const V& x) { return dot(dy, gqa_attention_ref(q, x, v, d)); }, k),
                     1e-7, "dk");
  expect_accumulated(g.dv, zkv, numeric_grad([&](const V& x) { return dot(dy, gqa_attention_ref(q, k, x, d)); }, v),
                     1e-7, "dv");
}

// fp32: forward within 1e-5 of the double reference, gradients within 2e-5 of their magnitude,
// over B 1-3, T 1 to 97 (odd, around tile edges), H/Hkv 1, 2, 4, default and small tiles.
TEST_F(GqaAttentionTest, Fp32MatchesDoubleReference) {
  std::vector<Case> cases;
  for (int64_t T : {1, 2, 7, 32, 33, 97})
    for (auto [H, Hkv] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {4, 1}, {8, 2}}) {
      cases.push_back({2, T, H, Hkv, 8, 0, 0});    // default tiles
      cases.push_back({1, T, H, Hkv, 12, 5, 7});   // tiles dividing none of the T
      cases.push_back({3, T, H, Hkv, 16, 16, 8});  // tiles smaller than T
    }
  for (const Case& c : cases) check_against_reference(s(), rng_, DType::F32, c, 1e-5, 2e-5);
}

// 16-bit: within the dtype's round-off of the double reference (inputs are representable; the
// output and each gradient are rounded once to the storage type).
TEST_F(GqaAttentionTest, SixteenBitWithinRoundoff) {
  for (DType dt : {DType::BF16, DType::F16})
    for (const Case& c : {Case{1, 1, 4, 2, 8, 0, 0}, Case{2, 19, 4, 1, 8, 4, 6}, Case{1, 40, 8, 2, 16, 16, 16},
                          Case{2, 9, 2, 2, 12, 3, 2}})
      check_against_reference(s(), rng_, dt, c, dtype_eps(dt) * 4, grad_rel(dt));
}

// Splits qkv[B,T,3C] into its thirds q, k, v [B,T,C].
std::vector<HostTensor> thirds(const HostTensor& qkv, DType dt, int64_t rows, int64_t C) {
  std::vector<HostTensor> parts;
  const auto x = qkv.values();
  for (int64_t part = 0; part < 3; ++part) {
    HostTensor p(dt, {rows, C});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < C; ++i) p.set(r * C + i, x[(r * 3 + part) * C + i]);
    parts.push_back(std::move(p));
  }
  return parts;
}

// Hkv == H with q, k, v the thirds of a packed qkv: out, stats and every gradient are the bits of
// attention_tiled_forward / _backward on qkv.
TEST_F(GqaAttentionTest, EqualsPackedTiledAttentionBitwise) {
  for (DType dt : kAllDtypes)
    for (const Case& c : {Case{2, 1, 2, 2, 8, 0, 0}, Case{2, 37, 3, 3, 8, 0, 0}, Case{1, 70, 4, 4, 16, 16, 24},
                          Case{3, 13, 2, 2, 12, 5, 3}}) {
      const std::string tag = tag_of(dt, c);
      const int64_t C = c.H * c.hs, rows = c.B * c.T;
      HostTensor qkv = random_tensor(rng_, dt, {c.B, c.T, 3 * C}, -1.5, 1.5);
      HostTensor dout = random_tensor(rng_, dt, {c.B, c.T, C});
      HostTensor dqkv = random_tensor(rng_, dt, {c.B, c.T, 3 * C}), out(dt, {c.B, c.T, C});
      HostTensor stats(DType::F32, {c.B, c.H, c.T, attn_tile::kStatsPerRow});
      std::vector<HostTensor> x = thirds(qkv, dt, rows, C), d0 = thirds(dqkv, dt, rows, C);
      GqaRun r = run_gqa(s(), c, dt, x[0], x[1], x[2], dout, d0[0].values(), d0[1].values(), d0[2].values());
      ops::attention_tiled_forward(s(), out.view(), stats.view(), qkv.view(), c.B, c.T, C, c.H, c.tile_q, c.tile_k);
      ops::attention_tiled_backward(s(), dqkv.view(), dout.view(), qkv.view(), out.view(), stats.view(), c.B, c.T, C,
                                    c.H, c.tile_q, c.tile_k);
      sync();
      EXPECT_TRUE(r.out.raw() == out.raw()) << "out " << tag;
      EXPECT_TRUE(r.stats.raw() == stats.raw()) << "stats " << tag;
      std::vector<HostTensor> d = thirds(dqkv, dt, rows, C);
      EXPECT_TRUE(r.dq.raw() == d[0].raw()) << "dq " << tag;
      EXPECT_TRUE(r.dk.raw() == d[1].raw()) << "dk " << tag;
      EXPECT_TRUE(r.dv.raw() == d[2].raw()) << "dv " << tag;
    }
}

// [B,T,Hkv·hs] with every head repeated H/Hkv times: [B,T,H·hs].
std::vector<double> repeat_heads(const std::vector<double>& x, const Case& c) {
  const int64_t G = c.H / c.Hkv;
  std::vector<double> out(static_cast<size_t>(c.q_el()));
  for (int64_t row = 0; row < c.B * c.T; ++row)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.hs; ++i) out[(row * c.H + h) * c.hs + i] = x[(row * c.Hkv + h / G) * c.hs + i];
  return out;
}
// The gradient of a repeated tensor back on the key/value heads: the sum of each group's heads.
std::vector<double> sum_groups(const std::vector<double>& x, const Case& c) {
  const int64_t G = c.H / c.Hkv;
  std::vector<double> out(static_cast<size_t>(c.kv_el()), 0.0);
  for (int64_t row = 0; row < c.B * c.T; ++row)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.hs; ++i) out[(row * c.Hkv + h / G) * c.hs + i] += x[(row * c.H + h) * c.hs + i];
  return out;
}

// Hkv < H against the same op on explicitly repeated K/V (Hkv' = H): out, stats and dq are the
// same bits (the same products in the same order); dk, dv equal the sum of the repeated heads'
// gradients (fp32 within 1e-6 of the magnitude, 16-bit within round-off).
TEST_F(GqaAttentionTest, EqualsAttentionOverRepeatedKv) {
  for (DType dt : kAllDtypes)
    for (const Case& c : {Case{2, 21, 4, 2, 8, 0, 0}, Case{1, 66, 8, 2, 16, 16, 16}, Case{2, 9, 4, 1, 8, 3, 4}}) {
      const std::string tag = tag_of(dt, c);
      const Case rep{c.B, c.T, c.H, c.H, c.hs, c.tile_q, c.tile_k};
      Inputs in = random_inputs(rng_, dt, c);
      HostTensor kr(dt, {c.B, c.T, c.H * c.hs}), vr(dt, {c.B, c.T, c.H * c.hs});
      kr.fill(repeat_heads(in.k.values(), c));
      vr.fill(repeat_heads(in.v.values(), c));
      const std::vector<double> zero(static_cast<size_t>(c.q_el()), 0.0);
      GqaRun g = run_gqa(s(), c, dt, in.q, in.k, in.v, in.dout, in.dq0.values(), in.dk0.values(), in.dv0.values());
      GqaRun r = run_gqa(s(), rep, dt, in.q, kr, vr, in.dout, zero, zero, zero);
      EXPECT_TRUE(g.out.raw() == r.out.raw()) << "out " << tag;
      EXPECT_TRUE(g.stats.raw() == r.stats.raw()) << "stats " << tag;
      EXPECT_TRUE(g.dq.raw() == r.dq.raw()) << "dq " << tag;
      const double rel = dt == DType::F32 ? 1e-6 : dtype_eps(dt);
      expect_overwritten(g.dk.values(), sum_groups(r.dk.values(), c), rel, "dk " + tag);
      expect_overwritten(g.dv.values(), sum_groups(r.dv.values(), c), rel, "dv " + tag);
    }
}

// A key/value head sums its group in a fixed order: the backward's bits do not depend on the
// thread count (every dtype; 1 thread vs 3).
TEST_F(GqaAttentionTest, BackwardDeterministicAcrossThreadCounts) {
  for (DType dt : kAllDtypes) {
    const Case c{2, 45, 8, 2, 16, 0, 0};
    Inputs in = random_inputs(rng_, dt, c);
    set_stream_omp_threads(s(), 1);
    GqaRun one = run_gqa(s(), c, dt, in.q, in.k, in.v, in.dout, in.dq0.values(), in.dk0.values(), in.dv0.values());
    set_stream_omp_threads(s(), 3);
    GqaRun three = run_gqa(s(), c, dt, in.q, in.k, in.v, in.dout, in.dq0.values(), in.dk0.values(), in.dv0.values());
    set_stream_omp_threads(s(), 1);
    sync();
    const std::string tag = tag_of(dt, c);
    EXPECT_TRUE(one.out.raw() == three.out.raw()) << "out " << tag;
    EXPECT_TRUE(one.dq.raw() == three.dq.raw()) << "dq " << tag;
    EXPECT_TRUE(one.dk.raw() == three.dk.raw()) << "dk " << tag;
    EXPECT_TRUE(one.dv.raw() == three.dv.raw()) << "dv " << tag;
  }
}

// Inconsistent arguments stop the program with a message naming the op and the argument.
class GqaAttentionDeathTest : public KernelTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    KernelTest::SetUp();
  }
  // B=1, T=3, H=4, Hkv=2, hs=2.
  HostTensor q{DType::F32, {1, 3, 8}}, k{DType::F32, {1, 3, 4}}, v{DType::F32, {1, 3, 4}}, out{DType::F32, {1, 3, 8}};
  HostTensor stats{DType::F32, {1, 4, 3, 2}}, dq{DType::F32, {1, 3, 8}}, dk{DType::F32, {1, 3, 4}},
      dv{DType::F32, {1, 3, 4}}, dout{DType::F32, {1, 3, 8}};
  void fwd(const TensorView& o, const TensorView& st, const TensorView& qq, const TensorView& kk,
           const TensorView& vv, int64_t H = 4, int64_t Hkv = 2, int64_t hs = 2, int64_t tile_q = 0) {
    ops::attention_gqa_forward(s(), o, st, qq, kk, vv, 1, 3, H, Hkv, hs, tile_q, 0);
  }
  void bwd(const TensorView& gq, const TensorView& gk, const TensorView& gv, const TensorView& st) {
    ops::attention_gqa_backward(s(), gq, gk, gv, dout.view(), q.view(), k.view(), v.view(), out.view(), st, 1, 3, 4,
                                2, 2, 0, 0);
  }
};

TEST_F(GqaAttentionDeathTest, RejectsBadArguments) {
  EXPECT_DEATH(fwd(out.view(), stats.view(), q.view(), k.view(), v.view(), 4, 3, 2),
               "attention_gqa_forward: H=4 query heads are not a multiple of Hkv=3");
  EXPECT_DEATH(fwd(out.view(), stats.view(), q.view(), k.view(), v.view(), 4, 0, 2), "attention_gqa_forward: need H");
  EXPECT_DEATH(fwd(out.view(), stats.view(), q.view(), k.view(), v.view(), 4, 2, 0), "attention_gqa_forward: need H");
  EXPECT_DEATH(fwd(out.view(), stats.view(), q.view(), k.view(), v.view(), 4, 2, 2, -1), "tile sizes must be >= 0");
  EXPECT_DEATH(fwd(out.view(), stats.view(), q.view(), q.view(), v.view()), "attention_gqa_forward: k has shape");
  HostTensor v16(DType::BF16, {1, 3, 4}), stats16(DType::BF16, {1, 4, 3, 2}), short_stats(DType::F32, {1, 2, 3, 2});
  EXPECT_DEATH(fwd(out.view(), stats.view(), q.view(), k.view(), v16.view()), "attention_gqa_forward: v is bf16");
  EXPECT_DEATH(fwd(out.view(), stats16.view(), q.view(), k.view(), v.view()), "attention_gqa_forward: stats is bf16");
  EXPECT_DEATH(fwd(out.view(), short_stats.view(), q.view(), k.view(), v.view()),
               "attention_gqa_forward: stats has shape");
  EXPECT_DEATH(fwd(k.view(), stats.view(), q.view(), k.view(), v.view()), "attention_gqa_forward: out has shape");
  HostTensor dk16(DType::BF16, {1, 3, 4});
  EXPECT_DEATH(bwd(dq.view(), dk16.view(), dv.view(), stats.view()), "attention_gqa_backward: dk is bf16");
  EXPECT_DEATH(bwd(dq.view(), dk.view(), dq.view(), stats.view()), "attention_gqa_backward: dv has shape");
  EXPECT_DEATH(bwd(dk.view(), dk.view(), dv.view(), stats.view()), "attention_gqa_backward: dq has shape");
  EXPECT_DEATH(bwd(dq.view(), dk.view(), dv.view(), short_stats.view()), "attention_gqa_backward: stats has shape");
}

}  // namespace
}  // namespace zt::test
