// CUDA vs CPU backend: the key/value cache ops (kv_cache_write, attention_decode and their
// grouped-query forms) and the KV-cached GPT and Llama decoders (model/decoder.h) — the same
// greedy tokens, logits to round-off.
#include <random>

#include "gpu_test_util.h"
#include "zerotrain/model/decoder.h"

namespace zt::gputest {
namespace {

class GpuDecode : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuDecode, CacheWriteAndAttentionMatchTheCpu) {
  const DType dt = GetParam();
  struct Case { int64_t T, C, H, Tmax; };
  for (Case c : {Case{1, 8, 2, 4}, Case{17, 32, 4, 24}, Case{200, 64, 2, 256}, Case{300, 96, 3, 300}}) {
    const int64_t hs = c.C / c.H;
    Dual qkv(*this, *gpu_, dt, {c.T, 3 * c.C}, uniform(c.T * 3 * c.C, -2.0f, 2.0f));
    Dual kc(*this, *gpu_, dt, {c.H, c.Tmax, hs}, uniform(c.H * c.Tmax * hs));  // garbage beyond T
    Dual vc(*this, *gpu_, dt, {c.H, c.Tmax, hs}, uniform(c.H * c.Tmax * hs));
    // The first T-1 rows in one call, the last one alone (a prefill, then a step).
    const TensorView head_cpu = make_view(qkv.cpu().data, dt, {c.T - 1, 3 * c.C}, DeviceKind::CPU);
    const TensorView head_gpu = make_view(qkv.gpu().data, dt, {c.T - 1, 3 * c.C}, DeviceKind::CUDA);
    const size_t row = static_cast<size_t>(3 * c.C) * dtype_size(dt) * static_cast<size_t>(c.T - 1);
    const TensorView last_cpu = make_view(static_cast<char*>(qkv.cpu().data) + row, dt, {1, 3 * c.C}, DeviceKind::CPU);
    const TensorView last_gpu = make_view(static_cast<char*>(qkv.gpu().data) + row, dt, {1, 3 * c.C}, DeviceKind::CUDA);
    if (c.T > 1) {
      ops::kv_cache_write(cs(), kc.cpu(), vc.cpu(), head_cpu, c.T - 1, c.C, c.H, 0);
      ops::kv_cache_write(gs(), kc.gpu(), vc.gpu(), head_gpu, c.T - 1, c.C, c.H, 0);
    }
    ops::kv_cache_write(cs(), kc.cpu(), vc.cpu(), last_cpu, 1, c.C, c.H, c.T - 1);
    ops::kv_cache_write(gs(), kc.gpu(), vc.gpu(), last_gpu, 1, c.C, c.H, c.T - 1);
    Dual out(*this, *gpu_, dt, {1, c.C}, {});
    ops::attention_decode(cs(), out.cpu(), last_cpu, kc.cpu(), vc.cpu(), c.C, c.H, c.T - 1);
    ops::attention_decode(gs(), out.gpu(), last_gpu, kc.gpu(), vc.gpu(), c.C, c.H, c.T - 1);
    sync();
    const std::string sz = " T=" + std::to_string(c.T) + " C=" + std::to_string(c.C) + tag(dt);
    EXPECT_EQ(kc.gpu_raw(), kc.cpu_raw()) << "k cache" << sz;
    EXPECT_EQ(vc.gpu_raw(), vc.cpu_raw()) << "v cache" << sz;
    expect_close(out.gpu_values(), out.cpu_values(), tol(dt), tol(dt), "attention_decode" + sz);
    // The CPU's decode equals the last row of the full causal attention.
    Dual full(*this, *gpu_, dt, {c.T, c.C}, {});
    Dual att(*this, *gpu_, DType::F32, {1, c.H, c.T, c.T}, {});
    ops::attention_forward(cs(), full.cpu(), att.cpu(), qkv.cpu(), 1, c.T, c.C, c.H);
    sync();
    const std::vector<float> all = full.cpu_values();
    expect_close(out.cpu_values(), std::vector<float>(all.end() - c.C, all.end()), tol(dt), tol(dt),
                 "decode vs attention_forward" + sz);
  }
}

// Grouped-query decoding: kv_cache_write_gqa's cache bitwise, attention_decode_gqa within
// round-off of the CPU for H/Hkv = 1, 2, 4 (query head h reads cache head h / (H/Hkv)).
TEST_P(GpuDecode, GqaCacheWriteAndAttentionMatchTheCpu) {
  const DType dt = GetParam();
  struct Case { int64_t T, H, Hkv, hs, Tmax; };
  for (Case c : {Case{1, 2, 1, 8, 4}, Case{17, 4, 2, 16, 24}, Case{200, 8, 2, 64, 256}, Case{300, 4, 4, 32, 300}}) {
    const int64_t Cq = c.H * c.hs, Ckv = c.Hkv * c.hs;
    Dual q(*this, *gpu_, dt, {1, Cq}, uniform(Cq, -2.0f, 2.0f));
    Dual k(*this, *gpu_, dt, {c.T, Ckv}, uniform(c.T * Ckv, -2.0f, 2.0f));
    Dual v(*this, *gpu_, dt, {c.T, Ckv}, uniform(c.T * Ckv));
    Dual kc(*this, *gpu_, dt, {c.Hkv, c.Tmax, c.hs}, uniform(c.Hkv * c.Tmax * c.hs));  // garbage beyond T
    Dual vc(*this, *gpu_, dt, {c.Hkv, c.Tmax, c.hs}, uniform(c.Hkv * c.Tmax * c.hs));
    ops::kv_cache_write_gqa(cs(), kc.cpu(), vc.cpu(), k.cpu(), v.cpu(), c.T, c.Hkv, c.hs, 0);
    ops::kv_cache_write_gqa(gs(), kc.gpu(), vc.gpu(), k.gpu(), v.gpu(), c.T, c.Hkv, c.hs, 0);
    Dual out(*this, *gpu_, dt, {1, Cq}, {});
    ops::attention_decode_gqa(cs(), out.cpu(), q.cpu(), kc.cpu(), vc.cpu(), c.H, c.Hkv, c.hs, c.T - 1);
    ops::attention_decode_gqa(gs(), out.gpu(), q.gpu(), kc.gpu(), vc.gpu(), c.H, c.Hkv, c.hs, c.T - 1);
    sync();
    const std::string sz = " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) + " Hkv=" +
                           std::to_string(c.Hkv) + tag(dt);
    EXPECT_EQ(kc.gpu_raw(), kc.cpu_raw()) << "k cache" << sz;
    EXPECT_EQ(vc.gpu_raw(), vc.cpu_raw()) << "v cache" << sz;
    expect_close(out.gpu_values(), out.cpu_values(), tol(dt), tol(dt), "attention_decode_gqa" + sz);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuDecode, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class GpuDecoder : public GpuTest {
 protected:
  // make_decoder(mc) on both backends from the same random weights: the same greedy tokens,
  // logits to round-off, and the same seeded samples.
  void check_decoders(const ModelConfig& mc) {
    const std::vector<ParamSpec> specs = decoder_param_specs(mc, *cpu_, cs());
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<std::vector<float>> w;
    for (const ParamSpec& p : specs) {
      std::vector<float> v(static_cast<size_t>(p.numel));
      for (float& x : v) x = p.init == InitKind::Ones ? 1.0f + 0.2f * nd(rng) : 0.3f * nd(rng);
      w.push_back(std::move(v));
    }
    const std::unique_ptr<Decoder> on_cpu = make_decoder(mc, w, *cpu_, cs()), on_gpu = make_decoder(mc, w, *gpu_, gs());
    const std::vector<int32_t> prompt = {1, 2, 3, 50, 99, 7};
    std::vector<float> lc = on_cpu->prefill(prompt), lg = on_gpu->prefill(prompt);
    for (int i = 0; i < 48; ++i) {
      expect_close(lg, lc, 1e-4, 1e-4, std::string(mc.type_name()) + " logits at step " + std::to_string(i));
      const int32_t t = argmax_token(lc);
      ASSERT_EQ(argmax_token(lg), t) << mc.type_name() << " step " << i;
      lc = on_cpu->step(t);
      lg = on_gpu->step(t);
    }
    SamplingOptions o;
    o.temperature = 0.8;
    o.top_k = 40;
    o.top_p = 0.9;
    o.seed = 3;
    EXPECT_EQ(generate(*on_gpu, prompt, 40, o).tokens, generate(*on_cpu, prompt, 40, o).tokens) << mc.type_name();
  }
};

TEST_F(GpuDecoder, GptGreedyTokensAndLogitsMatchTheCpu) {
  ModelConfig mc;
  mc.type = ModelConfig::Type::GPT;
  mc.gpt.vocab_size = 128;
  mc.gpt.n_ctx = 96;
  mc.gpt.n_layer = 2;
  mc.gpt.n_head = 4;
  mc.gpt.n_embd = 64;
  check_decoders(mc);
}

// Grouped-query attention (2 query heads per key/value head), untied head, Llama 3's scaling.
TEST_F(GpuDecoder, LlamaGreedyTokensAndLogitsMatchTheCpu) {
  ModelConfig mc;
  mc.type = ModelConfig::Type::Llama;
  LlamaConfig& l = mc.llama;
  l.vocab_size = 128;
  l.hidden_size = 64;
  l.intermediate_size = 96;
  l.num_hidden_layers = 2;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = 16;
  l.max_position_embeddings = 96;
  l.n_ctx = 96;
  l.rms_norm_eps = 1e-5;
  l.rope_theta = 10000.0;
  l.rope_scaling.factor = 4.0;
  l.rope_scaling.original_max_position_embeddings = 32.0;
  check_decoders(mc);
}

}  // namespace
}  // namespace zt::gputest
