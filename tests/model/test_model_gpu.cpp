// The models on the CUDA backend against the CPU backend (same parameters, same batch).
// Skips where there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_test_util.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/llama.h"
#include "zerotrain/model/local_state.h"
#include "zerotrain/model/mlp.h"

namespace zt {
namespace {

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
  return d / std::sqrt(na * nb);
}

// Runs forward+backward of `make(opt)` on both backends with parameters from init(seed).
template <typename Make>
void compare(Make make, const Batch& batch, int64_t micro_batch, DType dt, double loss_rtol, double grad_tol) {
  Env c, g(make_cuda_device(0));
  auto mc = make(c.opt(micro_batch, DType::F32));
  auto mg = make(g.opt(micro_batch, dt));
  LocalModelState sc(*mc, *c.dev, *c.stream, DType::F32), sg(*mg, *g.dev, *g.stream, dt);
  sc.init(5);
  std::vector<float> p = sc.params();
  if (dt == DType::BF16) for (float& x : p) x = static_cast<float>(bf16(x));
  sc.set_params(p);
  sg.set_params(p);
  sc.zero_grads();
  sg.zero_grads();
  float lc = sc.forward_backward(batch), lg = sg.forward_backward(batch);
  EXPECT_NEAR(lg, lc, loss_rtol * std::fabs(lc)) << dtype_name(dt);
  std::vector<float> gc = sc.grads(), gg = sg.grads();
  if (dt == DType::F32) {
    double scale = 0;
    for (float x : gc) scale = std::max(scale, double(std::fabs(x)));
    for (size_t k = 0; k < gc.size(); ++k) ASSERT_NEAR(gg[k], gc[k], grad_tol * scale) << "element " << k;
  } else {
    EXPECT_GT(cosine(gc, gg), 1.0 - grad_tol) << dtype_name(dt);
  }
}

TEST(ModelGpu, GptMatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  GptConfig cfg;
  cfg.vocab_size = 97;
  cfg.n_ctx = 64;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 64;
  cfg.init_std = 0.1f;
  const Batch b = random_token_batch(cfg.vocab_size, 4, 48, 1);
  auto make = [&](const ModelOptions& o) { return make_gpt(cfg, o); };
  compare(make, b, 4, DType::F32, 1e-4, 1e-3);
  compare(make, b, 4, DType::BF16, 2e-2, 1e-2);
  compare(make, b, 4, DType::F16, 1e-2, 1e-2);
}

// Llama with grouped-query attention, an untied head and a vocabulary the CUDA head pads (97 -> 128),
// then tied with cpu_checkpointing under block recompute (bitwise the plain run on the GPU too).
TEST(ModelGpu, LlamaMatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  LlamaConfig cfg;
  cfg.vocab_size = 97;
  cfg.hidden_size = 64;
  cfg.intermediate_size = 172;
  cfg.num_hidden_layers = 3;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.head_dim = 16;
  cfg.max_position_embeddings = 64;
  cfg.n_ctx = 64;
  cfg.rms_norm_eps = 1e-5;
  cfg.init_std = 0.1f;
  const Batch b = random_token_batch(cfg.vocab_size, 4, 48, 3);
  auto make = [&](const ModelOptions& o) { return make_llama(cfg, o); };
  compare(make, b, 4, DType::F32, 1e-4, 1e-3);
  compare(make, b, 4, DType::BF16, 2e-2, 1e-2);
  cfg.tie_word_embeddings = true;
  auto make_ckpt = [&](const ModelOptions& o) {
    ModelOptions with = o;
    with.recompute = Recompute::Block;
    with.cpu_checkpointing = o.device->kind() == DeviceKind::CUDA;
    return make_llama(cfg, with);
  };
  compare(make_ckpt, b, 4, DType::F32, 1e-4, 1e-3);
}

TEST(ModelGpu, MlpMatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  MlpConfig cfg;
  cfg.dims = {32, 64, 64, 10};
  cfg.task = MlpTask::Classification;
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  Batch b;
  b.B = 16;
  for (int i = 0; i < b.B * 32; ++i) b.features.push_back(nd(rng));
  for (int i = 0; i < b.B; ++i) b.targets.push_back(static_cast<int32_t>(rng() % 10));
  auto make = [&](const ModelOptions& o) { return make_mlp(cfg, o); };
  compare(make, b, 16, DType::F32, 1e-4, 1e-3);
  compare(make, b, 16, DType::BF16, 2e-2, 1e-2);
}

}  // namespace
}  // namespace zt
