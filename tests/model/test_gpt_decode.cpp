// GPT decoding with the key/value cache (model/gpt_decode.h) against recomputing the whole
// prefix for every token: the decoder's own prefill over the prefix (the training attention
// kernel, tiled and materialised), the training model's forward (its loss at the chosen token),
// and the independent double-precision reference (model_reference.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model_reference.h"
#include "model_test_util.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/gpt_decode.h"
#include "zerotrain/model/local_state.h"

namespace zt {
namespace {

GptConfig decode_gpt() {
  GptConfig c;
  c.vocab_size = 64;
  c.n_ctx = 80;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  return c;
}

struct DecodeEnv {
  GptConfig cfg = decode_gpt();
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<Stream> stream = dev->create_stream("decode");
  std::vector<ParamSpec> specs = gpt_param_specs(cfg, *dev, *stream);
  std::vector<std::vector<float>> weights = random_param_tensors(specs, 7);
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

double log_softmax_at(const std::vector<float>& logits, int32_t tok) {
  double mx = logits[0], s = 0;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  for (float v : logits) s += std::exp(v - mx);
  return logits[tok] - mx - std::log(s);
}

const std::vector<int32_t> kPrompt = {3, 14, 15, 9, 26, 5, 35, 8};

class GptDecodeAttention : public ::testing::TestWithParam<AttentionKind> {};

TEST_P(GptDecodeAttention, GreedyWithCacheEqualsRecomputingThePrefix) {
  DecodeEnv e;
  e.cfg.attention = GetParam();
  GptDecoder cached(e.cfg, e.weights, *e.dev, *e.stream), full(e.cfg, e.weights, *e.dev, *e.stream);
  std::vector<int32_t> seq = kPrompt;
  std::vector<float> logits = cached.prefill(kPrompt);
  double worst = 0;
  for (int i = 0; i < 64; ++i) {
    full.reset();
    const std::vector<float> ref = full.prefill(seq);  // one forward over the whole prefix
    const double d = max_abs_diff(logits, ref);
    double scale = 1;
    for (float v : ref) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    worst = std::max(worst, d / scale);
    EXPECT_LE(d, 1e-5 * scale) << "step " << i;  // fp32 round-off of the logits' magnitude
    const int32_t tok = argmax_token(logits);
    ASSERT_EQ(tok, argmax_token(ref)) << "step " << i;
    seq.push_back(tok);
    if (i + 1 < 64) logits = cached.step(tok);
  }
  EXPECT_EQ(cached.position(), static_cast<int64_t>(seq.size()) - 1);
  // Greedy through generate() is the same sequence.
  const Generation g = generate(cached, kPrompt, 64, SamplingOptions{0.0});
  EXPECT_EQ(g.tokens, std::vector<int32_t>(seq.begin() + kPrompt.size(), seq.end()));
  EXPECT_FALSE(g.context_full);
  std::printf("max |cached - recomputed| / max |logit| over 64 steps: %.3g\n", worst);
}

TEST_P(GptDecodeAttention, LogitsMatchTheDoubleReferenceAndTheTrainingForward) {
  DecodeEnv e;
  e.cfg.attention = GetParam();
  GptDecoder dec(e.cfg, e.weights, *e.dev, *e.stream);
  ModelOptions mo;
  mo.device = e.dev.get();
  mo.stream = e.stream.get();
  std::unique_ptr<Model> model = make_gpt(e.cfg, mo);
  LocalModelState state(*model, *e.dev, *e.stream, DType::F32);
  std::vector<float> flat;
  std::vector<double> flat64;
  for (const auto& w : e.weights) {
    flat.insert(flat.end(), w.begin(), w.end());
    flat64.insert(flat64.end(), w.begin(), w.end());
  }
  state.set_params(flat);
  std::vector<int32_t> seq = kPrompt;
  std::vector<float> logits = dec.prefill(kPrompt);
  for (int i = 0; i < 24; ++i) {
    const int64_t T = static_cast<int64_t>(seq.size()), V = e.cfg.vocab_size;
    const std::vector<double> ref = ref::gpt_logits(e.cfg, flat64, seq, 1, T);
    double scale = 0, err = 0;
    for (int64_t v = 0; v < V; ++v) {
      scale = std::max(scale, std::fabs(ref[(T - 1) * V + v]));
      err = std::max(err, std::fabs(logits[v] - ref[(T - 1) * V + v]));
    }
    EXPECT_LE(err, 1e-5 * std::max(1.0, scale)) << "step " << i;
    const int32_t tok = argmax_token(logits);
    // The training forward's loss with only the last position's target = -log p(tok | prefix).
    Batch b;
    b.B = 1;
    b.T = T;
    b.inputs = seq;
    b.targets.assign(static_cast<size_t>(T), -1);
    b.targets.back() = tok;
    EXPECT_NEAR(-state.forward(b), log_softmax_at(logits, tok), 2e-5) << "step " << i;
    seq.push_back(tok);
    logits = dec.step(tok);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, GptDecodeAttention, ::testing::Values(AttentionKind::Tiled, AttentionKind::Materialised),
                         [](const auto& info) { return info.param == AttentionKind::Tiled ? "tiled" : "materialised"; });

TEST(GptDecode, StopsWhenTheContextIsFull) {
  DecodeEnv e;
  GptDecoder dec(e.cfg, e.weights, *e.dev, *e.stream);
  const Generation g = generate(dec, kPrompt, 1000, SamplingOptions{0.0});
  // Forwards at positions 0..n_ctx-1; the last one's logits choose one more token.
  EXPECT_TRUE(g.context_full);
  EXPECT_EQ(static_cast<int64_t>(kPrompt.size() + g.tokens.size()), e.cfg.n_ctx + 1);
  EXPECT_EQ(dec.position(), e.cfg.n_ctx);
  EXPECT_DEATH(dec.step(1), "the cache is full");
  const Generation exact = generate(dec, kPrompt, e.cfg.n_ctx + 1 - static_cast<int64_t>(kPrompt.size()), SamplingOptions{0.0});
  EXPECT_FALSE(exact.context_full);
  EXPECT_EQ(exact.tokens, g.tokens);
}

TEST(GptDecode, SeededSamplingIsDeterministic) {
  DecodeEnv e;
  GptDecoder a(e.cfg, e.weights, *e.dev, *e.stream), b(e.cfg, e.weights, *e.dev, *e.stream);
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_k = 20;
  o.top_p = 0.9;
  o.seed = 42;
  const Generation g1 = generate(a, kPrompt, 40, o), g2 = generate(b, kPrompt, 40, o);
  EXPECT_EQ(g1.tokens, g2.tokens);
  o.seed = 43;
  EXPECT_NE(generate(a, kPrompt, 40, o).tokens, g1.tokens);
}

}  // namespace
}  // namespace zt
