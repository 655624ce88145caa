// SIMD kernels of csrc/kernels/cpu/cpu_vec_kernels.h: every ISA path this CPU supports (and the
// scalar one) bitwise against the scalar path on tails and odd sizes; exp_nonpos against double
// exp; the tiled-attention rows against attn_tile's per-element math; the LayerNorm rows against
// scalar and double; the softmax-cross-entropy row against a double reference and against the previous scalar
// kernel (glibc expf, one sequential sum); and the ops' dispatch under a forced ZT_CPU_ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../csrc/kernels/cpu/cpu_vec_kernels.h"
#include "kernel_test_util.h"
#include "vec_test_util.h"
#include "zerotrain/kernels/attention_tile.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/math.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt::test {
namespace {

using cpu_ops::vec::Kernels;
using cpu::Isa;

std::vector<const Kernels*> tables() { return vec_tables(); }

// Sizes around the 16-lane block: empty, tails only, whole blocks, blocks + tails.
const int64_t kSizes[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 100, 256, 1000, 4099};

TEST(VecKernels, ExpNonposWithin4UlpOfExpAndUnderflowsToZero) {
  double worst = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = math::kExpNonposMin * static_cast<float>(i) / 2000000.0f;
    const double want = std::exp(static_cast<double>(x));
    const double rel = std::fabs(math::exp_nonpos(x) - want) / want;
    worst = rel > worst ? rel : worst;
  }
  EXPECT_LE(worst, 4 * 5.96e-8) << "max relative error over [kExpNonposMin, 0]";
  std::printf("exp_nonpos: max relative error %.3g over [%g, 0]\n", worst, math::kExpNonposMin);
  EXPECT_EQ(math::exp_nonpos(0.0f), 1.0f);
  EXPECT_EQ(math::exp_nonpos(-88.0f), 0.0f);
  EXPECT_EQ(math::exp_nonpos(-1e30f), 0.0f);
  EXPECT_EQ(math::exp_nonpos(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(math::exp_nonpos(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecKernels, GeluEveryPathBitwiseEqualsScalar) {
  std::mt19937_64 rng(7);
  for (int64_t n : kSizes) {
    std::vector<float> x = random_floats(rng, n, -12.0f, 12.0f);
    const float special[] = {0.0f, -0.0f, 9.0f, -9.0f, 11.3f, -11.3f, 1e-30f, -100.0f, 100.0f};
    for (size_t i = 0; i < x.size() && i < 9; ++i) x[i * 3 % x.size()] = special[i];
    const std::vector<float> dout = random_floats(rng, n, -1.0f, 1.0f), d0 = random_floats(rng, n, -1.0f, 1.0f);
    std::vector<float> fwd_ref(x.size()), bwd_ref(d0);
    cpu_ops::vec::gelu_forward(cpu_ops::vec::kScalar, fwd_ref.data(), x.data(), n);
    cpu_ops::vec::gelu_backward(cpu_ops::vec::kScalar, bwd_ref.data(), x.data(), dout.data(), n);
    for (int64_t i = 0; i < n; ++i) {  // the scalar path is math::gelu itself
      ASSERT_EQ(fwd_ref[i], math::gelu(x[i]));
      ASSERT_EQ(bwd_ref[i], d0[i] + dout[i] * math::gelu_grad(x[i]));
    }
    for (const Kernels* k : tables()) {
      std::vector<float> fwd(x.size()), bwd(d0), inplace(x);
      cpu_ops::vec::gelu_forward(*k, fwd.data(), x.data(), n);
      cpu_ops::vec::gelu_forward(*k, inplace.data(), inplace.data(), n);
      cpu_ops::vec::gelu_backward(*k, bwd.data(), x.data(), dout.data(), n);
      const std::string what = std::string(k->name) + " n=" + std::to_string(n);
      expect_same(fwd, fwd_ref, "gelu_forward " + what);
      expect_same(inplace, fwd_ref, "gelu_forward in place " + what);
      expect_same(bwd, bwd_ref, "gelu_backward " + what);
      std::vector<float> zero_ref(x.size(), 0.0f), bwd_inplace(dout);  // 0 + dout·g', in place
      cpu_ops::vec::gelu_backward(cpu_ops::vec::kScalar, zero_ref.data(), x.data(), dout.data(), n);
      cpu_ops::vec::gelu_backward_inplace(*k, bwd_inplace.data(), x.data(), n);
      expect_same(bwd_inplace, zero_ref, "gelu_backward_inplace " + what);
    }
  }
}

// The tiled-attention rows are attn_tile's per-element math (the CUDA kernel's), bitwise, on every
// path; exp_sum's sum is the fixed 16-lane order, the same bits on every path and close to a
// sequential double sum.
TEST(VecKernels, AttentionRowsEveryPathBitwiseEqualAttnTileMath) {
  std::mt19937_64 rng(5);
  for (int64_t n : kSizes) {
    const std::vector<float> s = random_floats(rng, n, -40.0f, 8.0f), d0 = random_floats(rng, n, -2.0f, 2.0f);
    const float m = cpu_ops::vec::row_max(cpu_ops::vec::kScalar, s.data(), n), inv_l = 0.0371f, dr = 0.25f, sc = 0.17f;
    float mw = -INFINITY;
    for (float x : s) mw = x > mw ? x : mw;
    ASSERT_EQ(m, mw) << "row_max n=" << n;
    std::vector<float> e_ref(s.size()), p_ref(s.size()), g_ref(d0);
    double sum_want = 0;
    for (int64_t j = 0; j < n; ++j) {
      e_ref[j] = attn_tile::unnormalised_p(s[j], m);
      p_ref[j] = attn_tile::recomputed_p(s[j], m, inv_l);
      g_ref[j] = attn_tile::score_grad(p_ref[j], d0[j], dr, sc);
      sum_want += e_ref[j];
    }
    const float sum_ref = cpu_ops::vec::exp_sum(cpu_ops::vec::kScalar, s.data(), std::vector<float>(s).data(), n, m);
    EXPECT_NEAR(sum_ref, sum_want, 1e-6 * (1 + sum_want)) << "n=" << n;
    for (const Kernels* k : tables()) {
      const std::string what = std::string(k->name) + " n=" + std::to_string(n);
      std::vector<float> e(s), p(s.size()), g(d0);
      EXPECT_EQ(cpu_ops::vec::row_max(*k, s.data(), n), m) << what;
      const float sum = cpu_ops::vec::exp_sum(*k, e.data(), e.data(), n, m);
      expect_same({sum}, {sum_ref}, "exp_sum " + what);
      cpu_ops::vec::exp_scale(*k, s.data(), p.data(), n, m, inv_l);
      cpu_ops::vec::score_grad(*k, g.data(), p.data(), n, dr, sc);
      expect_same(e, e_ref, "exp_sum rows " + what);
      expect_same(p, p_ref, "exp_scale " + what);
      expect_same(g, g_ref, "score_grad " + what);
    }
  }
}

// LayerNorm rows: every path the scalar path's bits (sums in the 16-lane order), and the scalar
// path within fp32 rounding of double.
TEST(VecKernels, LayerNormRowsEveryPathBitwiseEqualsScalarAndCloseToDouble) {
  std::mt19937_64 rng(13);
  for (int64_t n : kSizes) {
    const std::vector<float> x = random_floats(rng, n, -3.0f, 5.0f), dy = random_floats(rng, n, -1.0f, 1.0f);
    const std::vector<float> w = random_floats(rng, n, 0.5f, 1.5f), b = random_floats(rng, n, -0.5f, 0.5f);
    const std::vector<float> dx0 = random_floats(rng, n, -1.0f, 1.0f);
    const Kernels& sk = cpu_ops::vec::kScalar;
    const float m = 0.75f, rs = 1.3f, dmean = 0.02f, dnmean = -0.04f;
    const float s_ref = cpu_ops::vec::sum(sk, x.data(), n), q_ref = cpu_ops::vec::sq_dev_sum(sk, x.data(), n, m);
    float a_ref = 0, b_ref = 0;
    cpu_ops::vec::layernorm_dsums(sk, x.data(), dy.data(), w.data(), n, m, rs, &a_ref, &b_ref);
    std::vector<float> o_ref(x.size()), dx_ref(dx0);
    cpu_ops::vec::layernorm_out(sk, o_ref.data(), x.data(), w.data(), b.data(), n, m, rs);
    cpu_ops::vec::layernorm_dinp(sk, dx_ref.data(), x.data(), dy.data(), w.data(), n, m, rs, dmean, dnmean);
    double sd = 0, qd = 0, ad = 0, bd = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = double(x[j]) - m, nr = d * rs, dn = double(w[j]) * dy[j];
      sd += x[j], qd += d * d, ad += dn, bd += dn * nr, mag += std::fabs(x[j]) + d * d + std::fabs(dn * nr);
      EXPECT_NEAR(o_ref[j], nr * w[j] + b[j], 1e-5) << "n=" << n << " j=" << j;
      EXPECT_NEAR(dx_ref[j], dx0[j] + rs * (dn - dmean - nr * dnmean), 1e-5) << "n=" << n << " j=" << j;
    }
    const double tol = 1e-6 * (1 + mag);
    EXPECT_NEAR(s_ref, sd, tol) << n;
    EXPECT_NEAR(q_ref, qd, tol) << n;
    EXPECT_NEAR(a_ref, ad, tol) << n;
    EXPECT_NEAR(b_ref, bd, tol) << n;
    for (const Kernels* k : tables()) {
      const std::string what = std::string(k->name) + " n=" + std::to_string(n);
      float a = 0, bb = 0;
      cpu_ops::vec::layernorm_dsums(*k, x.data(), dy.data(), w.data(), n, m, rs, &a, &bb);
      expect_same({cpu_ops::vec::sum(*k, x.data(), n), cpu_ops::vec::sq_dev_sum(*k, x.data(), n, m), a, bb},
                  {s_ref, q_ref, a_ref, b_ref}, "layernorm sums " + what);
      std::vector<float> o(x.size()), o_in(x), dx(dx0);
      cpu_ops::vec::layernorm_out(*k, o.data(), x.data(), w.data(), b.data(), n, m, rs);
      cpu_ops::vec::layernorm_out(*k, o_in.data(), o_in.data(), w.data(), b.data(), n, m, rs);
      cpu_ops::vec::layernorm_dinp(*k, dx.data(), x.data(), dy.data(), w.data(), n, m, rs, dmean, dnmean);
      expect_same(o, o_ref, "layernorm_out " + what);
      expect_same(o_in, o_ref, "layernorm_out in place " + what);
      expect_same(dx, dx_ref, "layernorm_dinp " + what);
      std::vector<float> aw(dx0), ab(b), aw_ref(dx0), ab_ref(b);  // column sums: the old per-element loop
      for (int64_t j = 0; j < n; ++j) aw_ref[j] += (x[j] - m) * rs * dy[j], ab_ref[j] += dy[j];
      cpu_ops::vec::layernorm_cols(*k, aw.data(), ab.data(), x.data(), dy.data(), n, m, rs);
      expect_same(aw, aw_ref, "layernorm_cols dweight " + what);
      expect_same(ab, ab_ref, "layernorm_cols dbias " + what);
    }
  }
}

TEST(VecKernels, AddToDotScaleEveryPathBitwiseEqualsScalarAndCloseToDouble) {
  std::mt19937_64 rng(17);
  for (int64_t n : kSizes) {
    const std::vector<float> a = random_floats(rng, n, -2.0f, 2.0f), b = random_floats(rng, n, -3.0f, 1.0f);
    std::vector<float> acc_ref(a);
    for (int64_t j = 0; j < n; ++j) acc_ref[j] = a[j] + b[j];  // the per-element loop add_to replaces
    const float dot_ref = cpu_ops::vec::dot(cpu_ops::vec::kScalar, a.data(), b.data(), n);
    double dd = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) dd += double(a[j]) * b[j], mag += std::fabs(double(a[j]) * b[j]);
    EXPECT_NEAR(dot_ref, dd, 1e-6 * (1 + mag)) << n;
    for (const Kernels* k : tables()) {
      const std::string what = std::string(k->name) + " n=" + std::to_string(n);
      std::vector<float> acc(a);
      cpu_ops::vec::add_to(*k, acc.data(), b.data(), n);
      expect_same(acc, acc_ref, "add_to " + what);
      expect_same({cpu_ops::vec::dot(*k, a.data(), b.data(), n)}, {dot_ref}, "dot " + what);
      std::vector<float> sc(a), sc_ref(a), sc_out(b.size());
      for (int64_t j = 0; j < n; ++j) sc_ref[j] = a[j] * 0.37f;
      cpu_ops::vec::scale_row(*k, sc.data(), n, 0.37f);
      cpu_ops::vec::scale_row(*k, sc_out.data(), n, 0.37f, a.data());
      expect_same(sc, sc_ref, "scale_row in place " + what);
      expect_same(sc_out, sc_ref, "scale_row " + what);
    }
  }
}

// The kernel before cpu_vec (csrc/kernels/cpu/cpu_loss.cpp at b64b1dd): expf and one sequential sum.
float old_row(const float* x, float* d, int64_t V, int32_t t, float dloss) {
  float m = -INFINITY;
  for (int64_t j = 0; j < V; ++j) m = x[j] > m ? x[j] : m;
  std::vector<float> e(static_cast<size_t>(V));
  float sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += (e[j] = expf(x[j] - m));
  const float loss = logf(sum) - (x[t] - m);
  for (int64_t j = 0; j < V; ++j) d[j] = dloss * (e[j] * (1.0f / sum) - (j == t ? 1.0f : 0.0f));
  return loss;
}

TEST(VecKernels, SoftmaxXentRowEveryPathBitwiseAndCloseToOldKernelAndDouble) {
  std::mt19937_64 rng(11);
  double worst_loss = 0, worst_grad = 0;
  for (int64_t V : kSizes) {
    if (V == 0) continue;
    for (float scale : {1.0f, 30.0f}) {  // scale 30: most terms underflow next to the max
      const std::vector<float> x = random_floats(rng, V, -scale, scale);
      for (int32_t t : {0, static_cast<int32_t>(V / 2), static_cast<int32_t>(V - 1)}) {
        const float dloss = 0.37f;
        std::vector<float> d_ref(x.size());
        const float l_ref = cpu_ops::vec::softmax_xent_row(cpu_ops::vec::kScalar, x.data(), d_ref.data(), V, t, dloss);
        for (const Kernels* k : tables()) {
          std::vector<float> d(x.size()), inplace(x);
          const float l = cpu_ops::vec::softmax_xent_row(*k, x.data(), d.data(), V, t, dloss);
          const float l_in = cpu_ops::vec::softmax_xent_row(*k, inplace.data(), inplace.data(), V, t, dloss);
          const std::string what = std::string(k->name) + " V=" + std::to_string(V) + " t=" + std::to_string(t);
          expect_same({l, l_in}, {l_ref, l_ref}, "loss " + what);
          expect_same(d, d_ref, "dlogits " + what);
          expect_same(inplace, d_ref, "dlogits in place " + what);
        }
        // Against double precision and against the old kernel.
        double mx = -INFINITY, sum = 0;
        for (float v : x) mx = v > mx ? v : mx;
        for (float v : x) sum += std::exp(v - mx);
        const double l_want = std::log(sum) - (x[t] - mx);  // fp32 x[t] - max: a few ulp of |loss|
        EXPECT_NEAR(l_ref, l_want, 4 * 1.19e-7 * (1 + std::fabs(l_want))) << "V=" << V;
        std::vector<float> d_old(x.size());
        const float l_old = old_row(x.data(), d_old.data(), V, t, dloss);
        worst_loss = std::fmax(worst_loss, std::fabs(l_ref - l_old) / (1 + std::fabs(l_old)));
        for (int64_t j = 0; j < V; ++j) {
          const double want = dloss * (std::exp(x[j] - mx) / sum - (j == t));
          EXPECT_NEAR(d_ref[j], want, 1e-6 * dloss * (1e-3 + std::fabs(want / dloss))) << "V=" << V << " j=" << j;
          worst_grad = std::fmax(worst_grad, std::fabs(d_ref[j] - d_old[j]) / dloss);
        }
      }
    }
  }
  // The stated tolerance against the old kernel: |loss - old| <= 1e-6 (1 + |old|) and
  // |dlogit - old| <= 1e-6 dloss.
  EXPECT_LE(worst_loss, 1e-6);
  EXPECT_LE(worst_grad, 1e-6);
  std::printf("softmax-xent vs old kernel: max |dloss| / (1 + |loss|) %.3g, max |d dlogit| / dloss %.3g\n",
              worst_loss, worst_grad);
}

// The ops pick the path from ZT_CPU_ISA; all give the scalar path's bits (fp32 and bf16 logits,
// an ignored position, a multi-threaded GELU when OMP_NUM_THREADS > 1, LayerNorm both ways). bf16
// attention runs its tile products on the widened path here: the vdpbf16ps products exist on
// AVX-512 alone (TiledAttentionTest.Bf16ProductsAgreeWithWidenedProducts checks them).
TEST(VecKernels, OpsUnderForcedIsaMatchScalar) {
  RestoreIsaEnv restore;
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  setenv("ZT_CPU_BF16_GEMM", "widen", 1);
  std::mt19937_64 rng(3);
  const int64_t N = 37, V = 259, n = 70001;
  std::vector<int32_t> tgt(N);
  for (int64_t i = 0; i < N; ++i) tgt[i] = static_cast<int32_t>((i * 97) % V);
  tgt[5] = -1;
  for (DType dt : {DType::F32, DType::BF16}) {
    HostTensor logits = random_tensor(rng, dt, {N, V}, -5, 5), gx = random_tensor(rng, DType::F32, {n}, -8, 8);
    HostTensor gd = random_tensor(rng, DType::F32, {n});
    HostTensor lw = random_tensor(rng, dt, {V}, 0.5, 1.5), lb = random_tensor(rng, dt, {V});
    HostTensor bgrad0 = random_tensor(rng, dt, {V}), qkv = random_tensor(rng, dt, {2 * 21, 72});
    HostTensor adout = random_tensor(rng, dt, {2 * 21, 24});
    std::vector<std::vector<unsigned char>> ref;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      setenv("ZT_CPU_ISA", cpu::isa_name(isa), 1);
      EXPECT_STREQ(cpu_ops::vec::active().name, cpu::isa_name(isa));
      HostTensor losses(DType::F32, {N}), dl(dt, {N, V}), gy(DType::F32, {n}), gdx(DType::F32, {n});
      cpu_ops::softmax_cross_entropy(losses.view(), dl.view(), logits.view(), tgt.data(), 0.5f);
      cpu_ops::gelu_forward(gy.view(), gx.view());
      cpu_ops::gelu_backward(gdx.view(), gx.view(), gd.view());
      EXPECT_EQ(losses.get(5), 0.0);
      // LayerNorm over rows of 259 (16 blocks + a tail), forward and backward.
      HostTensor lo(dt, {N, V}), mean(DType::F32, {N}), rstd(DType::F32, {N}), ldx(dt, {N, V}), ldw(dt, {V}), ldb(dt, {V});
      cpu_ops::layernorm_forward(lo.view(), mean.view(), rstd.view(), logits.view(), lw.view(), lb.view(), 1e-5f);
      cpu_ops::layernorm_backward(ldx.view(), ldw.view(), ldb.view(), lo.view(), logits.view(), lw.view(), mean.view(),
                                  rstd.view());
      // bias_grad over rows of 259 columns (one wide fp32 column block plus a narrower one).
      HostTensor bgrad = bgrad0;
      cpu_ops::bias_grad(bgrad.view(), logits.view());
      // Tiled attention backward, B=2 T=21 C=24 H=3 (head size 8: tails only).
      HostTensor ao(dt, {2 * 21, 24}), st(DType::F32, {2 * 3 * 21 * 2}), adq(dt, {2 * 21, 72});
      cpu_ops::attention_tiled_forward(ao.view(), st.view(), qkv.view(), 2, 21, 24, 3, 8, 4);
      cpu_ops::attention_tiled_backward(adq.view(), adout.view(), qkv.view(), ao.view(), st.view(), 2, 21, 24, 3, 8, 4);
      const std::vector<std::vector<unsigned char>> got{losses.raw(), dl.raw(),   gy.raw(),   gdx.raw(), lo.raw(),
                                                        mean.raw(),   rstd.raw(), ldx.raw(),  ldw.raw(), ldb.raw(),
                                                        bgrad.raw(),  ao.raw(),   adq.raw()};
      if (ref.empty()) ref = got;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(got[i] == ref[i]) << cpu::isa_name(isa) << " output " << i << " dtype " << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace zt::test
