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

#include "host_checkpoints.h"
#include "model_base.h"
#include "zerotrain/kernels/ops.h"

namespace zt {
namespace {

using model_detail::ModelBase;
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

// cpu_checkpointing applies: recompute keeps block inputs and there is a block input to move.
bool host_checkpoints(const GptConfig& c, const ModelOptions& opt) {
  return opt.cpu_checkpointing && opt.recompute != Recompute::None && c.n_layer >= 2;
}
// The device buffer holding residual[l].
std::string residual_name(const GptConfig& c, const ModelOptions& opt, int64_t l) {
  return host_checkpoints(c, opt) ? "residual.slot" + std::to_string(l % 2) : "residual." + std::to_string(l);
}

class Gpt final : public ModelBase {
 public:
  Gpt(const GptConfig& cfg, const ModelOptions& opt)
      : ModelBase(opt, opt.micro_batch * cfg.n_ctx), cfg_(cfg), vocab_(gpt_vocab_layout(cfg, opt)) {
    const int64_t V = cfg.vocab_size, C = cfg.n_embd, L = cfg.n_layer;
    const float std = cfg.init_std;
    const float proj_std = std / std::sqrt(2.0f * static_cast<float>(L));
    add_param("wte.weight", {V, C}, 0, InitKind::Normal, std);
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

  ~Gpt() override { stream_.synchronize(); }  // enqueued work may still use the activations

  std::string describe() const override {
    std::ostringstream s;
    s << "gpt: vocab_size=" << cfg_.vocab_size << " n_ctx=" << cfg_.n_ctx << " n_layer=" << cfg_.n_layer
      << " n_head=" << cfg_.n_head << " n_embd=" << cfg_.n_embd << " params=" << num_params()
      << " attention=" << (cfg_.attention == AttentionKind::Tiled ? "tiled" : "materialised")
      << " recompute=" << recompute_name(opt_.recompute)
      << (host_checkpoints(cfg_, opt_) ? " cpu_checkpointing=on (kept block inputs in host memory)" : "");
    return s.str();
  }
  int num_units() const override { return static_cast<int>(cfg_.n_layer) + 2; }
  std::vector<BufferSpec> buffer_plan() const override { return gpt_buffer_plan(cfg_, opt_); }
  bool uses_side_stream() const override { return host_ckpt_ != nullptr; }
  int64_t hidden_size() const override { return cfg_.n_embd; }
  double flops_per_sample() const override { return gpt_flops_per_sequence(cfg_, cfg_.n_ctx); }

  std::vector<int> unit_params(int unit) const override {
    std::vector<int> out = Model::unit_params(unit);
    if (unit == num_units() - 1) out.insert(out.begin(), 0);  // tied wte
    return out;
  }

  void set_batch(const Batch& b) override {
    const std::string what = "batch for model gpt: ";
    if (b.B <= 0 || b.B > opt_.micro_batch)
      throw InputError(what + "B=" + std::to_string(b.B) + " must be in [1, micro_batch=" + std::to_string(opt_.micro_batch) + "]");
    if (b.T <= 0 || b.T > cfg_.n_ctx)
      throw InputError(what + "T=" + std::to_string(b.T) + " must be in [1, n_ctx=" + std::to_string(cfg_.n_ctx) + "]");
    const size_t n = static_cast<size_t>(b.B * b.T);
    if (b.inputs.size() != n || b.targets.size() != n)
      throw InputError(what + "inputs/targets must hold B*T=" + std::to_string(n) + " tokens, got " +
                       std::to_string(b.inputs.size()) + "/" + std::to_string(b.targets.size()));
    for (size_t i = 0; i < n; ++i) {
      if (b.inputs[i] < 0 || b.inputs[i] >= cfg_.vocab_size)
        throw InputError(what + "input token " + std::to_string(b.inputs[i]) + " at position " + std::to_string(i) +
                         " is outside the vocabulary [0, " + std::to_string(cfg_.vocab_size) + ")");
      if (b.targets[i] >= cfg_.vocab_size)
        throw InputError(what + "target token " + std::to_string(b.targets[i]) + " at position " + std::to_string(i) +
                         " is outside the vocabulary (negative targets are ignored)");
    }
    B_ = b.B;
    T_ = b.T;
    loss_divisor_ = count_targets(b.targets);
    upload({{tokens_->data(), b.inputs.data(), n * sizeof(int32_t)}, {targets_->data(), b.targets.data(), n * sizeof(int32_t)}});
  }

  void forward_unit(int unit) override {
    ZT_CHECK(B_ > 0, "forward_unit before set_batch");
    const int L = static_cast<int>(cfg_.n_layer);
    if (unit == 0) embed_forward();
    else if (unit <= L) block_forward(unit - 1);
    else if (unit == L + 1) head_forward();
    else ZT_CHECK(false, "forward_unit: bad unit " + std::to_string(unit));
  }

  void backward_unit(int unit, float dloss) override {
    ZT_CHECK(B_ > 0, "backward_unit before set_batch");
    const int L = static_cast<int>(cfg_.n_layer);
    if (unit == 0) embed_backward();
    else if (unit <= L) block_backward(unit - 1);
    else if (unit == L + 1) head_backward(dloss);
    else ZT_CHECK(false, "backward_unit: bad unit " + std::to_string(unit));
  }

  // The head's GEMM again, from lnf (which backward only reads) and the bound wte, into a
  // temporary: the logits buffer itself holds softmax − onehot after the forward.
  std::vector<float> forward_logits() override {
    ZT_CHECK(B_ > 0, "forward_logits before set_batch");
    const int64_t C = cfg_.n_embd, V = cfg_.vocab_size, n = N();
    DeviceBuffer out = alloc_act(n * V, MemCategory::Workspace);
    ops::gemm(stream_, false, true, n, V, C, 1.0f, act(*lnf_, {n, C}), param(0), 0.0f, act(out, {n, V}));
    std::vector<unsigned char> host(out.bytes());
    dev_.memcpy_async(host.data(), out.data(), host.size(), CopyKind::DeviceToHost, stream_);
    stream_.synchronize();
    std::vector<float> logits(static_cast<size_t>(n * V));
    convert(host.data(), dt_, logits.data(), DType::F32, logits.size());
    return logits;
  }

 private:
  // Allocates exactly gpt_buffer_plan's list (the memory prediction is its sum).
  void allocate() {
    const std::vector<BufferSpec> plan = gpt_buffer_plan(cfg_, opt_);
    const size_t from_base = ModelBase::base_buffers(0).size();  // listed first, allocated by ModelBase
    for (size_t i = from_base; i < plan.size(); ++i) {
      const size_t bytes = static_cast<size_t>(plan[i].bytes);
      bufs_[plan[i].name] = plan[i].category == MemCategory::HostActivations
                                ? dev_.alloc_host(bytes, plan[i].category, /*pinned=*/true, /*zero=*/false)
                                : dev_.alloc(bytes, plan[i].category);
    }
    tokens_ = &buf("tokens");
    targets_ = &buf("targets");
    for (int64_t l = 0; l <= cfg_.n_layer; ++l) residual_.push_back(&buf(residual_name(cfg_, opt_, l)));
    if (host_checkpoints(cfg_, opt_)) {
      std::vector<const DeviceBuffer*> host;
      for (int64_t l = 0; l + 1 < cfg_.n_layer; ++l) host.push_back(&buf("host.residual." + std::to_string(l)));
      host_ckpt_ = std::make_unique<model_detail::HostCheckpoints>(dev_, stream_, residual_, std::move(host));
    }
    for (int64_t l = 0; l < cfg_.n_layer; ++l) {
      std::map<std::string, const DeviceBuffer*> m;
      for (const BlockBuf& b : block_bufs(cfg_, opt_.micro_batch, opt_.recompute)) m[b.name] = &buf(block_buf_name(b, l));
      blocks_.push_back({m["ln1"], m["ln1_mean"], m["ln1_rstd"], m["qkv"], m["att"], m["atty"], m["mid"], m["ln2"],
                         m["ln2_mean"], m["ln2_rstd"], m["fc"], m["fc_gelu"]});
    }
    lnf_ = &buf("lnf");
    lnf_mean_ = &buf("lnf_mean");
    lnf_rstd_ = &buf("lnf_rstd");
    logits_ = &buf("logits");
    losses_ = &buf("losses");
    proj_ = &buf("ws.proj");
    dres_ = &buf("ws.dres");
    dC_ = &buf("ws.dC");
    dqkv_ = &buf("ws.dqkv");
    d4b_ = &buf("ws.d4b");
    if (cfg_.attention == AttentionKind::Materialised) datt_ = &buf("ws.datt");
  }
  const DeviceBuffer& buf(const std::string& name) const {
    auto it = bufs_.find(name);
    ZT_CHECK(it != bufs_.end(), "gpt: no buffer " + name);
    return it->second;
  }

  int p(int layer, BlockParam k) const { return 2 + kPerBlock * layer + k; }
  int64_t N() const { return B_ * T_; }
  size_t residual_bytes() const { return static_cast<size_t>(N() * cfg_.n_embd) * dtype_size(dt_); }

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

  void embed_forward() {
    const int64_t C = cfg_.n_embd;
    ops::embedding_forward(stream_, act(*residual_[0], {N(), C}), tokens_->as<int32_t>(), param(0), param(1), B_, T_, C);
    if (host_ckpt_) host_ckpt_->after_write(0, residual_bytes());
  }
  void embed_backward() {
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
  void block_forward(int l, bool recompute = false) {
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
    if (host_ckpt_) host_ckpt_->before_write(l + 1);
    ops::residual_add(stream_, act(*residual_[l + 1], {n, C}), mid, proj);
    if (host_ckpt_) host_ckpt_->after_write(l + 1, residual_bytes());
  }

  // Before block l's backward: what recompute dropped is recomputed from what was kept.
  void recompute_block(int l) {
    const int64_t C = cfg_.n_embd, n = N();
    const BlockActs& a = blocks_[l];
    if (opt_.recompute == Recompute::Block) {
      block_forward(l, /*recompute=*/true);
    } else if (opt_.recompute == Recompute::Selective) {
      attention_core(a);
      ops::gelu_forward(stream_, act(*a.fc_gelu, {n, 4 * C}), act(*a.fc, {n, 4 * C}));
    }
  }

  // On entry dres = d residual[l+1]; on exit dres = d residual[l].
  void block_backward(int l) {
    if (host_ckpt_) {
      host_ckpt_->prefetch(l, residual_bytes());  // residual[l-1], one block ahead
      host_ckpt_->before_read(l);
    }
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
    zero(dqkv);
    if (cfg_.attention == AttentionKind::Tiled)
      ops::attention_tiled_backward(stream_, dqkv, dC, act(*a.qkv, {n, 3 * C}), act(*a.atty, {n, C}),
                                    stats_view(*a.att), B_, T_, C, cfg_.n_head, 0, 0);
    else
      ops::attention_backward(stream_, dqkv, att_view(*datt_), dC, act(*a.qkv, {n, 3 * C}), att_view(*a.att), B_, T_,
                              C, cfg_.n_head);
    linear_backward(dC, dqkv, act(*a.ln1, {n, C}), p(l, ATTN_W), p(l, ATTN_B), C, 3 * C);
    ops::layernorm_backward(stream_, dres, grad(p(l, LN1_W)), grad(p(l, LN1_B)), dC, act(*residual_[l], {n, C}),
                            param(p(l, LN1_W)), f32(*a.ln1_mean, {n}), f32(*a.ln1_rstd, {n}));
  }

  void head_forward() {
    const int64_t C = cfg_.n_embd, V = cfg_.vocab_size, Vp = vocab_.Vp, n = N();
    const int L = static_cast<int>(cfg_.n_layer);
    TensorView lnf = act(*lnf_, {n, C}), logits = act(*logits_, {n, Vp});
    ops::layernorm_forward(stream_, lnf, f32(*lnf_mean_, {n}), f32(*lnf_rstd_, {n}), act(*residual_[L], {n, C}),
                           param(lnf_w_), param(lnf_b_), kLnEps);
    // logits become softmax − onehot in place (dloss 1); the real dloss/N is applied in backward.
    if (!vocab_.padded()) {
      ops::gemm(stream_, false, true, n, V, C, 1.0f, lnf, param(0), 0.0f, logits);
      ops::softmax_cross_entropy(stream_, f32(*losses_, {n}), logits, logits, targets_->as<int32_t>(), 1.0f);
    } else {  // rows Vp apart, the GEMM and the loss over the V real columns only
      ops::gemm_ld(stream_, false, true, n, V, C, 1.0f, lnf, C, param(0), C, 0.0f, logits, Vp);
      ops::softmax_cross_entropy_ld(stream_, f32(*losses_, {n}), logits, logits, targets_->as<int32_t>(), 1.0f, V, Vp);
    }
    mean_loss(f32(*losses_, {n}), n);
  }

  // dres := d residual[L] (overwrites); dwte += head part; ln_f grads +=.
  void head_backward(float dloss) {
    const int64_t C = cfg_.n_embd, V = cfg_.vocab_size, n = N();
    const int L = static_cast<int>(cfg_.n_layer);
    const float alpha = dloss / loss_divisor();  // mean over the non-ignored positions
    const int64_t Vp = vocab_.Vp;
    TensorView dlogits = act(*logits_, {n, Vp}), dC = act(*dC_, {n, C}), dres = act(*dres_, {n, C});
    if (!vocab_.padded()) {
      ops::gemm(stream_, true, false, V, C, n, alpha, dlogits, act(*lnf_, {n, C}), 1.0f, grad(0));
      ops::gemm(stream_, false, false, n, C, V, alpha, dlogits, param(0), 0.0f, dC);
    } else {  // dlogits rows are Vp apart; the padding columns are never read
      ops::gemm_ld(stream_, true, false, V, C, n, alpha, dlogits, Vp, act(*lnf_, {n, C}), C, 1.0f, grad(0), C);
      ops::gemm_ld(stream_, false, false, n, C, V, alpha, dlogits, Vp, param(0), C, 0.0f, dC, C);
    }
    zero(dres);
    ops::layernorm_backward(stream_, dres, grad(lnf_w_), grad(lnf_b_), dC, act(*residual_[L], {n, C}), param(lnf_w_),
                            f32(*lnf_mean_, {n}), f32(*lnf_rstd_, {n}));
  }

  TensorView stats_view(const DeviceBuffer& b) const { return f32(b, {B_, cfg_.n_head, T_, 2}); }
  TensorView att_view(const DeviceBuffer& b) const { return f32(b, {B_, cfg_.n_head, T_, T_}); }

  GptConfig cfg_;
  VocabLayout vocab_;  // logits rows: V real columns of Vp stored (gpt_vocab_layout)
  int lnf_w_ = -1, lnf_b_ = -1;
  int64_t B_ = 0, T_ = 0;  // shape of the current batch (set_batch)
  std::map<std::string, DeviceBuffer> bufs_;  // every buffer, by gpt_buffer_plan name
  const DeviceBuffer *tokens_ = nullptr, *targets_ = nullptr;  // int32 [B,T] on the device
  std::vector<const DeviceBuffer*> residual_;
  std::vector<BlockActs> blocks_;
  const DeviceBuffer *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *logits_ = nullptr, *losses_ = nullptr;
  const DeviceBuffer *proj_ = nullptr, *dres_ = nullptr, *dC_ = nullptr, *dqkv_ = nullptr,
                     *d4b_ = nullptr, *datt_ = nullptr;
  // cpu_checkpointing; declared after bufs_, so it drains its copy stream before they are freed.
  std::unique_ptr<model_detail::HostCheckpoints> host_ckpt_;
};

}  // namespace

VocabLayout gpt_vocab_layout(const GptConfig& c, const ModelOptions& opt) {
  const int64_t m = opt.vocab_pad > 0 ? opt.vocab_pad : default_vocab_pad(opt.device ? opt.device->kind() : DeviceKind::CPU);
  return vocab_layout(c.vocab_size, m);
}

std::vector<BufferSpec> gpt_buffer_plan(const GptConfig& c, const ModelOptions& opt) {
  const int64_t Bm = opt.micro_batch, N = Bm * c.n_ctx, C = c.n_embd, e = static_cast<int64_t>(dtype_size(opt.compute_dtype));
  const MemCategory A = MemCategory::Activations, W = MemCategory::Workspace;
  std::vector<BufferSpec> out = model_detail::ModelBase::base_buffers(N);
  out.push_back({"tokens", N * 4, A});
  out.push_back({"targets", N * 4, A});
  if (host_checkpoints(c, opt)) {  // two device slots; the inputs of blocks 0..L-2 in host memory
    for (int64_t l = 0; l < 2; ++l) out.push_back({residual_name(c, opt, l), N * C * e, A});
    for (int64_t l = 0; l + 1 < c.n_layer; ++l)
      out.push_back({"host.residual." + std::to_string(l), N * C * e, MemCategory::HostActivations});
  } else {
    for (int64_t l = 0; l <= c.n_layer; ++l) out.push_back({residual_name(c, opt, l), N * C * e, A});
  }
  const std::vector<BlockBuf> bb = block_bufs(c, Bm, opt.recompute);
  for (const BlockBuf& b : bb)
    if (b.shared) out.push_back({block_buf_name(b, 0), b.numel * (b.f32 ? 4 : e), A});
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (const BlockBuf& b : bb)
      if (!b.shared) out.push_back({block_buf_name(b, l), b.numel * (b.f32 ? 4 : e), A});
  out.push_back({"lnf", N * C * e, A});
  out.push_back({"lnf_mean", N * 4, A});
  out.push_back({"lnf_rstd", N * 4, A});
  out.push_back({"logits", N * gpt_vocab_layout(c, opt).Vp * e, A});  // padded rows (vocab_pad.h)
  out.push_back({"losses", N * 4, A});
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
