// gpt.cpp — GPT-2 forward/backward over zt::ops (see gpt.h).
//
// Activations (model-owned, sized for micro_batch × n_ctx; N = B·T rows of the current batch),
// listed with their sizes by gpt_buffer_plan (the allocation and the memory prediction):
//   residual[l]  [N,C]    input of block l; residual[L] feeds ln_f
//   per block:   ln1, ln2 [N,C] + fp32 mean/rstd [N]; qkv [N,3C]; att: tiled attention's
//                statistics [B,H,T,2] fp32, or the materialised softmax [B,H,T,T] fp32;
//                atty [N,C] (attention output before c_proj); mid [N,C] (residual after attn);
//                fc [N,4C] (pre-GELU), fc_gelu [N,4C]
//   recompute:   Block keeps only residual[l] per block and one shared set of the block buffers
//                above, refilled by recomputing block l's forward before its backward; Selective
//                shares att, atty and fc_gelu (recomputed from qkv and fc) and keeps the rest.
//   cpu_checkpointing (with recompute): residual[l] aliases one of two device slots, l % 2, and
//                residual[0..L-2] live in host memory (host.residual.l) between forward and
//                backward (host_checkpoints.h: the copy stream, the slots and their events).
//   head:        lnf [N,C] + mean/rstd; logits [N,Vp] (rows padded to Vp >= V, vocab_pad.h: only the
//                V real columns are computed or read), which the forward overwrites in place with
//                softmax − onehot (the unit-dloss logit gradient) after computing losses [N].
// The head backward scales by dloss/N_t inside the gemms (alpha; N_t = positions whose target is not
// ignored: PyTorch's mean), so backward is repeatable and fp16 never stores the tiny scaled gradient.
// Workspace (not saved between units): proj [N,C] (c_proj outputs), dres [N,C] (gradient of the
// residual stream, carried from unit to unit in backward), dC [N,C], dqkv [N,3C], d4b [N,4C]
// (the MLP's pre-activation gradient: c_proj's backward writes it fused with the GELU backward),
// and with the materialised attention datt [B,H,T,T] fp32.
#include "zerotrain/model/gpt.h"

#include <cmath>
#include <map>
#include <memory>
#include <sstream>

#include "token_model.h"
#include "zerotrain/kernels/ops.h"

namespace zt {
namespace {

using model_detail::TokenModel;
constexpr float kLnEps = 1e-5f;
constexpr int kPerBlock = 12;

// Parameter offsets within a block, in forward order.
enum BlockParam { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

// One block's buffers (owned by Gpt::bufs_; shared between blocks under recompute).
struct BlockActs {
  const DeviceBuffer *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *mid, *ln2, *ln2_mean, *ln2_rstd, *fc, *fc_gelu;
};

// Block buffer names and element counts (fp32 or compute dtype); `shared` when recompute shares it.
struct BlockBuf {
  const char* name;
  int64_t numel;
  bool f32, shared;
};
std::vector<BlockBuf> block_bufs(const GptConfig& c, int64_t Bm, Recompute r) {
  const int64_t N = Bm * c.n_ctx, C = c.n_embd;
  const int64_t att = c.attention == AttentionKind::Tiled ? Bm * c.n_head * c.n_ctx * 2 : Bm * c.n_head * c.n_ctx * c.n_ctx;
  const bool blk = r == Recompute::Block, sel = r == Recompute::Selective || blk;
  return {{"ln1", N * C, false, blk},     {"ln1_mean", N, true, blk}, {"ln1_rstd", N, true, blk},
          {"qkv", 3 * N * C, false, blk}, {"att", att, true, sel},    {"atty", N * C, false, sel},
          {"mid", N * C, false, blk},     {"ln2", N * C, false, blk}, {"ln2_mean", N, true, blk},
          {"ln2_rstd", N, true, blk},     {"fc", 4 * N * C, false, blk}, {"fc_gelu", 4 * N * C, false, sel}};
}

std::string block_buf_name(const BlockBuf& b, int64_t l) {
  return b.shared ? std::string("block.") + b.name : "h." + std::to_string(l) + "." + b.name;
}

class Gpt final : public TokenModel {
 public:
  Gpt(const GptConfig& cfg, const ModelOptions& opt)
      : TokenModel(opt, "gpt", cfg.vocab_size, cfg.n_ctx, cfg.n_embd, cfg.n_layer), cfg_(cfg) {
    const int64_t V = cfg.vocab_size, C = cfg.n_embd, L = cfg.n_layer;
    const float std = cfg.init_std;
    const float proj_std = std / std::sqrt(2.0f * static_cast<float>(L));
    head_w_ = add_param("wte.weight", {V, C}, 0, InitKind::Normal, std);  // tied: the head's weight
    add_param("wpe.weight", {cfg.n_ctx, C}, 0, InitKind::Normal, std);
    for (int64_t l = 0; l < L; ++l) {
      const std::string h = "h." + std::to_string(l) + ".";
      const int u = static_cast<int>(l) + 1;
      add_param(h + "ln_1.weight", {C}, u, InitKind::Ones, 0.0f);
      add_param(h + "ln_1.bias", {C}, u, InitKind::Zeros, 0.0f);
      add_param(h + "attn.c_attn.weight", {C, 3 * C}, u, InitKind::Normal, std);
      add_param(h + "attn.c_attn.bias", {3 * C}, u, InitKind::Zeros, 0.0f);
      add_param(h + "attn.c_proj.weight", {C, C}, u, InitKind::Normal, proj_std);
      add_param(h + "attn.c_proj.bias", {C}, u, InitKind::Zeros, 0.0f);
      add_param(h + "ln_2.weight", {C}, u, InitKind::Ones, 0.0f);
      add_param(h + "ln_2.bias", {C}, u, InitKind::Zeros, 0.0f);
      add_param(h + "mlp.c_fc.weight", {C, 4 * C}, u, InitKind::Normal, std);
      add_param(h + "mlp.c_fc.bias", {4 * C}, u, InitKind::Zeros, 0.0f);
      add_param(h + "mlp.c_proj.weight", {4 * C, C}, u, InitKind::Normal, proj_std);
      add_param(h + "mlp.c_proj.bias", {C}, u, InitKind::Zeros, 0.0f);
    }
    lnf_w_ = add_param("ln_f.weight", {C}, static_cast<int>(L) + 1, InitKind::Ones, 0.0f);
    lnf_b_ = add_param("ln_f.bias", {C}, static_cast<int>(L) + 1, InitKind::Zeros, 0.0f);
    if (!opt.plan_only) allocate();
  }

  std::string describe() const override {
    std::ostringstream s;
    s << "gpt: vocab_size=" << cfg_.vocab_size << " n_ctx=" << cfg_.n_ctx << " n_layer=" << cfg_.n_layer
      << " n_head=" << cfg_.n_head << " n_embd=" << cfg_.n_embd << " params=" << num_params()
      << " attention=" << (cfg_.attention == AttentionKind::Tiled ? "tiled" : "materialised")
      << " recompute=" << recompute_name(opt_.recompute)
      << (model_detail::uses_host_checkpoints(opt_, cfg_.n_layer) ? " cpu_checkpointing=on (kept block inputs in host memory)" : "");
    return s.str();
  }
  std::vector<BufferSpec> buffer_plan() const override { return gpt_buffer_plan(cfg_, opt_); }
  double flops_per_sample() const override { return gpt_flops_per_sequence(cfg_, cfg_.n_ctx); }

 private:
  // Allocates exactly gpt_buffer_plan's list (the memory prediction is its sum).
  void allocate() {
    TokenModel::allocate(gpt_buffer_plan(cfg_, opt_));
    for (int64_t l = 0; l < cfg_.n_layer; ++l) {
      std::map<std::string, const DeviceBuffer*> m;
      for (const BlockBuf& b : block_bufs(cfg_, opt_.micro_batch, opt_.recompute)) m[b.name] = &buf(block_buf_name(b, l));
      blocks_.push_back({m["ln1"], m["ln1_mean"], m["ln1_rstd"], m["qkv"], m["att"], m["atty"], m["mid"], m["ln2"],
                         m["ln2_mean"], m["ln2_rstd"], m["fc"], m["fc_gelu"]});
    }
    lnf_mean_ = &buf("lnf_mean");
    lnf_rstd_ = &buf("lnf_rstd");
    proj_ = &buf("ws.proj");
    dres_ = &buf("ws.dres");
    dC_ = &buf("ws.dC");
    dqkv_ = &buf("ws.dqkv");
    d4b_ = &buf("ws.d4b");
    if (cfg_.attention == AttentionKind::Materialised) datt_ = &buf("ws.datt");
  }
  int p(int layer, BlockParam k) const { return 2 + kPerBlock * layer + k; }

  // y[N,out] = x[N,in]·W[in,out] + b (Conv1D layout), one fused op. With gelu_out: y is the
  // pre-activation (saved for backward) and gelu_out[N,out] = gelu(y).
  void linear_forward(const TensorView& y, const TensorView& x, int w, int b, int64_t in, int64_t out,
                      const TensorView& gelu_out = TensorView{}) {
    const bool gelu = gelu_out.data != nullptr;
    ops::linear_forward(stream_, gelu ? gelu_out : y, gelu ? y : TensorView{}, x, param(w), param(b), N(), in, out,
                        /*trans_w=*/false, gelu);
  }
  // dW[in,out] += xᵀ·dy; db += Σ rows dy; dx[N,in] = dy·Wᵀ (overwrites), or, when x was
  // gelu(gelu_pre), dx = (dy·Wᵀ) ⊙ gelu'(gelu_pre) = d gelu_pre (overwrites). One fused op.
  void linear_backward(const TensorView& dx, const TensorView& dy, const TensorView& x, int w, int b, int64_t in,
                       int64_t out, const TensorView& gelu_pre = TensorView{}) {
    ops::linear_backward(stream_, dx, grad(w), grad(b), dy, x, param(w), gelu_pre, N(), in, out, /*trans_w=*/false);
  }

  void embed_forward() override {
    const int64_t C = cfg_.n_embd;
    ops::embedding_forward(stream_, act(*residual_[0], {N(), C}), tokens_->as<int32_t>(), param(0), param(1), B_, T_, C);
    after_residual_write(0);
  }
  void embed_backward() override {
    const int64_t C = cfg_.n_embd;
    ops::embedding_backward(stream_, grad(0), grad(1), act(*dres_, {N(), C}), tokens_->as<int32_t>(), B_, T_, C);
  }

  // atty (and att: statistics or probabilities) from qkv.
  void attention_core(const BlockActs& a) {
    const int64_t C = cfg_.n_embd, n = N();
    if (cfg_.attention == AttentionKind::Tiled)
      ops::attention_tiled_forward(stream_, act(*a.atty, {n, C}), stats_view(*a.att), act(*a.qkv, {n, 3 * C}), B_, T_,
                                   C, cfg_.n_head, 0, 0);
    else
      ops::attention_forward(stream_, act(*a.atty, {n, C}), att_view(*a.att), act(*a.qkv, {n, 3 * C}), B_, T_, C,
                             cfg_.n_head);
  }

  // Block l's forward. recompute: refill the block's buffers for its backward (same ops, same
  // inputs, same order as the forward: the same bits) and skip the MLP's c_proj and the final
  // residual add, whose outputs backward does not read.
  void block_forward(int l) override { run_block(l, /*recompute=*/false); }
  void run_block(int l, bool recompute) {
    const int64_t C = cfg_.n_embd, n = N();
    const BlockActs& a = blocks_[l];
    TensorView x = act(*residual_[l], {n, C}), mid = act(*a.mid, {n, C}), proj = act(*proj_, {n, C});
    ops::layernorm_forward(stream_, act(*a.ln1, {n, C}), f32(*a.ln1_mean, {n}), f32(*a.ln1_rstd, {n}), x,
                           param(p(l, LN1_W)), param(p(l, LN1_B)), kLnEps);
    linear_forward(act(*a.qkv, {n, 3 * C}), act(*a.ln1, {n, C}), p(l, ATTN_W), p(l, ATTN_B), C, 3 * C);
    attention_core(a);
    linear_forward(proj, act(*a.atty, {n, C}), p(l, APROJ_W), p(l, APROJ_B), C, C);
    ops::residual_add(stream_, mid, x, proj);
    ops::layernorm_forward(stream_, act(*a.ln2, {n, C}), f32(*a.ln2_mean, {n}), f32(*a.ln2_rstd, {n}), mid,
                           param(p(l, LN2_W)), param(p(l, LN2_B)), kLnEps);
    linear_forward(act(*a.fc, {n, 4 * C}), act(*a.ln2, {n, C}), p(l, FC_W), p(l, FC_B), C, 4 * C,
                   act(*a.fc_gelu, {n, 4 * C}));
    if (recompute) return;
    linear_forward(proj, act(*a.fc_gelu, {n, 4 * C}), p(l, FPROJ_W), p(l, FPROJ_B), 4 * C, C);
    before_residual_write(l + 1);
    ops::residual_add(stream_, act(*residual_[l + 1], {n, C}), mid, proj);
    after_residual_write(l + 1);
  }

  // Before block l's backward: what recompute dropped is recomputed from what was kept.
  void recompute_block(int l) {
    const int64_t C = cfg_.n_embd, n = N();
    const BlockActs& a = blocks_[l];
    if (opt_.recompute == Recompute::Block) {
      run_block(l, /*recompute=*/true);
    } else if (opt_.recompute == Recompute::Selective) {
      attention_core(a);
      ops::gelu_forward(stream_, act(*a.fc_gelu, {n, 4 * C}), act(*a.fc, {n, 4 * C}));
    }
  }

  // On entry dres = d residual[l+1]; on exit dres = d residual[l].
  void block_backward(int l) override {
    before_block_backward(l);
    recompute_block(l);
    const int64_t C = cfg_.n_embd, n = N();
    const BlockActs& a = blocks_[l];
    TensorView dres = act(*dres_, {n, C}), dC = act(*dC_, {n, C});
    TensorView d4b = act(*d4b_, {n, 4 * C}), dqkv = act(*dqkv_, {n, 3 * C});
    // MLP branch: residual[l+1] = mid + c_proj(gelu(c_fc(ln_2(mid)))).
    // c_proj's dx fused with the GELU backward: d4b = d fc (the pre-activation's gradient).
    linear_backward(d4b, dres, act(*a.fc_gelu, {n, 4 * C}), p(l, FPROJ_W), p(l, FPROJ_B), 4 * C, C,
                    act(*a.fc, {n, 4 * C}));
    linear_backward(dC, d4b, act(*a.ln2, {n, C}), p(l, FC_W), p(l, FC_B), C, 4 * C);
    ops::layernorm_backward(stream_, dres, grad(p(l, LN2_W)), grad(p(l, LN2_B)), dC, act(*a.mid, {n, C}),
                            param(p(l, LN2_W)), f32(*a.ln2_mean, {n}), f32(*a.ln2_rstd, {n}));
    // Attention branch: mid = residual[l] + c_proj(attn(c_attn(ln_1(residual[l])))).
    linear_backward(dC, dres, act(*a.atty, {n, C}), p(l, APROJ_W), p(l, APROJ_B), C, C);
    if (cfg_.attention == AttentionKind::Tiled) {  // overwrites dqkv
      ops::attention_tiled_backward(stream_, dqkv, dC, act(*a.qkv, {n, 3 * C}), act(*a.atty, {n, C}),
                                    stats_view(*a.att), B_, T_, C, cfg_.n_head, 0, 0);
    } else {  // adds into dqkv
      zero(dqkv);
      ops::attention_backward(stream_, dqkv, att_view(*datt_), dC, act(*a.qkv, {n, 3 * C}), att_view(*a.att), B_, T_,
                              C, cfg_.n_head);
    }
    linear_backward(dC, dqkv, act(*a.ln1, {n, C}), p(l, ATTN_W), p(l, ATTN_B), C, 3 * C);
    ops::layernorm_backward(stream_, dres, grad(p(l, LN1_W)), grad(p(l, LN1_B)), dC, act(*residual_[l], {n, C}),
                            param(p(l, LN1_W)), f32(*a.ln1_mean, {n}), f32(*a.ln1_rstd, {n}));
  }

  void head_forward() override {
    const int64_t C = cfg_.n_embd, n = N();
    const int L = static_cast<int>(cfg_.n_layer);
    ops::layernorm_forward(stream_, act(*lnf_, {n, C}), f32(*lnf_mean_, {n}), f32(*lnf_rstd_, {n}), act(*residual_[L], {n, C}),
                           param(lnf_w_), param(lnf_b_), kLnEps);
    lm_head_forward();
  }

  // dres := d residual[L] (overwrites); dwte += head part; ln_f grads +=.
  void head_backward(float dloss) override {
    const int64_t C = cfg_.n_embd, n = N();
    const int L = static_cast<int>(cfg_.n_layer);
    TensorView dC = act(*dC_, {n, C}), dres = act(*dres_, {n, C});
    lm_head_backward(dloss, dC);
    zero(dres);
    ops::layernorm_backward(stream_, dres, grad(lnf_w_), grad(lnf_b_), dC, act(*residual_[L], {n, C}), param(lnf_w_),
                            f32(*lnf_mean_, {n}), f32(*lnf_rstd_, {n}));
  }

  TensorView stats_view(const DeviceBuffer& b) const { return f32(b, {B_, cfg_.n_head, T_, 2}); }
  TensorView att_view(const DeviceBuffer& b) const { return f32(b, {B_, cfg_.n_head, T_, T_}); }

  GptConfig cfg_;
  int lnf_w_ = -1, lnf_b_ = -1;
  std::vector<BlockActs> blocks_;
  const DeviceBuffer *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  const DeviceBuffer *proj_ = nullptr, *dres_ = nullptr, *dC_ = nullptr, *dqkv_ = nullptr,
                     *d4b_ = nullptr, *datt_ = nullptr;
};

}  // namespace

VocabLayout gpt_vocab_layout(const GptConfig& c, const ModelOptions& opt) {
  return model_detail::token_vocab_layout(c.vocab_size, opt);
}

std::vector<BufferSpec> gpt_buffer_plan(const GptConfig& c, const ModelOptions& opt) {
  const int64_t Bm = opt.micro_batch, N = Bm * c.n_ctx, C = c.n_embd, e = static_cast<int64_t>(dtype_size(opt.compute_dtype));
  const MemCategory A = MemCategory::Activations, W = MemCategory::Workspace;
  std::vector<BufferSpec> out = model_detail::ModelBase::base_buffers(N);
  model_detail::add_input_buffers(out, opt, c.n_ctx, C, c.n_layer);
  const std::vector<BlockBuf> bb = block_bufs(c, Bm, opt.recompute);
  for (const BlockBuf& b : bb)
    if (b.shared) out.push_back({block_buf_name(b, 0), b.numel * (b.f32 ? 4 : e), A});
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (const BlockBuf& b : bb)
      if (!b.shared) out.push_back({block_buf_name(b, l), b.numel * (b.f32 ? 4 : e), A});
  model_detail::add_head_buffers(out, opt, c.n_ctx, C, c.vocab_size, /*with_mean=*/true);
  for (const char* w : {"ws.proj", "ws.dres", "ws.dC"}) out.push_back({w, N * C * e, W});
  out.push_back({"ws.dqkv", 3 * N * C * e, W});
  out.push_back({"ws.d4b", 4 * N * C * e, W});
  if (c.attention == AttentionKind::Materialised) out.push_back({"ws.datt", Bm * c.n_head * c.n_ctx * c.n_ctx * 4, W});
  return out;
}

int64_t gpt_num_params(const GptConfig& c) {
  const int64_t C = c.n_embd;
  const int64_t block = 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * 4 * C + 4 * C) + (4 * C * C + C);
  return c.vocab_size * C + c.n_ctx * C + c.n_layer * block + 2 * C;
}

double gpt_flops_per_sequence(const GptConfig& c, int64_t T) {
  const double n = static_cast<double>(gpt_num_params(c));
  const double per_token = 6.0 * n + 12.0 * c.n_layer * c.n_embd * static_cast<double>(T);
  return per_token * static_cast<double>(T);
}

std::unique_ptr<Model> make_gpt(const GptConfig& cfg, const ModelOptions& opt) { return std::make_unique<Gpt>(cfg, opt); }

}  // namespace zt
