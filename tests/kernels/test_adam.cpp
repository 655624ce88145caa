// adam_step against an independent scalar loop of DeepSpeed's FusedAdam formula (double):
// AdamW vs L2 mode, bias correction on/off, grad_scale, fp32/bf16 master weights and states,
// fp32/bf16/fp16 gradients, the optional compute-dtype copy, determinism.
#include "kernel_test_util.h"

namespace zt::test {
namespace {

struct AdamCfg { float lr, b1, b2, eps, wd; bool adamw, bias_correction; };

math::AdamParams params_at(const AdamCfg& c, int step) {
  math::AdamParams a{};
  a.lr = c.lr; a.beta1 = c.b1; a.beta2 = c.b2; a.eps = c.eps; a.weight_decay = c.wd; a.adam_w_mode = c.adamw;
  a.bias_correction1 = c.bias_correction ? 1.0f - std::pow(c.b1, static_cast<float>(step)) : 1.0f;
  a.bias_correction2 = c.bias_correction ? 1.0f - std::pow(c.b2, static_cast<float>(step)) : 1.0f;
  return a;
}

// One DeepSpeed FusedAdam step on one element, in double.
void adam_ref(double& p, double& m, double& v, double g, const AdamCfg& c, int step) {
  double bc1 = c.bias_correction ? 1.0 - std::pow(double(c.b1), step) : 1.0;
  double bc2 = c.bias_correction ? 1.0 - std::pow(double(c.b2), step) : 1.0;
  if (!c.adamw) g += double(c.wd) * p;
  m = c.b1 * m + (1.0 - c.b1) * g;
  v = c.b2 * v + (1.0 - c.b2) * g * g;
  double denom = std::sqrt(v) / std::sqrt(bc2) + c.eps;
  double update = (m / bc1) / denom;
  if (c.adamw) update += double(c.wd) * p;
  p -= double(c.lr) * update;
}

struct AdamCase { DType p, state, g; };

class AdamTest : public KernelTest, public ::testing::WithParamInterface<AdamCase> {};

TEST_P(AdamTest, MatchesScalarReference) {
  const AdamCase tc = GetParam();
  const int64_t n = 1537;
  for (bool adamw : {true, false}) {
    for (bool bc : {true, false}) {
      const AdamCfg cfg{1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, adamw, bc};
      HostTensor p = random_tensor(rng_, tc.p, {n}), m(tc.state, {n}), v(tc.state, {n});
      HostTensor out(DType::BF16, {n});
      const float grad_scale = 0.5f;
      for (int step = 1; step <= 3; ++step) {
        HostTensor g = random_tensor(rng_, tc.g, {n}, -2.0, 2.0);
        auto p0 = p.values(), m0 = m.values(), v0 = v.values(), gv = g.values();
        ops::adam_step(s(), p.view(), m.view(), v.view(), g.view(), grad_scale, params_at(cfg, step), out.view());
        sync();
        // Reference step from the kernel's stored state (errors do not compound across steps).
        std::vector<double> pw(n), mw(n), vw(n);
        for (int64_t i = 0; i < n; ++i) {
          double pp = p0[i], mm = m0[i], vv = v0[i];
          adam_ref(pp, mm, vv, gv[i] * grad_scale, cfg, step);
          pw[i] = pp, mw[i] = mm, vw[i] = vv;
        }
        const std::string tag = std::string(" p=") + dtype_name(tc.p) + " state=" + dtype_name(tc.state) + " g=" +
                                dtype_name(tc.g) + (adamw ? " adamw" : " l2") + (bc ? " bc" : " nobc") +
                                " step" + std::to_string(step);
        // p moves by ~lr per step: check the change to 1e-4 of lr, plus the storage rounding of p.
        const double p_eps = tc.p == DType::F32 ? 1e-7 : 4e-3;
        expect_close(p.values(), pw, cfg.lr * 1e-4, p_eps, "adam p" + tag);
        const double s_eps = tc.state == DType::F32 ? 1e-5 : 8e-3;
        expect_close(m.values(), mw, 1e-7, s_eps, "adam m" + tag);
        expect_close(v.values(), vw, 1e-9, s_eps, "adam v" + tag);
        for (int64_t i = 0; i < n; ++i) {
          HostTensor one(DType::BF16, {1});
          one.set(0, p.get(i));
          ASSERT_EQ(out.get(i), one.get(0)) << "param_out is the RNE cast of p" << tag;
        }
      }
    }
  }
}

TEST_P(AdamTest, NoParamOutAndDeterministic) {
  const AdamCase tc = GetParam();
  const int64_t n = 40000;
  const AdamCfg cfg{3e-3f, 0.9f, 0.95f, 1e-6f, 0.01f, true, true};
  HostTensor g = random_tensor(rng_, tc.g, {n});
  HostTensor p1 = random_tensor(rng_, tc.p, {n}), m1(tc.state, {n}), v1(tc.state, {n});
  HostTensor p2 = p1, m2 = m1, v2 = v1;
  ops::adam_step(s(), p1.view(), m1.view(), v1.view(), g.view(), 1.0f, params_at(cfg, 1), TensorView());
  set_stream_omp_threads(s(), 4);
  ops::adam_step(s(), p2.view(), m2.view(), v2.view(), g.view(), 1.0f, params_at(cfg, 1), TensorView());
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(p1.raw(), p2.raw());
  EXPECT_EQ(m1.raw(), m2.raw());
  EXPECT_EQ(v1.raw(), v2.raw());
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, AdamTest,
    ::testing::Values(AdamCase{DType::F32, DType::F32, DType::F32}, AdamCase{DType::F32, DType::F32, DType::BF16},
                      AdamCase{DType::F32, DType::F32, DType::F16}, AdamCase{DType::F32, DType::BF16, DType::F32},
                      AdamCase{DType::BF16, DType::BF16, DType::BF16}, AdamCase{DType::BF16, DType::F32, DType::F16}),
    [](const auto& info) {
      return std::string("p_") + dtype_name(info.param.p) + "_state_" + dtype_name(info.param.state) + "_g_" +
             dtype_name(info.param.g);
    });

TEST(AdamMath, SharedUpdateMatchesDeepSpeedFormula) {
  // math::adam_update (shared with the CUDA kernels) vs the double reference, single element.
  for (bool adamw : {true, false}) {
    const AdamCfg cfg{1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, adamw, true};
    float p = 0.3f, m = 0.01f, v = 0.002f;
    double pd = p, md = m, vd = v;
    math::adam_update(p, m, v, -0.7f, params_at(cfg, 4));
    adam_ref(pd, md, vd, -0.7, cfg, 4);
    EXPECT_NEAR(p, pd, 1e-7);
    EXPECT_NEAR(m, md, 1e-7);
    EXPECT_NEAR(v, vd, 1e-9);
  }
}

}  // namespace
}  // namespace zt::test
