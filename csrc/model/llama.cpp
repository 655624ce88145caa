// llama.cpp — Llama forward/backward over zt::ops (see llama.h).
//
// Block (x = residual[l]):  h = rmsnorm(x); q = h·Wqᵀ, k = h·Wkᵀ, v = h·Wvᵀ; rope(q), rope(k) in
// place; a = attention_gqa(q, k, v); mid = x + a·Woᵀ; h2 = rmsnorm(mid); g = h2·Wgᵀ, u = h2·Wuᵀ;
// s = swiglu(g, u); residual[l+1] = mid + s·Wdᵀ.
//
// Buffers (N = micro_batch · n_ctx rows; qw = H·hs, kw = Hkv·hs, I = intermediate_size), listed
// with their sizes by llama_buffer_plan (the allocation and the memory prediction), besides the
// token models' shared ones (token_model.h: tokens, targets, residual stream, head, logits):
//   rope         fp32 [n_ctx, hs], the rotary table (zerotrain/model/rope.h), uploaded once
//   per block:   ln1, ln2 [N,C] + fp32 rstd [N]; q [N,qw], k and v [N,kw] (q and k after rotation);
//                att: the attention's statistics [B,H,T,2] fp32; atty [N,qw] (attention output);
//                mid [N,C]; gate, up [N,I]; act [N,I] (swiglu output)
//   recompute:   Block keeps only residual[l] per block and one shared set of the block buffers,
//                refilled by recomputing the block's forward before its backward; Selective shares
//                att, atty and act (recomputed from q, k, v and gate, up) and keeps the rest.
// Workspace: proj [N,C] (o_proj / down_proj outputs), dres [N,C] (the residual stream's gradient,
// carried from unit to unit in backward), dC [N,max(C,qw)], dq [N,qw], dk, dv [N,kw], dI [N,I].
// The MLP backward writes d gate and d up over gate and up (swiglu_backward allows it; nothing
// reads them again before the next forward rewrites them).
#include "zerotrain/model/llama.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "token_model.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/model/rope.h"

namespace zt {
namespace {

using model_detail::TokenModel;
constexpr int kPerBlock = 9;

// Parameter offsets within a block, in forward order (HF's names).
enum BlockParam { IN_NORM, WQ, WK, WV, WO, POST_NORM, WGATE, WUP, WDOWN };

struct BlockActs {
  const DeviceBuffer *ln1, *ln1_rstd, *q, *k, *v, *att, *atty, *mid, *ln2, *ln2_rstd, *gate, *up, *act;
};

struct BlockBuf {
  const char* name;
  int64_t numel;
  bool f32, shared;
};
std::vector<BlockBuf> block_bufs(const LlamaConfig& c, int64_t Bm, Recompute r) {
  const int64_t N = Bm * c.n_ctx, C = c.hidden_size, I = c.intermediate_size;
  const int64_t qw = c.num_attention_heads * c.head_dim, kw = c.num_key_value_heads * c.head_dim;
  const int64_t stats = Bm * c.num_attention_heads * c.n_ctx * 2;
  const bool blk = r == Recompute::Block, sel = r == Recompute::Selective || blk;
  return {{"ln1", N * C, false, blk},     {"ln1_rstd", N, true, blk}, {"q", N * qw, false, blk},
          {"k", N * kw, false, blk},      {"v", N * kw, false, blk},  {"att", stats, true, sel},
          {"atty", N * qw, false, sel},   {"mid", N * C, false, blk}, {"ln2", N * C, false, blk},
          {"ln2_rstd", N, true, blk},     {"gate", N * I, false, blk}, {"up", N * I, false, blk},
          {"act", N * I, false, sel}};
}

std::string block_buf_name(const BlockBuf& b, int64_t l) {
  return b.shared ? std::string("block.") + b.name : "layers." + std::to_string(l) + "." + b.name;
}

class Llama final : public TokenModel {
 public:
  Llama(const LlamaConfig& cfg, const ModelOptions& opt)
      : TokenModel(opt, "llama", cfg.vocab_size, cfg.n_ctx, cfg.hidden_size, cfg.num_hidden_layers), cfg_(cfg),
        qw_(cfg.num_attention_heads * cfg.head_dim), kw_(cfg.num_key_value_heads * cfg.head_dim) {
    const int64_t V = cfg.vocab_size, C = cfg.hidden_size, I = cfg.intermediate_size;
    const float std = cfg.init_std;
    head_w_ = add_param("model.embed_tokens.weight", {V, C}, 0, InitKind::Normal, std);
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      const std::string h = "model.layers." + std::to_string(l) + ".";
      const int u = static_cast<int>(l) + 1;
      add_param(h + "input_layernorm.weight", {C}, u, InitKind::Ones, 0.0f);
      add_param(h + "self_attn.q_proj.weight", {qw_, C}, u, InitKind::Normal, std);
      add_param(h + "self_attn.k_proj.weight", {kw_, C}, u, InitKind::Normal, std);
      add_param(h + "self_attn.v_proj.weight", {kw_, C}, u, InitKind::Normal, std);
      add_param(h + "self_attn.o_proj.weight", {C, qw_}, u, InitKind::Normal, std);
      add_param(h + "post_attention_layernorm.weight", {C}, u, InitKind::Ones, 0.0f);
      add_param(h + "mlp.gate_proj.weight", {I, C}, u, InitKind::Normal, std);
      add_param(h + "mlp.up_proj.weight", {I, C}, u, InitKind::Normal, std);
      add_param(h + "mlp.down_proj.weight", {C, I}, u, InitKind::Normal, std);
    }
    const int last = static_cast<int>(cfg.num_hidden_layers) + 1;
    norm_w_ = add_param("model.norm.weight", {C}, last, InitKind::Ones, 0.0f);
    if (!cfg.tie_word_embeddings) head_w_ = add_param("lm_head.weight", {V, C}, last, InitKind::Normal, std);
    if (!opt.plan_only) allocate();
  }

  std::string describe() const override {
    std::ostringstream s;
    s << "llama: vocab_size=" << cfg_.vocab_size << " hidden_size=" << cfg_.hidden_size
      << " intermediate_size=" << cfg_.intermediate_size << " num_hidden_layers=" << cfg_.num_hidden_layers
      << " num_attention_heads=" << cfg_.num_attention_heads << " num_key_value_heads=" << cfg_.num_key_value_heads
      << " head_dim=" << cfg_.head_dim << " n_ctx=" << cfg_.n_ctx
      << " tie_word_embeddings=" << (cfg_.tie_word_embeddings ? "true" : "false") << " params=" << num_params()
      << " recompute=" << recompute_name(opt_.recompute)
      << (model_detail::uses_host_checkpoints(opt_, cfg_.num_hidden_layers)
              ? " cpu_checkpointing=on (kept block inputs in host memory)" : "");
    return s.str();
  }
  std::vector<BufferSpec> buffer_plan() const override { return llama_buffer_plan(cfg_, opt_); }
  double flops_per_sample() const override { return llama_flops_per_sequence(cfg_, cfg_.n_ctx); }


 private:
  // Allocates exactly llama_buffer_plan's list (the memory prediction is its sum).
  void allocate() {
    TokenModel::allocate(llama_buffer_plan(cfg_, opt_));
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
      std::map<std::string, const DeviceBuffer*> m;
      for (const BlockBuf& b : block_bufs(cfg_, opt_.micro_batch, opt_.recompute)) m[b.name] = &buf(block_buf_name(b, l));
      blocks_.push_back({m["ln1"], m["ln1_rstd"], m["q"], m["k"], m["v"], m["att"], m["atty"], m["mid"], m["ln2"],
                         m["ln2_rstd"], m["gate"], m["up"], m["act"]});
    }
    lnf_rstd_ = &buf("lnf_rstd");
    rope_ = &buf("rope");
    proj_ = &buf("ws.proj");
    dres_ = &buf("ws.dres");
    dC_ = &buf("ws.dC");
    dq_ = &buf("ws.dq");
    dk_ = &buf("ws.dk");
    dv_ = &buf("ws.dv");
    dI_ = &buf("ws.dI");
    const std::vector<float> table = rope_table(cfg_.rope_theta, cfg_.head_dim, cfg_.n_ctx, cfg_.rope_scaling);
    dev_.memcpy_async(rope_->data(), table.data(), table.size() * sizeof(float), CopyKind::HostToDevice, stream_);
    stream_.synchronize();  // start-up only: table goes out of scope
  }

  int p(int layer, BlockParam k) const { return 1 + kPerBlock * layer + k; }
  float eps() const { return static_cast<float>(cfg_.rms_norm_eps); }
  TensorView table() const { return f32(*rope_, {cfg_.n_ctx, cfg_.head_dim}); }
  TensorView stats(const BlockActs& a) const { return f32(*a.att, {B_, cfg_.num_attention_heads, T_, 2}); }

  // y[N,out] = x[N,in]·Wᵀ (W stored [out, in], no bias).
  void linear(const TensorView& y, const TensorView& x, int w, int64_t in, int64_t out) {
    ops::linear_forward(stream_, y, TensorView{}, x, param(w), TensorView{}, N(), in, out, /*trans_w=*/true, false);
  }
  // dW += dyᵀ·x; dx[N,in] = dy·W, overwriting, or with accumulate dx += dy·W.
  void linear_back(const TensorView& dx, const TensorView& dy, const TensorView& x, int w, int64_t in, int64_t out,
                   bool accumulate = false) {
    ops::linear_backward(stream_, accumulate ? TensorView{} : dx, grad(w), TensorView{}, dy, x, param(w), TensorView{},
                         N(), in, out, /*trans_w=*/true);
    if (accumulate) ops::gemm(stream_, false, false, N(), in, out, 1.0f, dy, param(w), 1.0f, dx);
  }

  void embed_forward() override {
    ops::embedding_forward(stream_, act(*residual_[0], {N(), C_}), tokens_->as<int32_t>(), param(0), TensorView{}, B_,
                           T_, C_);
    after_residual_write(0);
  }
  void embed_backward() override {
    ops::embedding_backward(stream_, grad(0), TensorView{}, act(*dres_, {N(), C_}), tokens_->as<int32_t>(), B_, T_, C_);
  }

  void attention_core(const BlockActs& a) {
    const int64_t n = N();
    ops::attention_gqa_forward(stream_, act(*a.atty, {n, qw_}), stats(a), act(*a.q, {n, qw_}), act(*a.k, {n, kw_}),
                               act(*a.v, {n, kw_}), B_, T_, cfg_.num_attention_heads, cfg_.num_key_value_heads,
                               cfg_.head_dim, 0, 0);
  }
  void swiglu(const BlockActs& a) {
    const int64_t n = N(), I = cfg_.intermediate_size;
    ops::swiglu_forward(stream_, act(*a.act, {n, I}), act(*a.gate, {n, I}), act(*a.up, {n, I}));
  }

  // Block l's forward. recompute: refill the block's buffers for its backward (same ops, same
  // inputs, same order: the same bits), skipping down_proj and the residual add (not read).
  void block_forward(int l) override { run_block(l, /*recompute=*/false); }
  void run_block(int l, bool recompute) {
    const int64_t C = C_, n = N(), I = cfg_.intermediate_size, hs = cfg_.head_dim;
    const BlockActs& a = blocks_[l];
    TensorView x = act(*residual_[l], {n, C}), mid = act(*a.mid, {n, C}), proj = act(*proj_, {n, C});
    TensorView ln1 = act(*a.ln1, {n, C}), ln2 = act(*a.ln2, {n, C});
    TensorView q = act(*a.q, {n, qw_}), k = act(*a.k, {n, kw_});
    ops::rmsnorm_forward(stream_, ln1, f32(*a.ln1_rstd, {n}), x, param(p(l, IN_NORM)), eps());
    linear(q, ln1, p(l, WQ), C, qw_);
    linear(k, ln1, p(l, WK), C, kw_);
    linear(act(*a.v, {n, kw_}), ln1, p(l, WV), C, kw_);
    ops::rope_forward(stream_, q, table(), B_, T_, cfg_.num_attention_heads, hs, 0);
    ops::rope_forward(stream_, k, table(), B_, T_, cfg_.num_key_value_heads, hs, 0);
    attention_core(a);
    linear(proj, act(*a.atty, {n, qw_}), p(l, WO), qw_, C);
    ops::residual_add(stream_, mid, x, proj);
    ops::rmsnorm_forward(stream_, ln2, f32(*a.ln2_rstd, {n}), mid, param(p(l, POST_NORM)), eps());
    linear(act(*a.gate, {n, I}), ln2, p(l, WGATE), C, I);
    linear(act(*a.up, {n, I}), ln2, p(l, WUP), C, I);
    swiglu(a);
    if (recompute) return;
    linear(proj, act(*a.act, {n, I}), p(l, WDOWN), I, C);
    before_residual_write(l + 1);
    ops::residual_add(stream_, act(*residual_[l + 1], {n, C}), mid, proj);
    after_residual_write(l + 1);
  }

  // On entry dres = d residual[l+1]; on exit dres = d residual[l].
  void block_backward(int l) override {
    before_block_backward(l);
    const BlockActs& a = blocks_[l];
    if (opt_.recompute == Recompute::Block) {
      run_block(l, /*recompute=*/true);
    } else if (opt_.recompute == Recompute::Selective) {
      attention_core(a);
      swiglu(a);
    }
    const int64_t C = C_, n = N(), I = cfg_.intermediate_size, hs = cfg_.head_dim;
    const int64_t H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
    TensorView dres = act(*dres_, {n, C}), dC = act(*dC_, {n, C}), datty = act(*dC_, {n, qw_});
    TensorView gate = act(*a.gate, {n, I}), up = act(*a.up, {n, I}), dI = act(*dI_, {n, I});
    TensorView ln1 = act(*a.ln1, {n, C}), ln2 = act(*a.ln2, {n, C});
    TensorView q = act(*a.q, {n, qw_}), k = act(*a.k, {n, kw_}), v = act(*a.v, {n, kw_});
    TensorView dq = act(*dq_, {n, qw_}), dk = act(*dk_, {n, kw_}), dv = act(*dv_, {n, kw_});
    // MLP branch: residual[l+1] = mid + down(swiglu(gate(h2), up(h2))), h2 = rmsnorm(mid).
    linear_back(dI, dres, act(*a.act, {n, I}), p(l, WDOWN), I, C);
    ops::swiglu_backward(stream_, gate, up, dI, gate, up);  // gate, up := their gradients
    linear_back(dC, gate, ln2, p(l, WGATE), C, I);
    linear_back(dC, up, ln2, p(l, WUP), C, I, /*accumulate=*/true);
    ops::rmsnorm_backward(stream_, dres, grad(p(l, POST_NORM)), dC, act(*a.mid, {n, C}), param(p(l, POST_NORM)),
                          f32(*a.ln2_rstd, {n}));
    // Attention branch: mid = x + o(attn(rope(q(h)), rope(k(h)), v(h))), h = rmsnorm(x).
    linear_back(datty, dres, act(*a.atty, {n, qw_}), p(l, WO), qw_, C);
    ops::attention_gqa_backward(stream_, dq, dk, dv, datty, q, k, v, act(*a.atty, {n, qw_}), stats(a), B_, T_, H, Hkv,
                                hs, 0, 0);
    ops::rope_backward(stream_, dq, table(), B_, T_, H, hs, 0);
    ops::rope_backward(stream_, dk, table(), B_, T_, Hkv, hs, 0);
    linear_back(dC, dq, ln1, p(l, WQ), C, qw_);  // datty (the same buffer) is consumed
    linear_back(dC, dk, ln1, p(l, WK), C, kw_, /*accumulate=*/true);
    linear_back(dC, dv, ln1, p(l, WV), C, kw_, /*accumulate=*/true);
    ops::rmsnorm_backward(stream_, dres, grad(p(l, IN_NORM)), dC, act(*residual_[l], {n, C}), param(p(l, IN_NORM)),
                          f32(*a.ln1_rstd, {n}));
  }

  void head_forward() override {
    const int64_t n = N();
    ops::rmsnorm_forward(stream_, act(*lnf_, {n, C_}), f32(*lnf_rstd_, {n}),
                         act(*residual_[cfg_.num_hidden_layers], {n, C_}), param(norm_w_), eps());
    lm_head_forward();
  }

  // dres := d residual[L] (overwrites); the head weight's and model.norm's gradients +=.
  void head_backward(float dloss) override {
    const int64_t n = N();
    TensorView dC = act(*dC_, {n, C_}), dres = act(*dres_, {n, C_});
    lm_head_backward(dloss, dC);
    zero(dres);
    ops::rmsnorm_backward(stream_, dres, grad(norm_w_), dC, act(*residual_[cfg_.num_hidden_layers], {n, C_}),
                          param(norm_w_), f32(*lnf_rstd_, {n}));
  }

  LlamaConfig cfg_;
  int64_t qw_, kw_;  // H·hs, Hkv·hs
  int norm_w_ = -1;
  std::vector<BlockActs> blocks_;
  const DeviceBuffer *lnf_rstd_ = nullptr, *rope_ = nullptr;
  const DeviceBuffer *proj_ = nullptr, *dres_ = nullptr, *dC_ = nullptr, *dq_ = nullptr, *dk_ = nullptr,
                     *dv_ = nullptr, *dI_ = nullptr;
};

}  // namespace

std::vector<BufferSpec> llama_buffer_plan(const LlamaConfig& c, const ModelOptions& opt) {
  const int64_t Bm = opt.micro_batch, N = Bm * c.n_ctx, C = c.hidden_size, e = static_cast<int64_t>(dtype_size(opt.compute_dtype));
  const int64_t qw = c.num_attention_heads * c.head_dim, kw = c.num_key_value_heads * c.head_dim;
  const MemCategory A = MemCategory::Activations, W = MemCategory::Workspace;
  std::vector<BufferSpec> out = model_detail::ModelBase::base_buffers(N);
  model_detail::add_input_buffers(out, opt, c.n_ctx, C, c.num_hidden_layers);
  out.push_back({"rope", c.n_ctx * c.head_dim * 4, A});
  const std::vector<BlockBuf> bb = block_bufs(c, Bm, opt.recompute);
  for (const BlockBuf& b : bb)
    if (b.shared) out.push_back({block_buf_name(b, 0), b.numel * (b.f32 ? 4 : e), A});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (const BlockBuf& b : bb)
      if (!b.shared) out.push_back({block_buf_name(b, l), b.numel * (b.f32 ? 4 : e), A});
  model_detail::add_head_buffers(out, opt, c.n_ctx, C, c.vocab_size, /*with_mean=*/false);
  out.push_back({"ws.proj", N * C * e, W});
  out.push_back({"ws.dres", N * C * e, W});
  out.push_back({"ws.dC", N * std::max(C, qw) * e, W});
  out.push_back({"ws.dq", N * qw * e, W});
  out.push_back({"ws.dk", N * kw * e, W});
  out.push_back({"ws.dv", N * kw * e, W});
  out.push_back({"ws.dI", N * c.intermediate_size * e, W});
  return out;
}

double llama_flops_per_sequence(const LlamaConfig& c, int64_t T) {
  const double lookup = c.tie_word_embeddings ? 0.0 : static_cast<double>(c.vocab_size) * static_cast<double>(c.hidden_size);
  const double n = static_cast<double>(llama_num_params(c)) - lookup;
  const double per_token = 6.0 * n + 12.0 * static_cast<double>(c.num_hidden_layers) *
                                         static_cast<double>(c.num_attention_heads * c.head_dim) * static_cast<double>(T);
  return per_token * static_cast<double>(T);
}

std::unique_ptr<Model> make_llama(const LlamaConfig& cfg, const ModelOptions& opt) {
  return std::make_unique<Llama>(cfg, opt);
}

}  // namespace zt
