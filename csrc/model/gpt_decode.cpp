// gpt_decode.cpp — GPT-2 forward with a key/value cache (gpt_decode.h).
//
// Buffers (fp32, sized for n_ctx rows; a forward over n rows uses the first n): x [T,C] (the
// residual stream, updated in place block by block), mid [T,C], ln [T,C] + mean/rstd [T],
// qkv [T,3C], atty [T,C], proj [T,C], fc [T,4C] (pre-GELU), fc_gelu [T,4C], att (the prefill's
// attention statistics [H,T,2] with tiled attention, probabilities [H,T,T] with materialised),
// logits [V]. The block is GPT-2's pre-norm block exactly as
// gpt.cpp runs it in training (same ops, same order); only the attention differs between the
// prefill (the model's attention kernel over the prompt: attention_tiled_forward or
// attention_forward, per GptConfig::attention) and a step (attention_decode over the cache).
#include "zerotrain/model/gpt_decode.h"

#include "zerotrain/kernels/ops.h"
#include "zerotrain/model/gpt.h"

namespace zt {
namespace {
constexpr float kLnEps = 1e-5f;  // GPT-2's, as in gpt.cpp
constexpr int kPerBlock = 12;    // parameters per block, in gpt.cpp's order
enum BlockParam { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };
int p(int64_t layer, BlockParam k) { return static_cast<int>(2 + kPerBlock * layer + k); }
}  // namespace

std::vector<ParamSpec> gpt_param_specs(const GptConfig& cfg, Device& dev, Stream& stream) {
  ModelOptions opt;
  opt.plan_only = true;
  opt.device = &dev;
  opt.stream = &stream;
  return make_gpt(cfg, opt)->params();
}

GptDecoder::GptDecoder(const GptConfig& cfg, const std::vector<std::vector<float>>& weights, Device& dev,
                       Stream& stream)
    : Decoder("GptDecoder", cfg.n_ctx, cfg.n_layer, cfg.n_embd, dev, stream), cfg_(cfg),
      weights_(gpt_param_specs(cfg, dev, stream), weights, dev, stream, "GptDecoder") {
  const int64_t T = cfg.n_ctx, C = cfg.n_embd, H = cfg.n_head;
  x_ = alloc_f32(T * C);
  mid_ = alloc_f32(T * C);
  ln_ = alloc_f32(T * C);
  mean_ = alloc_f32(T);
  rstd_ = alloc_f32(T);
  qkv_ = alloc_f32(3 * T * C);
  atty_ = alloc_f32(T * C);
  proj_ = alloc_f32(T * C);
  fc_ = alloc_f32(4 * T * C);
  fc_gelu_ = alloc_f32(4 * T * C);
  // The prefill's attention statistics (tiled) or probabilities (materialised), as the model keeps.
  att_ = alloc_f32(cfg.attention == AttentionKind::Tiled ? H * T * 2 : H * T * T, MemCategory::Workspace);
  logits_ = alloc_f32(cfg.vocab_size);
}

GptDecoder::~GptDecoder() { stream_.synchronize(); }

TensorView GptDecoder::act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const {
  return b.view(DType::F32, dims);
}

// x[0..n) = wte[tokens] + wpe[pos_ .. pos_+n).
void GptDecoder::embed(const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), C = cfg_.n_embd;
  upload_tokens(tokens);
  const TensorView wpe = param(1);
  const TensorView wpe_from(static_cast<float*>(wpe.data) + pos_ * C, DType::F32, {cfg_.n_ctx - pos_, C}, dev_.kind());
  ops::embedding_forward(stream_, act(x_, {n, C}), tokens_.as<int32_t>(), param(0), wpe_from, 1, n, C);
}

// Block l over rows 0..n of x at positions pos_..pos_+n (gpt.cpp's block_forward, with the cache).
void GptDecoder::block(int64_t l, int64_t n) {
  const int64_t C = cfg_.n_embd, H = cfg_.n_head;
  const TensorView x = act(x_, {n, C}), mid = act(mid_, {n, C}), proj = act(proj_, {n, C});
  const TensorView ln = act(ln_, {n, C}), qkv = act(qkv_, {n, 3 * C}), atty = act(atty_, {n, C});
  const TensorView none;
  ops::layernorm_forward(stream_, ln, act(mean_, {n}), act(rstd_, {n}), x, param(p(l, LN1_W)), param(p(l, LN1_B)), kLnEps);
  ops::linear_forward(stream_, qkv, none, ln, param(p(l, ATTN_W)), param(p(l, ATTN_B)), n, C, 3 * C, false, false);
  const TensorView kc = act(k_cache_[l], {H, cfg_.n_ctx, C / H}), vc = act(v_cache_[l], {H, cfg_.n_ctx, C / H});
  ops::kv_cache_write(stream_, kc, vc, qkv, n, C, H, pos_);
  if (pos_ == 0 && cfg_.attention == AttentionKind::Tiled)  // the prompt: the model's training kernel
    ops::attention_tiled_forward(stream_, atty, act(att_, {1, H, n, 2}), qkv, 1, n, C, H, 0, 0);
  else if (pos_ == 0)
    ops::attention_forward(stream_, atty, act(att_, {H, n, n}), qkv, 1, n, C, H);
  else  // one new position over the cache
    ops::attention_decode(stream_, atty, qkv, kc, vc, C, H, pos_);
  ops::linear_forward(stream_, proj, none, atty, param(p(l, APROJ_W)), param(p(l, APROJ_B)), n, C, C, false, false);
  ops::residual_add(stream_, mid, x, proj);
  ops::layernorm_forward(stream_, ln, act(mean_, {n}), act(rstd_, {n}), mid, param(p(l, LN2_W)), param(p(l, LN2_B)),
                         kLnEps);
  ops::linear_forward(stream_, act(fc_gelu_, {n, 4 * C}), act(fc_, {n, 4 * C}), ln, param(p(l, FC_W)),
                      param(p(l, FC_B)), n, C, 4 * C, false, true);
  ops::linear_forward(stream_, proj, none, act(fc_gelu_, {n, 4 * C}), param(p(l, FPROJ_W)), param(p(l, FPROJ_B)), n,
                      4 * C, C, false, false);
  ops::residual_add(stream_, x, mid, proj);
}

// ln_f and the tied head over row n-1 only; the logits to the host.
std::vector<float> GptDecoder::head(int64_t n) {
  const int64_t C = cfg_.n_embd, V = cfg_.vocab_size;
  const int last = weights_.count() - 2;  // ln_f.weight, then ln_f.bias
  const TensorView row(x_.as<float>() + (n - 1) * C, DType::F32, {1, C}, dev_.kind());
  const TensorView lnf = act(ln_, {1, C}), logits = act(logits_, {1, V});
  ops::layernorm_forward(stream_, lnf, act(mean_, {1}), act(rstd_, {1}), row, param(last), param(last + 1), kLnEps);
  ops::gemm(stream_, false, true, 1, V, C, 1.0f, lnf, param(0), 0.0f, logits);
  return logits_to_host(logits_, V);
}

}  // namespace zt
