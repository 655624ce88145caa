// Fused linear ops (linear_forward / linear_backward) on the CPU backend: against a double
// reference and against the unfused op sequence they replace (gemm, bias_add, gelu_forward;
// gemm, bias_grad, gemm, gelu_backward), odd sizes, both weight layouts, every dtype. The
// forward is bitwise the bias rows then gemm with beta 1; the backward's GEMMs are the same calls
// as the unfused ones (its one widening of dout included), so that comparison is bitwise.
#include <cstring>
#include <limits>

#include "kernel_test_util.h"

namespace zt::test {
namespace {

struct Shape {
  int64_t N, IC, OC;
};
const Shape kShapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 48, 80}, {130, 31, 96}};

class LinearTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// W[i,o] of a weight stored [IC,OC], or [OC,IC] when trans_w.
double w_at(const std::vector<double>& w, bool trans_w, int64_t IC, int64_t OC, int64_t i, int64_t o) {
  return trans_w ? w[o * IC + i] : w[i * OC + o];
}

bool bitwise_equal(HostTensor& a, HostTensor& b) {
  const TensorView va = a.view(), vb = b.view();
  return va.nbytes() == vb.nbytes() && std::memcmp(va.data, vb.data, va.nbytes()) == 0;
}

TEST_P(LinearTest, ForwardMatchesReferenceAndUnfusedOps) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    for (bool trans_w : {false, true}) {
      for (bool gelu : {false, true}) {
        for (bool has_bias : {true, false}) {
          const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
          const std::string tag = " N=" + std::to_string(N) + " IC=" + std::to_string(IC) + " OC=" +
                                  std::to_string(OC) + (trans_w ? " trans_w" : "") + (gelu ? " gelu" : "") +
                                  (has_bias ? "" : " no-bias") + dt_tag(dt);
          HostTensor x = random_tensor(rng_, dt, {N, IC}), w = random_tensor(rng_, dt, {IC * OC});
          HostTensor b = random_tensor(rng_, dt, {OC});
          HostTensor out = random_tensor(rng_, dt, {N, OC}, 1e3, 2e3), pre = random_tensor(rng_, dt, {N, OC}, 1e3, 2e3);
          ops::linear_forward(s(), out.view(), gelu ? pre.view() : TensorView{}, x.view(), w.view(),
                              has_bias ? b.view() : TensorView{}, N, IC, OC, trans_w, gelu);
          // Unfused: gemm (beta 0) + bias_add (+ gelu_forward).
          HostTensor y0(dt, {N, OC}), g0(dt, {N, OC});
          ops::gemm(s(), false, trans_w, N, OC, IC, 1.0f, x.view(), w.view(), 0.0f, y0.view());
          if (has_bias) ops::bias_add(s(), y0.view(), b.view());
          sync();
          const auto xv = x.values(), wv = w.values(), bv = b.values();
          std::vector<double> want(N * OC), mag(N * OC);
          for (int64_t r = 0; r < N; ++r) {
            for (int64_t o = 0; o < OC; ++o) {
              double acc = has_bias ? bv[o] : 0.0, m = has_bias ? std::fabs(bv[o]) : 0.0;
              for (int64_t i = 0; i < IC; ++i) {
                const double t = xv[r * IC + i] * w_at(wv, trans_w, IC, OC, i, o);
                acc += t, m += std::fabs(t);
              }
              want[r * OC + o] = acc, mag[r * OC + o] = m;
            }
          }
          HostTensor& y = gelu ? pre : out;
          if (has_bias) {  // bitwise the bias copied into every row, then gemm with beta 1
            HostTensor y1(dt, {N, OC});
            std::vector<double> rows(N * OC);
            for (int64_t i = 0; i < N * OC; ++i) rows[i] = bv[i % OC];
            y1.fill(rows);
            ops::gemm(s(), false, trans_w, N, OC, IC, 1.0f, x.view(), w.view(), 1.0f, y1.view());
            sync();
            EXPECT_TRUE(bitwise_equal(y, y1)) << "linear_forward != bias rows + gemm(beta 1)" << tag;
          }
          expect_close_mag(y.values(), want, mag, dtype_eps(dt), "linear_forward y" + tag);
          // Against the unfused sequence: both within rounding of the reference, so within twice it.
          std::vector<double> mag2(mag);
          for (double& v : mag2) v *= 2;
          expect_close_mag(y.values(), y0.values(), mag2, dtype_eps(dt), "linear_forward vs gemm+bias_add" + tag);
          if (gelu) {  // out is exactly gelu_forward(pre) (the same kernel), and close to gelu(y)
            ops::gelu_forward(s(), g0.view(), pre.view());
            sync();
            EXPECT_TRUE(bitwise_equal(out, g0)) << "out != gelu_forward(pre)" << tag;
            const auto pv = pre.values();
            std::vector<double> gw(N * OC), gm(N * OC);
            for (int64_t i = 0; i < N * OC; ++i) gw[i] = gelu_ref(pv[i]), gm[i] = std::fabs(pv[i]) + 1e-3;
            expect_close_mag(out.values(), gw, gm, 4 * dtype_eps(dt), "linear_forward gelu" + tag);
          }
        }
      }
    }
  }
}

TEST_P(LinearTest, BackwardMatchesUnfusedOpsBitwise) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    for (bool trans_w : {false, true}) {
      for (bool gelu_in : {false, true}) {
        const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
        const std::string tag = " N=" + std::to_string(N) + " IC=" + std::to_string(IC) + " OC=" +
                                std::to_string(OC) + (trans_w ? " trans_w" : "") + (gelu_in ? " gelu_pre" : "") +
                                dt_tag(dt);
        HostTensor x = random_tensor(rng_, dt, {N, IC}), w = random_tensor(rng_, dt, {IC * OC});
        HostTensor dy = random_tensor(rng_, dt, {N, OC}), pre = random_tensor(rng_, dt, {N, IC}, -3.0, 3.0);
        HostTensor dw = random_tensor(rng_, dt, {IC * OC}), db = random_tensor(rng_, dt, {OC});
        HostTensor dw0(dt, {IC * OC}), db0(dt, {OC});
        dw0.fill(dw.values()), db0.fill(db.values());
        const auto dw_before = dw.values(), db_before = db.values();
        HostTensor dx(dt, {N, IC});  // NaN garbage: dinp overwrites
        {
          std::vector<double> nan(N * IC, std::numeric_limits<double>::quiet_NaN());
          dx.fill(nan);
        }
        ops::linear_backward(s(), dx.view(), dw.view(), db.view(), dy.view(), x.view(), w.view(),
                             gelu_in ? pre.view() : TensorView{}, N, IC, OC, trans_w);
        // The unfused sequence of gpt.cpp / mlp.cpp before the fused op.
        HostTensor dx_raw(dt, {N, IC}), dx0(dt, {N, IC});
        if (!trans_w) ops::gemm(s(), true, false, IC, OC, N, 1.0f, x.view(), dy.view(), 1.0f, dw0.view());
        else ops::gemm(s(), true, false, OC, IC, N, 1.0f, dy.view(), x.view(), 1.0f, dw0.view());
        ops::bias_grad(s(), db0.view(), dy.view());
        ops::gemm(s(), false, !trans_w, N, IC, OC, 1.0f, dy.view(), w.view(), 0.0f, dx_raw.view());
        if (gelu_in) ops::gelu_backward(s(), dx0.view(), pre.view(), dx_raw.view());  // dx0 starts at 0
        sync();
        EXPECT_TRUE(bitwise_equal(dw, dw0)) << "dweight" << tag;
        EXPECT_TRUE(bitwise_equal(db, db0)) << "dbias" << tag;
        EXPECT_TRUE(bitwise_equal(dx, gelu_in ? dx0 : dx_raw)) << "dinp" << tag;
        // And against a double reference, so "bitwise like before" is not "equally wrong".
        const auto xv = x.values(), wv = w.values(), dyv = dy.values(), pv = pre.values();
        std::vector<double> gdw(IC * OC, 0.0), gdb(OC, 0.0), wdx(N * IC), mdx(N * IC);
        for (int64_t r = 0; r < N; ++r)
          for (int64_t o = 0; o < OC; ++o) {
            gdb[o] += dyv[r * OC + o];
            for (int64_t i = 0; i < IC; ++i) gdw[trans_w ? o * IC + i : i * OC + o] += xv[r * IC + i] * dyv[r * OC + o];
          }
        for (int64_t r = 0; r < N; ++r)
          for (int64_t i = 0; i < IC; ++i) {
            double acc = 0, m = 0;
            for (int64_t o = 0; o < OC; ++o) {
              const double t = dyv[r * OC + o] * w_at(wv, trans_w, IC, OC, i, o);
              acc += t, m += std::fabs(t);
            }
            double g = 1.0;
            if (gelu_in) {
              const double h = 1e-4, p = pv[r * IC + i];
              g = (gelu_ref(p + h) - gelu_ref(p - h)) / (2 * h);
            }
            wdx[r * IC + i] = acc * g;
            mdx[r * IC + i] = m * (std::fabs(g) + 0.05);  // + fp32 gelu_grad's absolute error near g = 0
          }
        expect_accumulated(dw.values(), dw_before, gdw, grad_rel(dt), "dweight" + tag);
        expect_accumulated(db.values(), db_before, gdb, grad_rel(dt), "dbias" + tag);
        expect_close_mag(dx.values(), wdx, mdx, 2 * dtype_eps(dt), "dinp" + tag);
      }
    }
  }
}

TEST_P(LinearTest, BackwardWithoutBiasOrDinp) {
  const DType dt = GetParam();
  const int64_t N = 9, IC = 6, OC = 11;
  HostTensor x = random_tensor(rng_, dt, {N, IC}), w = random_tensor(rng_, dt, {OC * IC});
  HostTensor dy = random_tensor(rng_, dt, {N, OC}), dw(dt, {OC * IC}), dw0(dt, {OC * IC});
  ops::linear_backward(s(), TensorView{}, dw.view(), TensorView{}, dy.view(), x.view(), w.view(), TensorView{}, N, IC,
                       OC, /*trans_w=*/true);
  ops::gemm(s(), true, false, OC, IC, N, 1.0f, dy.view(), x.view(), 1.0f, dw0.view());
  sync();
  EXPECT_TRUE(bitwise_equal(dw, dw0));
}

// gemm_ld (the padded LM head): equal to gemm on the packed operands, bitwise, for every
// transpose; elements of C past its N columns keep their values (never written).
TEST_P(LinearTest, GemmLdMatchesGemmAndLeavesPaddingAlone) {
  const DType dt = GetParam();
  const int64_t M = 13, N = 11, K = 9, pad = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        const int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
        HostTensor A = random_tensor(rng_, dt, {ar, ac}), B = random_tensor(rng_, dt, {br, bc});
        HostTensor C = random_tensor(rng_, dt, {M, N});
        HostTensor Ap(dt, {ar, ac + pad}), Bp(dt, {br, bc + 3}), Cp = random_tensor(rng_, dt, {M, N + pad});
        const auto av = A.values(), bv = B.values(), cv = C.values();
        for (int64_t i = 0; i < ar; ++i)
          for (int64_t j = 0; j < ac + pad; ++j) Ap.set(i * (ac + pad) + j, j < ac ? av[i * ac + j] : 1e30);
        for (int64_t i = 0; i < br; ++i)
          for (int64_t j = 0; j < bc + 3; ++j) Bp.set(i * (bc + 3) + j, j < bc ? bv[i * bc + j] : 1e30);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) Cp.set(i * (N + pad) + j, cv[i * N + j]);
        const auto cp_before = Cp.values();
        ops::gemm(s(), ta, tb, M, N, K, 0.5f, A.view(), B.view(), beta, C.view());
        ops::gemm_ld(s(), ta, tb, M, N, K, 0.5f, Ap.view(), ac + pad, Bp.view(), bc + 3, beta, Cp.view(), N + pad);
        sync();
        const auto got = Cp.values(), want = C.values();
        int bad = 0;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N + pad; ++j) {
            const double g = got[i * (N + pad) + j], w = j < N ? want[i * N + j] : cp_before[i * (N + pad) + j];
            bad += g != w;
          }
        EXPECT_EQ(bad, 0) << "gemm_ld ta=" << ta << " tb=" << tb << " beta=" << beta << dt_tag(dt);
      }
    }
  }
}

// softmax_cross_entropy_ld over rows V of ld: the same losses and gradients as the packed op,
// bitwise; padding columns (set to huge values) are neither read nor written.
TEST_P(LinearTest, SoftmaxCrossEntropyLdMatchesPacked) {
  const DType dt = GetParam();
  const int64_t N = 7, V = 37, ld = 48;
  HostTensor x = random_tensor(rng_, dt, {N, V}, -4.0, 4.0), xp(dt, {N, ld});
  const auto xv = x.values();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < ld; ++j) xp.set(i * ld + j, j < V ? xv[i * V + j] : 3e4);
  std::vector<int32_t> targets = {0, 36, 5, -1, 12, 20, 1};
  const auto xp_before = xp.values();
  HostTensor l0(DType::F32, {N}), l1(DType::F32, {N});
  ops::softmax_cross_entropy(s(), l0.view(), x.view(), x.view(), targets.data(), 0.25f);
  ops::softmax_cross_entropy_ld(s(), l1.view(), xp.view(), xp.view(), targets.data(), 0.25f, V, ld);
  sync();
  EXPECT_EQ(l0.values(), l1.values()) << dt_tag(dt);
  const auto d0 = x.values(), d1 = xp.values();
  int bad = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < ld; ++j) bad += d1[i * ld + j] != (j < V ? d0[i * V + j] : xp_before[i * ld + j]);
  EXPECT_EQ(bad, 0) << dt_tag(dt);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearTest, ::testing::ValuesIn(kAllDtypes));

class LinearDeathTest : public KernelTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    KernelTest::SetUp();
  }
};

TEST_F(LinearDeathTest, RejectsInconsistentArguments) {
  HostTensor x(DType::F32, {4, 3}), w(DType::F32, {3 * 5}), b(DType::F32, {5}), out(DType::F32, {4, 5}),
      pre(DType::F32, {4, 5}), wrong(DType::F32, {4, 6}), bf(DType::BF16, {5});
  EXPECT_DEATH(ops::linear_forward(s(), wrong.view(), TensorView{}, x.view(), w.view(), b.view(), 4, 3, 5, false,
                                   false),
               "out has shape");
  EXPECT_DEATH(ops::linear_forward(s(), out.view(), pre.view(), x.view(), w.view(), b.view(), 4, 3, 5, false, false),
               "pre must be absent");
  EXPECT_DEATH(ops::linear_forward(s(), out.view(), TensorView{}, x.view(), w.view(), b.view(), 4, 3, 5, false, true),
               "pre has no storage");
  EXPECT_DEATH(ops::linear_forward(s(), out.view(), TensorView{}, x.view(), w.view(), bf.view(), 4, 3, 5, false,
                                   false),
               "bias is bf16");
  HostTensor dx(DType::F32, {4, 3}), dw(DType::F32, {15}), dy(DType::F32, {4, 5}), gp(DType::F32, {4, 3});
  EXPECT_DEATH(ops::linear_backward(s(), TensorView{}, dw.view(), b.view(), dy.view(), x.view(), w.view(), gp.view(),
                                    4, 3, 5, false),
               "no dinp");
  EXPECT_DEATH(ops::linear_backward(s(), gp.view(), dw.view(), b.view(), dy.view(), x.view(), w.view(), gp.view(), 4,
                                    3, 5, false),
               "must not alias gelu_pre");
}

}  // namespace
}  // namespace zt::test
