// The Llama model on the CPU backend: parameters (HF names, shapes, units, the tied head), every
// parameter's gradient against central differences of the model's own fp32 loss, recompute and
// cpu_checkpointing bitwise, the padded head, forward_logits against the loss, batch validation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_test_util.h"
#include "zerotrain/core/check.h"
#include "zerotrain/model/llama.h"
#include "zerotrain/model/local_state.h"
#include "zerotrain/model/model_config.h"

namespace zt {
namespace {

LlamaConfig tiny_llama(bool tied) {
  LlamaConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;  // two query heads per key/value head
  c.head_dim = 4;  // H·hs = 16 != C: the projections are not square
  c.max_position_embeddings = 16;
  c.n_ctx = 7;  // > T of the batches below
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 100.0;  // large rotation angles over 7 positions
  c.tie_word_embeddings = tied;
  return c;
}

Batch token_batch(int64_t V, int64_t B, int64_t T, uint32_t seed) {
  Batch b = random_token_batch(V, B, T, seed);
  b.targets[3] = -1;  // ignored position
  return b;
}

TEST(LlamaModel, HuggingFaceParametersAndUnits) {
  Env env;
  for (bool tied : {false, true}) {
    const LlamaConfig cfg = tiny_llama(tied);
    auto m = make_llama(cfg, env.opt(2));
    const auto& ps = m->params();
    ASSERT_EQ(ps.size(), static_cast<size_t>(1 + 9 * 2 + (tied ? 1 : 2)));
    EXPECT_EQ(ps[0].name, "model.embed_tokens.weight");
    EXPECT_EQ(ps[0].shape, (std::vector<int64_t>{11, 8}));
    EXPECT_EQ(ps[2].name, "model.layers.0.self_attn.q_proj.weight");
    EXPECT_EQ(ps[2].shape, (std::vector<int64_t>{16, 8}));  // [H·hs, C]
    EXPECT_EQ(ps[3].shape, (std::vector<int64_t>{8, 8}));   // k_proj [Hkv·hs, C]
    EXPECT_EQ(ps[5].shape, (std::vector<int64_t>{8, 16}));  // o_proj [C, H·hs]
    EXPECT_EQ(ps[7].name, "model.layers.0.mlp.gate_proj.weight");
    EXPECT_EQ(ps[9].shape, (std::vector<int64_t>{8, 12}));  // down_proj [C, I]
    EXPECT_EQ(ps[19].name, "model.norm.weight");
    EXPECT_EQ(m->num_units(), 4);
    EXPECT_EQ(m->num_params(), llama_num_params(cfg));
    ModelConfig mc;
    mc.type = ModelConfig::Type::Llama;
    mc.llama = cfg;
    EXPECT_EQ(static_cast<double>(m->num_params()), model_param_count(mc));
    const std::vector<int> last = m->unit_params(3);
    if (tied) {
      EXPECT_EQ(last, (std::vector<int>{0, 19}));
      EXPECT_EQ(m->shared_params(), (std::vector<int>{0}));
    } else {
      EXPECT_EQ(ps[20].name, "lm_head.weight");
      EXPECT_EQ(last, (std::vector<int>{19, 20}));
      EXPECT_TRUE(m->shared_params().empty());
    }
    EXPECT_NE(m->describe().find("num_key_value_heads=2"), std::string::npos) << m->describe();
  }
}

TEST(LlamaModel, FlopsCountTheQueryHeads) {
  LlamaConfig c = tiny_llama(false);
  c.vocab_size = 32000, c.hidden_size = 4096, c.intermediate_size = 11008, c.num_hidden_layers = 32;
  c.num_attention_heads = 32, c.num_key_value_heads = 8, c.head_dim = 128;
  const double n = static_cast<double>(llama_num_params(c)) - 32000.0 * 4096;  // the lookup is not a matmul
  const double T = 4096;
  EXPECT_DOUBLE_EQ(llama_flops_per_sequence(c, 4096), T * (6 * n + 12.0 * 32 * 4096 * T));
}

// Every element's gradient against central differences of the model's own fp32 loss.
TEST(LlamaGrad, EveryParameterMatchesModelFiniteDifferences) {
  Env env;
  for (bool tied : {false, true}) {
    const LlamaConfig cfg = tiny_llama(tied);
    auto m = make_llama(cfg, env.opt(2));
    LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
    const std::vector<float> params = random_params(*m, tied ? 3 : 4);
    st.set_params(params);
    st.zero_grads();
    const Batch batch = token_batch(cfg.vocab_size, 2, 5, 7);
    st.forward_backward(batch, 1.0f);
    const std::vector<float> grads = st.grads();
    double scale = 0;
    for (float g : grads) scale = std::max(scale, double(std::fabs(g)));
    ASSERT_GT(scale, 1e-2);  // not vacuous
    const float h = 1e-2f;
    double worst = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      std::vector<float> p = params;
      p[k] = params[k] + h;
      st.set_params(p);
      const double lp = st.forward(batch);
      p[k] = params[k] - h;
      st.set_params(p);
      const double lm = st.forward(batch);
      const double fd = (lp - lm) / (2.0 * h);
      worst = std::max(worst, std::fabs(grads[k] - fd));
      EXPECT_NEAR(grads[k], fd, 1e-3 * scale + 2e-2 * std::fabs(fd)) << (tied ? "tied" : "untied") << " element " << k;
    }
    std::printf("llama %s grad check: %zu elements, max |err| %.3g, grad scale %.3g\n", tied ? "tied" : "untied",
                params.size(), worst, scale);
  }
}

TEST(LlamaModel, UnitParamsSufficeForPerUnitBinding) {
  Env env;
  for (bool tied : {false, true}) {
    const LlamaConfig cfg = tiny_llama(tied);
    auto m = make_llama(cfg, env.opt(2));
    LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
    st.set_params(random_params(*m, 8));
    check_unit_params_suffice(*m, st, token_batch(cfg.vocab_size, 2, 5, 12));
  }
}

// Loss and gradients after two accumulated micro-steps under opt.
struct Result {
  float loss0 = 0, loss1 = 0;
  std::vector<float> grads;
};
Result run(const LlamaConfig& cfg, ModelOptions opt) {
  auto m = make_llama(cfg, opt);
  LocalModelState st(*m, *opt.device, *opt.stream, DType::F32);
  st.set_params(random_params(*m, 21));
  st.zero_grads();
  Result r;
  r.loss0 = st.forward_backward(token_batch(cfg.vocab_size, 2, 7, 1), 0.5f);
  r.loss1 = st.forward_backward(token_batch(cfg.vocab_size, 1, 6, 2), 0.5f);
  r.grads = st.grads();
  return r;
}

TEST(LlamaModel, RecomputeAndCpuCheckpointingAreBitwiseIdentical) {
  Env env;
  LlamaConfig cfg = tiny_llama(true);
  cfg.num_hidden_layers = 3;  // block inputs 0..1 go to host memory under cpu_checkpointing
  const Result ref = run(cfg, env.opt(2));
  for (Recompute rc : {Recompute::Block, Recompute::Selective})
    for (bool host : {false, true}) {
      ModelOptions o = env.opt(2);
      o.recompute = rc;
      o.cpu_checkpointing = host;
      const Result r = run(cfg, o);
      const std::string what = std::string(recompute_name(rc)) + (host ? " cpu_checkpointing" : "");
      EXPECT_EQ(r.loss0, ref.loss0) << what;
      EXPECT_EQ(r.loss1, ref.loss1) << what;
      EXPECT_EQ(r.grads, ref.grads) << what;
    }
}

TEST(LlamaModel, PaddedHeadEqualsUnpadded) {
  Env env;
  for (bool tied : {false, true}) {
    const LlamaConfig cfg = tiny_llama(tied);
    const Result ref = run(cfg, env.opt(2));
    ModelOptions o = env.opt(2);
    o.vocab_pad = 8;  // V = 11 -> Vp = 16
    const Result r = run(cfg, o);
    EXPECT_NEAR(r.loss0, ref.loss0, 1e-6 * std::fabs(ref.loss0));
    ASSERT_EQ(r.grads.size(), ref.grads.size());
    for (size_t k = 0; k < r.grads.size(); ++k) EXPECT_NEAR(r.grads[k], ref.grads[k], 1e-5) << k;
  }
}

// forward_logits: the mean cross-entropy of its rows equals the model's loss, and it leaves the
// backward unchanged (the logits buffer holds the forward's softmax − onehot).
TEST(LlamaModel, ForwardLogitsGiveTheLoss) {
  Env env;
  const LlamaConfig cfg = tiny_llama(false);
  auto m = make_llama(cfg, env.opt(2));
  LocalModelState st(*m, *env.dev, *env.stream, DType::F32);
  st.set_params(random_params(*m, 30));
  const Batch batch = token_batch(cfg.vocab_size, 2, 5, 31);
  st.zero_grads();
  st.forward_backward(batch, 1.0f);
  const std::vector<float> grads = st.grads();
  st.zero_grads();
  m->set_batch(batch);
  for (int u = 0; u < m->num_units(); ++u) m->forward_unit(u);
  const std::vector<float> logits = m->forward_logits();
  ASSERT_EQ(logits.size(), static_cast<size_t>(10 * cfg.vocab_size));
  double sum = 0;
  int counted = 0;
  for (int64_t i = 0; i < 10; ++i) {
    if (batch.targets[i] < 0) continue;
    const float* row = logits.data() + i * cfg.vocab_size;
    double mx = row[0], z = 0;
    for (int64_t j = 0; j < cfg.vocab_size; ++j) mx = std::max(mx, double(row[j]));
    for (int64_t j = 0; j < cfg.vocab_size; ++j) z += std::exp(double(row[j]) - mx);
    sum += std::log(z) + mx - row[batch.targets[i]];
    ++counted;
  }
  float loss = 0;
  env.dev->memcpy_async(&loss, m->loss_device(), sizeof(float), CopyKind::DeviceToHost, *env.stream);
  env.stream->synchronize();
  EXPECT_NEAR(sum / counted, loss, 1e-5 * std::fabs(loss));
  for (int u = m->num_units() - 1; u >= 0; --u) m->backward_unit(u, 1.0f);
  EXPECT_EQ(st.grads(), grads);
}

TEST(LlamaModel, BadBatchIsInputError) {
  Env env;
  const LlamaConfig cfg = tiny_llama(false);
  auto m = make_llama(cfg, env.opt(2));
  Batch b = token_batch(cfg.vocab_size, 2, 5, 1);
  b.inputs[4] = 11;
  try {
    m->set_batch(b);
    FAIL() << "token 11 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("batch for model llama: input token 11"), std::string::npos) << e.what();
  }
  Batch long_batch = token_batch(cfg.vocab_size, 1, 8, 1);  // T > n_ctx
  EXPECT_THROW(m->set_batch(long_batch), InputError);
}

}  // namespace
}  // namespace zt
