// llama_decode.cpp — Llama forward with a key/value cache (llama_decode.h). The block is
// llama.cpp's block_forward (same ops, same order); only the attention differs between the
// prefill (attention_gqa_forward over the prompt) and a step (attention_decode_gqa over the cache),
// and the rotary embedding starts at the cache's position.
#include "zerotrain/model/llama_decode.h"

#include "zerotrain/kernels/ops.h"
#include "zerotrain/model/decoder.h"
#include "zerotrain/model/llama.h"
#include "zerotrain/model/rope.h"

namespace zt {
namespace {
constexpr int kPerBlock = 9;  // parameters per block, in llama.cpp's order
enum BlockParam { IN_NORM, WQ, WK, WV, WO, POST_NORM, WGATE, WUP, WDOWN };
int p(int64_t layer, BlockParam k) { return static_cast<int>(1 + kPerBlock * layer + k); }

std::vector<ParamSpec> llama_param_specs(const LlamaConfig& cfg, Device& dev, Stream& stream) {
  ModelConfig mc;
  mc.type = ModelConfig::Type::Llama;
  mc.llama = cfg;
  return decoder_param_specs(mc, dev, stream);
}
}  // namespace

LlamaDecoder::LlamaDecoder(const LlamaConfig& cfg, const std::vector<std::vector<float>>& weights, Device& dev,
                           Stream& stream)
    : Decoder("LlamaDecoder", cfg.n_ctx, cfg.num_hidden_layers, cfg.num_key_value_heads * cfg.head_dim, dev, stream),
      cfg_(cfg), qw_(cfg.num_attention_heads * cfg.head_dim), kw_(cfg.num_key_value_heads * cfg.head_dim),
      weights_(llama_param_specs(cfg, dev, stream), weights, dev, stream, "LlamaDecoder") {
  const int64_t T = cfg.n_ctx, C = cfg.hidden_size, I = cfg.intermediate_size, H = cfg.num_attention_heads;
  x_ = alloc_f32(T * C);
  mid_ = alloc_f32(T * C);
  ln_ = alloc_f32(T * C);
  proj_ = alloc_f32(T * C);
  rstd_ = alloc_f32(T);
  q_ = alloc_f32(T * qw_);
  atty_ = alloc_f32(T * qw_);
  k_ = alloc_f32(T * kw_);
  v_ = alloc_f32(T * kw_);
  gate_ = alloc_f32(T * I);
  up_ = alloc_f32(T * I);
  act_ = alloc_f32(T * I);
  att_ = alloc_f32(H * T * 2, MemCategory::Workspace);
  logits_ = alloc_f32(cfg.vocab_size);
  const std::vector<float> table = rope_table(cfg.rope_theta, cfg.head_dim, T, cfg.rope_scaling);
  rope_ = alloc_f32(T * cfg.head_dim);
  dev.memcpy_async(rope_.data(), table.data(), table.size() * sizeof(float), CopyKind::HostToDevice, stream);
  stream.synchronize();  // `table` goes out of scope
}

LlamaDecoder::~LlamaDecoder() { stream_.synchronize(); }

TensorView LlamaDecoder::act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const {
  return b.view(DType::F32, dims);
}

// x[0..n) = embed_tokens[tokens] (no position table: positions enter through the rotation).
void LlamaDecoder::embed(const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), C = cfg_.hidden_size;
  upload_tokens(tokens);
  ops::embedding_forward(stream_, act(x_, {n, C}), tokens_.as<int32_t>(), weights_.param(0), TensorView{}, 1, n, C);
}

// Block l over rows 0..n of x at positions pos_..pos_+n.
void LlamaDecoder::block(int64_t l, int64_t n) {
  const int64_t C = cfg_.hidden_size, I = cfg_.intermediate_size, hs = cfg_.head_dim;
  const int64_t H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const TensorView none, x = act(x_, {n, C}), mid = act(mid_, {n, C}), ln = act(ln_, {n, C});
  const TensorView proj = act(proj_, {n, C}), rstd = act(rstd_, {n}), table = act(rope_, {cfg_.n_ctx, hs});
  const TensorView q = act(q_, {n, qw_}), k = act(k_, {n, kw_}), v = act(v_, {n, kw_}), atty = act(atty_, {n, qw_});
  const TensorView gate = act(gate_, {n, I}), up = act(up_, {n, I}), mlp = act(act_, {n, I});
  auto linear = [&](const TensorView& y, const TensorView& in, BlockParam w, int64_t fan_in, int64_t fan_out) {
    ops::linear_forward(stream_, y, none, in, weights_.param(p(l, w)), none, n, fan_in, fan_out, /*trans_w=*/true,
                        false);
  };
  ops::rmsnorm_forward(stream_, ln, rstd, x, weights_.param(p(l, IN_NORM)), eps);
  linear(q, ln, WQ, C, qw_);
  linear(k, ln, WK, C, kw_);
  linear(v, ln, WV, C, kw_);
  ops::rope_forward(stream_, q, table, 1, n, H, hs, pos_);
  ops::rope_forward(stream_, k, table, 1, n, Hkv, hs, pos_);
  const TensorView kc = act(k_cache_[l], {Hkv, cfg_.n_ctx, hs}), vc = act(v_cache_[l], {Hkv, cfg_.n_ctx, hs});
  ops::kv_cache_write_gqa(stream_, kc, vc, k, v, n, Hkv, hs, pos_);
  if (pos_ == 0)  // the prompt: the model's training kernel
    ops::attention_gqa_forward(stream_, atty, act(att_, {1, H, n, 2}), q, k, v, 1, n, H, Hkv, hs, 0, 0);
  else  // one new position over the cache
    ops::attention_decode_gqa(stream_, atty, q, kc, vc, H, Hkv, hs, pos_);
  linear(proj, atty, WO, qw_, C);
  ops::residual_add(stream_, mid, x, proj);
  ops::rmsnorm_forward(stream_, ln, rstd, mid, weights_.param(p(l, POST_NORM)), eps);
  linear(gate, ln, WGATE, C, I);
  linear(up, ln, WUP, C, I);
  ops::swiglu_forward(stream_, mlp, gate, up);
  linear(proj, mlp, WDOWN, I, C);
  ops::residual_add(stream_, x, mid, proj);
}

// model.norm and the head (lm_head, or embed_tokens when tied) over row n-1 only; the logits to
// the host.
std::vector<float> LlamaDecoder::head(int64_t n) {
  const int64_t C = cfg_.hidden_size, V = cfg_.vocab_size;
  const int norm = static_cast<int>(1 + kPerBlock * cfg_.num_hidden_layers);
  const int head_w = cfg_.tie_word_embeddings ? 0 : norm + 1;
  const TensorView row(x_.as<float>() + (n - 1) * C, DType::F32, {1, C}, dev_.kind());
  const TensorView normed = act(ln_, {1, C}), logits = act(logits_, {1, V});
  ops::rmsnorm_forward(stream_, normed, act(rstd_, {1}), row, weights_.param(norm),
                       static_cast<float>(cfg_.rms_norm_eps));
  ops::gemm(stream_, false, true, 1, V, C, 1.0f, normed, weights_.param(head_w), 0.0f, logits);
  return logits_to_host(logits_, V);
}

}  // namespace zt
