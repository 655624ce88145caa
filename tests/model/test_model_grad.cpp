// Every parameter's gradient of the built-in models against central finite differences of an
// independent double-precision reference (model_reference.cpp); the model's own loss against the
// reference; accumulation semantics; units and shared parameters; batch validation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_reference.h"
#include "model_test_util.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/local_state.h"
#include "zerotrain/model/mlp.h"
#include "zerotrain/model/unit_runner.h"

namespace zt {
namespace {

struct GradReport {
  double max_abs_err = 0, grad_scale = 0;
};

// Compares analytic (model, fp32) and finite-difference (reference, double) gradients of every
// element, except `skip` elements which are returned to the caller through `skipped`.
template <typename LossFn, typename SkipFn>
GradReport check_all_grads(const std::vector<float>& params, const std::vector<float>& grads, LossFn loss, SkipFn skip,
                           std::vector<std::pair<size_t, double>>* skipped) {
  std::vector<double> x(params.begin(), params.end());
  std::vector<double> fd(x.size());
  const double h = 1e-5;
  GradReport r;
  for (size_t k = 0; k < x.size(); ++k) {
    const double keep = x[k];
    x[k] = keep + h;
    double lp = loss(x);
    x[k] = keep - h;
    double lm = loss(x);
    x[k] = keep;
    fd[k] = (lp - lm) / (2 * h);
    r.grad_scale = std::max(r.grad_scale, std::fabs(fd[k]));
  }
  for (size_t k = 0; k < x.size(); ++k) {
    if (skip(k)) {
      skipped->push_back({k, fd[k]});
      continue;
    }
    double err = std::fabs(grads[k] - fd[k]);
    r.max_abs_err = std::max(r.max_abs_err, err);
    EXPECT_LE(err, 2e-5 * r.grad_scale + 2e-4 * std::fabs(fd[k])) << "element " << k << ": model " << grads[k] << " fd " << fd[k];
  }
  return r;
}

// ---- GPT ---------------------------------------------------------------------------------

GptConfig tiny_gpt() {
  GptConfig c;
  c.vocab_size = 11;
  c.n_ctx = 7;  // > T: wpe rows past T must get zero gradient
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}

Batch gpt_batch(const GptConfig& c, int64_t B, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  Batch b;
  b.B = B;
  b.T = T;
  for (int64_t i = 0; i < B * T; ++i) {
    b.inputs.push_back(static_cast<int32_t>(rng() % c.vocab_size));
    b.targets.push_back(static_cast<int32_t>(rng() % c.vocab_size));
  }
  b.targets[3] = -1;  // ignored position
  return b;
}

TEST(GptGrad, EveryParameterMatchesFiniteDifferences) {
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m = make_gpt(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  std::vector<float> params = random_params(*m, 5);
  st.set_params(params);
  st.zero_grads();
  Batch batch = gpt_batch(cfg, 2, 5, 9);
  float loss = st.forward_backward(batch, 1.0f);
  std::vector<float> grads = st.grads();
  auto ref_loss = [&](const std::vector<double>& x) { return ref::gpt_loss(cfg, x, batch.inputs, batch.targets, 2, 5); };
  EXPECT_NEAR(loss, ref_loss(std::vector<double>(params.begin(), params.end())), 2e-6 * std::fabs(loss));

  // the key part [C:2C] of each c_attn bias has an exactly zero true gradient: bound it instead
  std::vector<std::pair<size_t, double>> key_bias;
  auto is_key_bias = [&](size_t k) {
    for (size_t i = 0; i < m->params().size(); ++i) {
      const ParamSpec& p = m->params()[i];
      int64_t off = st.offsets()[i];
      if (static_cast<int64_t>(k) >= off && static_cast<int64_t>(k) < off + p.numel)
        return ends_with(p.name, "c_attn.bias") && (int64_t(k) - off) >= cfg.n_embd && (int64_t(k) - off) < 2 * cfg.n_embd;
    }
    return false;
  };
  GradReport r = check_all_grads(params, grads, ref_loss, is_key_bias, &key_bias);
  EXPECT_GT(r.grad_scale, 1e-2);  // the check is not vacuous
  EXPECT_EQ(key_bias.size(), static_cast<size_t>(cfg.n_layer * cfg.n_embd));
  for (auto [k, fd] : key_bias) {
    EXPECT_LE(std::fabs(fd), 1e-8) << "reference key-bias gradient should be 0";
    EXPECT_LE(std::fabs(grads[k]), 1e-6 * r.grad_scale) << "model key-bias gradient is not round-off";
  }
  // wpe rows T..n_ctx-1 are unused by a T=5 batch
  const int64_t wpe = st.offsets()[1];
  for (int64_t k = 5 * cfg.n_embd; k < cfg.n_ctx * cfg.n_embd; ++k) EXPECT_EQ(grads[wpe + k], 0.0f);
  std::printf("gpt grad check: %zu elements, max |err| %.3g, grad scale %.3g\n", params.size(), r.max_abs_err, r.grad_scale);
}

TEST(GptGrad, ModelFiniteDifferencesFp32) {
  // Central differences of the model's own fp32 loss (a sample of elements, loose tolerance):
  // forward and backward agree with each other, not only with the reference.
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m = make_gpt(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  std::vector<float> params = random_params(*m, 6);
  st.set_params(params);
  st.zero_grads();
  Batch batch = gpt_batch(cfg, 2, 5, 10);
  st.forward_backward(batch, 1.0f);
  std::vector<float> grads = st.grads();
  double scale = 0;
  for (float g : grads) scale = std::max(scale, double(std::fabs(g)));
  const float h = 1e-2f;
  for (size_t k = 0; k < params.size(); k += 13) {
    std::vector<float> p = params;
    p[k] = params[k] + h;
    st.set_params(p);
    double lp = st.forward(batch);
    p[k] = params[k] - h;
    st.set_params(p);
    double lm = st.forward(batch);
    double fd = (lp - lm) / (2.0 * h);
    EXPECT_NEAR(grads[k], fd, 1e-3 * scale + 2e-2 * std::fabs(fd)) << "element " << k;
  }
}

TEST(GptVocabPad, PaddingMap) {
  VocabLayout l = vocab_layout(50257, 128);
  EXPECT_EQ(l.V, 50257);
  EXPECT_EQ(l.Vp, 50304);  // llm.c's GPT-2 padded vocabulary
  EXPECT_TRUE(l.padded());
  EXPECT_TRUE(l.is_real(0));
  EXPECT_TRUE(l.is_real(50256));
  EXPECT_FALSE(l.is_real(50257));
  EXPECT_FALSE(l.is_real(50303));
  EXPECT_FALSE(l.is_real(-1));
  EXPECT_EQ(vocab_layout(50257, 64).Vp, 50304);
  EXPECT_EQ(vocab_layout(256, 128).Vp, 256);  // already a multiple: no padding
  EXPECT_FALSE(vocab_layout(256, 128).padded());
  EXPECT_EQ(vocab_layout(11, 1).Vp, 11);
  EXPECT_EQ(vocab_layout(0, 128).Vp, 0);
  EXPECT_EQ(default_vocab_pad(DeviceKind::CUDA), 128);
  EXPECT_EQ(default_vocab_pad(DeviceKind::CPU), 1);
  EXPECT_THROW(vocab_layout(11, 0), InputError);
  EXPECT_THROW(vocab_layout(-1, 8), InputError);
  // Every padded bf16 row starts 16-byte aligned.
  EXPECT_EQ(vocab_layout(50257, default_vocab_pad(DeviceKind::CUDA)).Vp * 2 % 16, 0);
}

// The padded LM head (vocab_pad.h) on the CPU: logits rows Vp apart, the GEMMs and the loss over
// the V real columns. Same losses and gradients as the unpadded head, bitwise, for fp32 and bf16,
// and the logits buffer is the padded size.
TEST(GptVocabPad, PaddedHeadEqualsUnpadded) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t pad : {int64_t(8), int64_t(128)}) {
      Env env;
      GptConfig cfg = tiny_gpt();  // V = 11 → Vp = 16 or 128
      ModelOptions plain = env.opt(2, dt), padded = env.opt(2, dt);
      padded.vocab_pad = pad;
      EXPECT_EQ(gpt_vocab_layout(cfg, plain).Vp, 11);  // CPU default: no padding
      const int64_t Vp = gpt_vocab_layout(cfg, padded).Vp;
      EXPECT_EQ(Vp, pad == 8 ? 16 : 128);
      int64_t logits_plain = 0, logits_padded = 0;
      for (const BufferSpec& b : gpt_buffer_plan(cfg, plain)) logits_plain += b.name == "logits" ? b.bytes : 0;
      for (const BufferSpec& b : gpt_buffer_plan(cfg, padded)) logits_padded += b.name == "logits" ? b.bytes : 0;
      EXPECT_EQ(logits_padded, logits_plain / 11 * Vp);
      auto m0 = make_gpt(cfg, plain), m1 = make_gpt(cfg, padded);
      LocalModelState s0(*m0, *env.dev, *env.stream, dt), s1(*m1, *env.dev, *env.stream, dt);
      const std::vector<float> params = random_params(*m0, 21);
      s0.set_params(params);
      s1.set_params(params);
      s0.zero_grads();
      s1.zero_grads();
      Batch batch = gpt_batch(cfg, 2, 5, 13);
      const float l0 = s0.forward_backward(batch, 1.0f), l1 = s1.forward_backward(batch, 1.0f);
      EXPECT_EQ(l0, l1) << dtype_name(dt) << " pad " << pad;
      EXPECT_EQ(s0.grads(), s1.grads()) << dtype_name(dt) << " pad " << pad;
    }
  }
}

TEST(GptGrad, AccumulatesAndScales) {
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m = make_gpt(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  st.set_params(random_params(*m, 7));
  Batch batch = gpt_batch(cfg, 2, 5, 11);
  st.zero_grads();
  float l1 = st.forward_backward(batch, 1.0f);
  std::vector<float> g1 = st.grads();
  float l2 = st.forward_backward(batch, 1.0f);  // no zeroing: accumulates
  EXPECT_EQ(l1, l2);
  std::vector<float> g2 = st.grads();
  // one forward, backward twice: backward is repeatable
  st.zero_grads();
  st.forward(batch);
  for (int rep = 0; rep < 2; ++rep)
    for (int u = m->num_units() - 1; u >= 0; --u) m->backward_unit(u, 1.0f);
  std::vector<float> g_rep = st.grads();
  // dloss scales the gradient (loss scale / accumulation steps)
  st.zero_grads();
  st.forward_backward(batch, 0.25f);
  std::vector<float> g_q = st.grads();
  for (size_t k = 0; k < g1.size(); ++k) {
    const float tol = 1e-6f * std::fabs(g1[k]) + 1e-9f;
    ASSERT_NEAR(g2[k], 2 * g1[k], 2 * tol) << k;
    ASSERT_NEAR(g_rep[k], 2 * g1[k], 2 * tol) << k;
    ASSERT_NEAR(g_q[k], 0.25f * g1[k], tol) << k;
  }
}

TEST(GptModel, UnitsAndTiedWeight) {
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m = make_gpt(cfg, env.opt(1));
  const int L = static_cast<int>(cfg.n_layer);
  ASSERT_EQ(m->num_units(), L + 2);
  EXPECT_EQ(m->unit_params(0), (std::vector<int>{0, 1}));
  for (int u = 1; u <= L; ++u) {
    auto ps = m->unit_params(u);
    ASSERT_EQ(ps.size(), 12u);
    EXPECT_EQ(ps.front(), 2 + 12 * (u - 1));
    for (int i : ps) EXPECT_EQ(m->params()[i].name.rfind("h." + std::to_string(u - 1) + ".", 0), 0u);
  }
  const int last = static_cast<int>(m->params().size()) - 1;
  EXPECT_EQ(m->unit_params(L + 1), (std::vector<int>{0, last - 1, last}));
  EXPECT_EQ(m->shared_params(), std::vector<int>{0});
  // spec.unit is the lowest unit reading each param; params are in forward order
  for (int u = 0; u < m->num_units(); ++u)
    for (int i : m->unit_params(u)) EXPECT_LE(m->params()[i].unit, u);
  for (size_t i = 1; i < m->params().size(); ++i) EXPECT_GE(m->params()[i].unit, m->params()[i - 1].unit);
  EXPECT_EQ(m->num_params(), gpt_num_params(cfg));
  EXPECT_EQ(m->hidden_size(), cfg.n_embd);
}

TEST(GptModel, UnitParamsSufficeForPerUnitBinding) {
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m = make_gpt(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  st.set_params(random_params(*m, 8));
  check_unit_params_suffice(*m, st, gpt_batch(cfg, 2, 5, 12));
}

TEST(GptModel, Gpt2SmallSizesAndFlops) {
  GptConfig c;
  c.vocab_size = 50257;
  c.n_ctx = 1024;
  c.n_layer = 12;
  c.n_head = 12;
  c.n_embd = 768;
  EXPECT_EQ(gpt_num_params(c), 124439808);  // Hugging Face gpt2
  const double n = 124439808.0;
  EXPECT_DOUBLE_EQ(gpt_flops_per_sequence(c, 1024), 1024.0 * (6 * n + 12.0 * 12 * 768 * 1024));
  EXPECT_NEAR(gpt_flops_per_sequence(c, 1024) / 1024, 860e6, 0.5e6);  // PaLM convention: 6N + 12·L·C·T FLOPs per token
}

TEST(GptModel, BadBatchIsInputError) {
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m = make_gpt(cfg, env.opt(2));
  Batch b = gpt_batch(cfg, 2, 5, 1);
  b.inputs[4] = 11;
  EXPECT_THROW(m->set_batch(b), InputError);
  b = gpt_batch(cfg, 3, 5, 1);  // B > micro_batch
  EXPECT_THROW(m->set_batch(b), InputError);
  b = gpt_batch(cfg, 1, 8, 1);  // T > n_ctx
  EXPECT_THROW(m->set_batch(b), InputError);
  b = gpt_batch(cfg, 2, 5, 1);
  b.targets.pop_back();
  EXPECT_THROW(m->set_batch(b), InputError);
}

TEST(GptModel, Bf16ComputeTracksFp32) {
  Env env;
  GptConfig cfg = tiny_gpt();
  auto m32 = make_gpt(cfg, env.opt(2));
  auto m16 = make_gpt(cfg, env.opt(2, DType::BF16));
  LocalModelState s32(*m32, *env.dev, *env.stream, DType::F32), s16(*m16, *env.dev, *env.stream, DType::BF16);
  std::vector<float> params = random_params(*m32, 3);
  for (float& p : params) p = static_cast<float>(bf16(p));  // same (representable) weights
  s32.set_params(params);
  s16.set_params(params);
  s32.zero_grads();
  s16.zero_grads();
  Batch batch = gpt_batch(cfg, 2, 5, 4);
  float l32 = s32.forward_backward(batch), l16 = s16.forward_backward(batch);
  EXPECT_NEAR(l16, l32, 0.03 * l32);
  std::vector<float> g32 = s32.grads(), g16 = s16.grads();
  double dot = 0, n32 = 0, n16 = 0;
  for (size_t k = 0; k < g32.size(); ++k) dot += double(g32[k]) * g16[k], n32 += double(g32[k]) * g32[k], n16 += double(g16[k]) * g16[k];
  EXPECT_GT(dot / std::sqrt(n32 * n16), 0.99);  // cosine similarity of the gradients
}

TEST(GptModel, SgdStepsReduceLoss) {
  // End-to-end smoke: plain SGD on one batch from the GPT-2 init must fit it.
  Env env;
  GptConfig cfg = tiny_gpt();
  cfg.init_std = 0.1f;
  auto m = make_gpt(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  st.init(17);
  Batch batch = gpt_batch(cfg, 2, 7, 18);
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    st.zero_grads();
    last = st.forward_backward(batch);
    if (step == 0) first = last;
    std::vector<float> p = st.params(), g = st.grads();
    for (size_t k = 0; k < p.size(); ++k) p[k] -= 0.5f * g[k];
    st.set_params(p);
  }
  EXPECT_NEAR(first, std::log(11.0f), 0.3f);  // near-uniform prediction at init
  EXPECT_LT(last, 0.5f * first);
}

// ---- MLP ---------------------------------------------------------------------------------

struct MlpCase {
  std::vector<int64_t> dims;
  Activation act;
  MlpTask task;
  int64_t B;
};

void PrintTo(const MlpCase& c, std::ostream* os) {
  *os << "dims[" << c.dims.size() << "] " << (c.act == Activation::GELU ? "gelu " : "relu ")
      << (c.task == MlpTask::Regression ? "regression" : "classification") << " B=" << c.B;
}

class MlpGrad : public ::testing::TestWithParam<MlpCase> {};

TEST_P(MlpGrad, EveryParameterMatchesFiniteDifferences) {
  const MlpCase& c = GetParam();
  Env env;
  MlpConfig cfg;
  cfg.dims = c.dims;
  cfg.activation = c.act;
  cfg.task = c.task;
  auto m = make_mlp(cfg, env.opt(4));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  std::vector<float> params = random_params(*m, 21);
  for (float& p : params) p *= 2.0f;  // MLP weights nearer fan-in scale
  st.set_params(params);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Batch b;
  b.B = c.B;
  for (int64_t i = 0; i < c.B * c.dims.front(); ++i) b.features.push_back(nd(rng));
  if (c.task == MlpTask::Regression) {
    for (int64_t i = 0; i < c.B * c.dims.back(); ++i) b.targets_f.push_back(nd(rng));
  } else {
    for (int64_t i = 0; i < c.B; ++i) b.targets.push_back(static_cast<int32_t>(rng() % c.dims.back()));
    b.targets[1] = -1;  // ignored row
  }
  st.zero_grads();
  float loss = st.forward_backward(b, 1.0f);
  std::vector<float> grads = st.grads();
  auto ref_loss = [&](const std::vector<double>& x) { return ref::mlp_loss(cfg, x, b.features, b.targets_f, b.targets, c.B); };
  EXPECT_NEAR(loss, ref_loss(std::vector<double>(params.begin(), params.end())), 2e-6 * std::fabs(loss) + 1e-7);
  std::vector<std::pair<size_t, double>> none;
  GradReport r = check_all_grads(params, grads, ref_loss, [](size_t) { return false; }, &none);
  EXPECT_GT(r.grad_scale, 1e-2);
  // accumulation: a second forward+backward doubles the gradient
  st.forward_backward(b, 1.0f);
  std::vector<float> g2 = st.grads();
  for (size_t k = 0; k < grads.size(); ++k) ASSERT_NEAR(g2[k], 2 * grads[k], 2e-6f * std::fabs(grads[k]) + 1e-9f);
  EXPECT_EQ(m->num_units(), static_cast<int>(c.dims.size()) - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Mlps, MlpGrad,
    ::testing::Values(MlpCase{{5, 7, 6, 3}, Activation::GELU, MlpTask::Regression, 4},
                      MlpCase{{5, 7, 6, 3}, Activation::ReLU, MlpTask::Regression, 3},  // partial batch
                      MlpCase{{4, 9, 5}, Activation::GELU, MlpTask::Classification, 4},
                      MlpCase{{4, 9, 5}, Activation::ReLU, MlpTask::Classification, 4},
                      MlpCase{{6, 2}, Activation::GELU, MlpTask::Regression, 4}));  // one layer

TEST(MlpModel, UnitParamsSufficeForPerUnitBinding) {
  Env env;
  MlpConfig cfg;
  cfg.dims = {3, 5, 4, 2};
  auto m = make_mlp(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  st.init(3);
  Batch b;
  b.B = 2;
  b.features = {0.1f, -0.2f, 0.3f, 1.0f, 0.5f, -1.5f};
  b.targets_f = {0.5f, -0.5f, 1.0f, 0.0f};
  check_unit_params_suffice(*m, st, b);
  EXPECT_TRUE(m->shared_params().empty());
}

TEST(MlpModel, BadBatchIsInputError) {
  Env env;
  MlpConfig cfg;
  cfg.dims = {3, 4, 2};
  cfg.task = MlpTask::Classification;
  auto m = make_mlp(cfg, env.opt(2));
  Batch b;
  b.B = 2;
  b.features.assign(6, 0.5f);
  b.targets = {0, 2};  // class 2 of 2 outputs
  EXPECT_THROW(m->set_batch(b), InputError);
  b.targets = {0, 1};
  b.features.pop_back();
  EXPECT_THROW(m->set_batch(b), InputError);
  b.features.push_back(0.5f);
  EXPECT_NO_THROW(m->set_batch(b));
}

}  // namespace
}  // namespace zt
