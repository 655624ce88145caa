// Llama decoding with the key/value cache (model/llama_decode.h) against recomputing the whole
// prefix for every token: the decoder's own prefill over the prefix (the training attention
// kernel) and the training model's forward_logits over the same sequence; grouped-query attention
// (2 query heads per key/value head), tied and untied heads, rope_theta 10000 and 500000, Llama 3's
// rotary scaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model_test_util.h"
#include "zerotrain/model/decoder.h"
#include "zerotrain/model/llama.h"
#include "zerotrain/model/llama_decode.h"
#include "zerotrain/model/local_state.h"

namespace zt {
namespace {

struct Case {
  bool tied;
  double theta;
  bool llama3 = false;  // Llama 3's rotary scaling, its bands inside the 48 positions
};

ModelConfig decode_llama(const Case& c) {
  ModelConfig m;
  m.type = ModelConfig::Type::Llama;
  LlamaConfig& l = m.llama;
  l.vocab_size = 64;
  l.hidden_size = 32;
  l.intermediate_size = 48;
  l.num_hidden_layers = 2;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = 10;  // H·hs = 40 != C: the projections are not square
  l.max_position_embeddings = 64;
  l.n_ctx = 48;
  l.rms_norm_eps = 1e-5;
  l.rope_theta = c.theta;
  l.tie_word_embeddings = c.tied;
  if (c.llama3) {
    l.rope_scaling.factor = 8.0;
    l.rope_scaling.original_max_position_embeddings = 16.0;
  }
  return m;
}

struct DecodeEnv {
  explicit DecodeEnv(const Case& c) : cfg(decode_llama(c)) {
    ModelOptions o = env.opt(1);
    o.plan_only = true;
    flat = random_params(*make_llama(cfg.llama, o), 11);
    specs = decoder_param_specs(cfg, *env.dev, *env.stream);
    weights = random_param_tensors(specs, 11);  // the same values, one vector per parameter
  }
  Env env;
  ModelConfig cfg;
  std::vector<float> flat;
  std::vector<ParamSpec> specs;
  std::vector<std::vector<float>> weights;
};

// |a - b| <= 1e-5 · max(1, max |b|): fp32 round-off of the logits' magnitude.
void expect_logits_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 1, err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  EXPECT_LE(err, 1e-5 * scale) << what;
}

const std::vector<int32_t> kPrompt = {3, 14, 15, 9, 26, 5, 35};

class LlamaDecode : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaDecode, GreedyWithCacheEqualsRecomputingThePrefix) {
  DecodeEnv e(GetParam());
  const std::unique_ptr<Decoder> cached = make_decoder(e.cfg, e.weights, *e.env.dev, *e.env.stream);
  LlamaDecoder full(e.cfg.llama, e.weights, *e.env.dev, *e.env.stream);
  std::vector<int32_t> seq = kPrompt;
  std::vector<float> logits = cached->prefill(kPrompt);
  const int steps = 40;
  for (int i = 0; i < steps; ++i) {
    full.reset();
    const std::vector<float> ref = full.prefill(seq);  // one forward over the whole prefix
    expect_logits_near(logits, ref, "step " + std::to_string(i));
    const int32_t tok = argmax_token(logits);
    ASSERT_EQ(tok, argmax_token(ref)) << "step " << i;
    seq.push_back(tok);
    if (i + 1 < steps) logits = cached->step(tok);
  }
  EXPECT_EQ(cached->position(), static_cast<int64_t>(seq.size()) - 1);
  const Generation g = generate(*cached, kPrompt, steps, SamplingOptions{0.0});
  EXPECT_EQ(g.tokens, std::vector<int32_t>(seq.begin() + static_cast<std::ptrdiff_t>(kPrompt.size()), seq.end()));
  EXPECT_FALSE(g.context_full);
}

// The decoder's logits after every step are the last row of the training model's forward_logits
// over the whole sequence (the padded head, the training attention, one batch row).
TEST_P(LlamaDecode, LogitsMatchTheTrainingForward) {
  DecodeEnv e(GetParam());
  LlamaDecoder dec(e.cfg.llama, e.weights, *e.env.dev, *e.env.stream);
  std::unique_ptr<Model> model = make_llama(e.cfg.llama, e.env.opt(1));
  LocalModelState state(*model, *e.env.dev, *e.env.stream, DType::F32);
  state.set_params(e.flat);
  std::vector<int32_t> seq = kPrompt;
  std::vector<float> logits = dec.prefill(kPrompt);
  const int64_t V = e.cfg.llama.vocab_size;
  for (int i = 0; i < 12; ++i) {
    Batch b;
    b.B = 1;
    b.T = static_cast<int64_t>(seq.size());
    b.inputs = seq;
    b.targets.assign(seq.begin() + 1, seq.end());
    b.targets.push_back(0);
    model->set_batch(b);
    for (int u = 0; u < model->num_units(); ++u) model->forward_unit(u);
    const std::vector<float> rows = model->forward_logits();
    ASSERT_EQ(rows.size(), static_cast<size_t>(b.T * V));
    expect_logits_near(logits, std::vector<float>(rows.end() - V, rows.end()), "step " + std::to_string(i));
    const int32_t tok = argmax_token(logits);
    seq.push_back(tok);
    logits = dec.step(tok);
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, LlamaDecode,
                         ::testing::Values(Case{false, 10000.0}, Case{true, 10000.0}, Case{false, 500000.0},
                                           Case{false, 10000.0, true}),
                         [](const auto& info) {
                           return std::string(info.param.tied ? "tied" : "untied") + "_theta" +
                                  std::to_string(static_cast<int>(info.param.theta)) +
                                  (info.param.llama3 ? "_llama3" : "");
                         });

TEST(LlamaDecodeContext, StopsWhenTheContextIsFull) {
  DecodeEnv e(Case{false, 10000.0});
  LlamaDecoder dec(e.cfg.llama, e.weights, *e.env.dev, *e.env.stream);
  const Generation g = generate(dec, kPrompt, 1000, SamplingOptions{0.0});
  // Forwards at positions 0..n_ctx-1; the last one's logits choose one more token.
  EXPECT_TRUE(g.context_full);
  EXPECT_EQ(static_cast<int64_t>(kPrompt.size() + g.tokens.size()), e.cfg.llama.n_ctx + 1);
  EXPECT_EQ(dec.position(), e.cfg.llama.n_ctx);
  EXPECT_DEATH(dec.step(1), "the cache is full");
}

}  // namespace
}  // namespace zt
