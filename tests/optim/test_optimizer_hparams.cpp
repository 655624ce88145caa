// Optimizer type resolution, defaults, AdamParams per step, and SGD vs a hand-written torch loop.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/optim/optimizer_hparams.h"

using json = zt::Json;

TEST(OptimizerHparams, AdamDefaultsAndModes) {
  auto h = zt::parse_optimizer("Adam", nullptr);
  EXPECT_EQ(h.type, "adam");
  EXPECT_EQ(h.lr, 1e-3);
  EXPECT_EQ(h.beta1, 0.9);
  EXPECT_EQ(h.beta2, 0.999);
  EXPECT_EQ(h.eps, 1e-8);
  EXPECT_EQ(h.weight_decay, 0.0);
  EXPECT_TRUE(h.bias_correction);
  EXPECT_TRUE(h.adam_w_mode) << "Adam with default adam_w_mode behaves as AdamW";
  EXPECT_TRUE(h.has_betas());
  EXPECT_FALSE(zt::parse_optimizer("Adam", json{{"adam_w_mode", false}}).adam_w_mode);
  EXPECT_TRUE(zt::parse_optimizer("AdamW", json{{"adam_w_mode", false}}).adam_w_mode);
  for (const char* t : {"ADAMW", "AdamW", "adamw"}) EXPECT_EQ(zt::parse_optimizer(t, json::object()).type, "adamw");
  auto p = zt::parse_optimizer("AdamW", json{{"lr", 3e-4}, {"betas", {0.8, 0.95}}, {"eps", 1e-6},
                                             {"weight_decay", 0.1}, {"bias_correction", false}, {"torch_adam", true}});
  EXPECT_EQ(p.lr, 3e-4);
  EXPECT_EQ(p.beta1, 0.8);
  EXPECT_EQ(p.beta2, 0.95);
  EXPECT_EQ(p.eps, 1e-6);
  EXPECT_EQ(p.weight_decay, 0.1);
  EXPECT_FALSE(p.bias_correction);
}

TEST(OptimizerHparams, UnsupportedAndBadParams) {
  for (const char* t : {"OneBitAdam", "ZeroOneAdam", "OneBitLamb", "MuAdam", "FusedAdam", "RMSprop", "sgd", ""})
    EXPECT_THROW(zt::parse_optimizer(t, json::object()), zt::InputError) << t;
  try {
    zt::parse_optimizer("sgd", json::object());
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'SGD'"), std::string::npos);
  }
  EXPECT_THROW(zt::parse_optimizer("Adam", json{{"max_grad_norm", 0.0}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("Adam", json{{"amsgrad", true}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("Adam", json{{"lrr", 1}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("Adam", json{{"betas", {0.9}}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("Adam", json{{"lr", "0.1"}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("SGD", json{{"nesterov", true}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("SGD", json{{"lr", -1}}), zt::InputError);
}

TEST(OptimizerHparams, LionAdagradLamb) {
  auto lion = zt::parse_optimizer("Lion", json{{"lr", 1e-4}, {"weight_decay", 0.5}});
  EXPECT_EQ(lion.kind, zt::OptimizerKind::Lion);
  EXPECT_EQ(lion.beta2, 0.999);  // FusedLion's default
  EXPECT_EQ(lion.moment_count(), 1);
  EXPECT_TRUE(lion.has_betas());
  const zt::optim::LionParams lp = zt::lion_params_for_step(lion, zt::LrValues{2e-4, false, 0, 0});
  EXPECT_EQ(lp.lr, 2e-4f);
  EXPECT_EQ(lp.after_decay, 1.0f - 2e-4f * 0.5f);
  auto ada = zt::parse_optimizer("adagrad", json{{"lr_decay", 0.5}, {"initial_accumulator_value", 0.1}});
  EXPECT_EQ(ada.kind, zt::OptimizerKind::Adagrad);
  EXPECT_EQ(ada.lr, 1e-2);
  EXPECT_EQ(ada.eps, 1e-10);
  EXPECT_EQ(ada.moment_names(), std::vector<std::string>{"sum"});
  EXPECT_FALSE(ada.has_betas());
  // torch: clr = lr / (1 + (step - 1) lr_decay)
  EXPECT_EQ(zt::adagrad_params_for_step(ada, 1, zt::LrValues{1e-2, false, 0, 0}).clr, 1e-2f);
  EXPECT_EQ(zt::adagrad_params_for_step(ada, 3, zt::LrValues{1e-2, false, 0, 0}).clr, static_cast<float>(1e-2 / 2.0));
  auto lamb = zt::parse_optimizer("LAMB", json{{"lr", 1e-2}, {"max_coeff", 3.0}});
  EXPECT_EQ(lamb.kind, zt::OptimizerKind::Lamb);
  EXPECT_EQ(lamb.moment_count(), 2);
  EXPECT_TRUE(lamb.needs_param_norms());
  const zt::optim::LambParams a = zt::lamb_params_for_step(lamb, 2, zt::LrValues{1e-2, false, 0, 0});
  const float bc1 = static_cast<float>(1 - std::pow(0.9f, 2.0)), bc2 = static_cast<float>(1 - std::pow(0.999f, 2.0));
  EXPECT_EQ(a.step_size, 1e-2f * std::sqrt(bc2) / bc1);
  EXPECT_EQ(a.max_coeff, 3.0f);
  // FusedLamb's ratio edge cases: a zero norm gives 1; otherwise clamped (upper bound first).
  EXPECT_EQ(zt::optim::lamb_ratio(0.0f, 4.0f, a), 1.0f);
  EXPECT_EQ(zt::optim::lamb_ratio(4.0f, 0.0f, a), 1.0f);
  EXPECT_EQ(zt::optim::lamb_ratio(400.0f, 1.0f, a), 3.0f);
  EXPECT_EQ(zt::optim::lamb_ratio(1e-8f, 1.0f, a), 0.01f);
  EXPECT_EQ(zt::optim::lamb_ratio(4.0f, 1.0f, a), 2.0f);
  EXPECT_THROW(zt::parse_optimizer("LAMB", json{{"amsgrad", true}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("LAMB", json{{"min_coeff", 5.0}, {"max_coeff", 1.0}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("Lion", json{{"eps", 1e-8}}), zt::InputError);
  EXPECT_THROW(zt::parse_optimizer("Adagrad", json{{"lr_decay", -0.1}}), zt::InputError);
}

TEST(OptimizerHparams, AdamParamsForStep) {
  auto h = zt::parse_optimizer("AdamW", json{{"lr", 1e-2}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.01}});
  zt::LrValues sched{0.005, false, 0, 0};
  for (int64_t t : {1, 2, 10, 1000}) {
    zt::math::AdamParams a = zt::adam_params_for_step(h, t, sched);
    EXPECT_EQ(a.lr, 0.005f);
    EXPECT_EQ(a.beta1, 0.9f);
    EXPECT_EQ(a.beta2, 0.99f);
    EXPECT_EQ(a.weight_decay, 0.01f);
    EXPECT_TRUE(a.adam_w_mode);
    EXPECT_FLOAT_EQ(a.bias_correction1, static_cast<float>(1 - std::pow(static_cast<double>(0.9f), t)));
    EXPECT_FLOAT_EQ(a.bias_correction2, static_cast<float>(1 - std::pow(static_cast<double>(0.99f), t)));
  }
  EXPECT_FLOAT_EQ(zt::adam_params_for_step(h, 1, sched).bias_correction1, 0.1f);
  // OneCycle momentum overrides the betas (and the corrections use them).
  zt::LrValues cyc{0.001, true, 0.85, 0.99};
  zt::math::AdamParams c = zt::adam_params_for_step(h, 2, cyc);
  EXPECT_EQ(c.beta1, 0.85f);
  EXPECT_FLOAT_EQ(c.bias_correction1, static_cast<float>(1 - std::pow(static_cast<double>(0.85f), 2)));
  // No bias correction: both 1.
  auto nb = zt::parse_optimizer("Adam", json{{"bias_correction", false}});
  zt::math::AdamParams n = zt::adam_params_for_step(nb, 7, sched);
  EXPECT_EQ(n.bias_correction1, 1.0f);
  EXPECT_EQ(n.bias_correction2, 1.0f);
}

TEST(OptimizerHparams, AdamStepMatchesHandFormula) {
  // One step of the shared math with our params against the §4 formula in double.
  auto h = zt::parse_optimizer("Adam", json{{"lr", 0.1}, {"weight_decay", 0.5}, {"adam_w_mode", false}});
  zt::math::AdamParams a = zt::adam_params_for_step(h, 1, {0.1, false, 0, 0});
  float p = 2.0f, m = 0, v = 0;
  zt::math::adam_update(p, m, v, 0.3f, a);
  double g = 0.3 + 0.5 * 2.0;  // L2 mode
  double mm = 0.1 * g, vv = 0.001 * g * g;
  double want = 2.0 - 0.1 * (mm / 0.1) / (std::sqrt(vv / (1 - 0.999)) + 1e-8);
  EXPECT_NEAR(p, want, 1e-6);
}

TEST(OptimizerHparams, SgdMatchesTorchLoop) {
  struct Case { double momentum, dampening, wd; bool nesterov; };
  for (Case c : {Case{0, 0, 0, false}, Case{0.9, 0, 0, false}, Case{0.9, 0.1, 0.01, false}, Case{0.8, 0, 0.05, true}}) {
    auto h = zt::parse_optimizer("SGD", json{{"lr", 0.05}, {"momentum", c.momentum}, {"dampening", c.dampening},
                                             {"weight_decay", c.wd}, {"nesterov", c.nesterov}});
    EXPECT_FALSE(h.has_betas());
    zt::optim::SgdParams s = zt::sgd_params_for_step(h, {0.05, false, 0, 0});
    const int n = 5;
    std::vector<float> p(n), buf(n, 0.f);
    std::vector<double> pr(n), br(n, 0.0);
    for (int i = 0; i < n; ++i) p[i] = pr[i] = 0.1f * (i + 1);
    for (int step = 1; step <= 6; ++step) {
      std::vector<float> g(n);
      for (int i = 0; i < n; ++i) g[i] = std::sin(0.7f * i + step);
      zt::sgd_step_cpu(p.data(), c.momentum != 0 ? buf.data() : nullptr, g.data(), n, s, step == 1);
      for (int i = 0; i < n; ++i) {  // torch.optim.SGD, in double
        double d = g[i] + c.wd * pr[i];
        if (c.momentum != 0) {
          br[i] = step == 1 ? d : c.momentum * br[i] + (1 - c.dampening) * d;
          d = c.nesterov ? d + c.momentum * br[i] : br[i];
        }
        pr[i] -= 0.05 * d;
      }
    }
    for (int i = 0; i < n; ++i) EXPECT_NEAR(p[i], pr[i], 1e-5) << "case momentum " << c.momentum;
  }
}
