// gpt.cpp — GPT-2 forward/backward over zt::ops (see gpt.h).
//
// Activations (model-owned, sized for micro_batch × n_ctx; N = B·T rows of the current batch):
//   residual[l]  [N,C]    input of block l; residual[L] feeds ln_f
//   per block:   ln1, ln2 [N,C] + fp32 mean/rstd [N]; qkv [N,3C]; att [B,H,T,T] fp32 (softmax);
//                atty [N,C] (attention output before c_proj); mid [N,C] (residual after attn);
//                fc [N,4C] (pre-GELU), fc_gelu [N,4C]
//   head:        lnf [N,C] + mean/rstd; logits [N,V], which the forward overwrites in place with
//                softmax − onehot (the unit-dloss logit gradient) after computing losses [N].
// The head backward scales by dloss/N_t inside the gemms (alpha; N_t = positions whose target is not
// ignored: PyTorch's mean), so backward is repeatable and fp16 never stores the tiny scaled gradient.
// Workspace (not saved between units): proj [N,C] (c_proj outputs), dres [N,C] (gradient of the
// residual stream, carried from unit to unit in backward), dC [N,C], dqkv [N,3C], d4a/d4b [N,4C],
// datt [B,H,T,T] fp32.
#include "zerotrain/model/gpt.h"

#include <cmath>
#include <sstream>

#include "model_base.h"
#include "zerotrain/kernels/ops.h"

namespace zt {
namespace {

using model_detail::ModelBase;
constexpr float kLnEps = 1e-5f;
constexpr int kPerBlock = 12;

// Parameter offsets within a block, in forward order.
enum BlockParam { LN1_W, LN1_B, ATTN_W, ATTN_B, APROJ_W, APROJ_B, LN2_W, LN2_B, FC_W, FC_B, FPROJ_W, FPROJ_B };

struct BlockActs {
  DeviceBuffer ln1, ln1_mean, ln1_rstd, qkv, att, atty, mid, ln2, ln2_mean, ln2_rstd, fc, fc_gelu;
};

class Gpt final : public ModelBase {
 public:
  Gpt(const GptConfig& cfg, const ModelOptions& opt)
      : ModelBase(opt, opt.micro_batch * cfg.n_ctx), cfg_(cfg) {
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
    allocate();
  }

  ~Gpt() override { stream_.synchronize(); }  // enqueued work may still use the activations

  std::string describe() const override {
    std::ostringstream s;
    s << "gpt: vocab_size=" << cfg_.vocab_size << " n_ctx=" << cfg_.n_ctx << " n_layer=" << cfg_.n_layer
      << " n_head=" << cfg_.n_head << " n_embd=" << cfg_.n_embd << " params=" << num_params();
    return s.str();
  }
  int num_units() const override { return static_cast<int>(cfg_.n_layer) + 2; }
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
    upload({{tokens_.data(), b.inputs.data(), n * sizeof(int32_t)}, {targets_.data(), b.targets.data(), n * sizeof(int32_t)}});
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

 private:
  void allocate() {
    const int64_t Nmax = opt_.micro_batch * cfg_.n_ctx, C = cfg_.n_embd, V = cfg_.vocab_size;
    const int64_t attn = opt_.micro_batch * cfg_.n_head * cfg_.n_ctx * cfg_.n_ctx;
    tokens_ = dev_.alloc(static_cast<size_t>(Nmax) * sizeof(int32_t), MemCategory::Activations);
    targets_ = dev_.alloc(static_cast<size_t>(Nmax) * sizeof(int32_t), MemCategory::Activations);
    for (int64_t l = 0; l <= cfg_.n_layer; ++l) residual_.push_back(alloc_act(Nmax * C));
    for (int64_t l = 0; l < cfg_.n_layer; ++l) {
      BlockActs a;
      a.ln1 = alloc_act(Nmax * C);
      a.ln1_mean = alloc_f32(Nmax);
      a.ln1_rstd = alloc_f32(Nmax);
      a.qkv = alloc_act(Nmax * 3 * C);
      a.att = alloc_f32(attn);
      a.atty = alloc_act(Nmax * C);
      a.mid = alloc_act(Nmax * C);
      a.ln2 = alloc_act(Nmax * C);
      a.ln2_mean = alloc_f32(Nmax);
      a.ln2_rstd = alloc_f32(Nmax);
      a.fc = alloc_act(Nmax * 4 * C);
      a.fc_gelu = alloc_act(Nmax * 4 * C);
      blocks_.push_back(std::move(a));
    }
    lnf_ = alloc_act(Nmax * C);
    lnf_mean_ = alloc_f32(Nmax);
    lnf_rstd_ = alloc_f32(Nmax);
    logits_ = alloc_act(Nmax * V);
    losses_ = alloc_f32(Nmax);
    const MemCategory ws = MemCategory::Workspace;
    proj_ = alloc_act(Nmax * C, ws);
    dres_ = alloc_act(Nmax * C, ws);
    dC_ = alloc_act(Nmax * C, ws);
    dqkv_ = alloc_act(Nmax * 3 * C, ws);
    d4a_ = alloc_act(Nmax * 4 * C, ws);
    d4b_ = alloc_act(Nmax * 4 * C, ws);
    datt_ = alloc_f32(attn, ws);
  }

  int p(int layer, BlockParam k) const { return 2 + kPerBlock * layer + k; }
  int64_t N() const { return B_ * T_; }

  // y[N,out] = x[N,in]·W[in,out] + b (Conv1D layout).
  void linear_forward(const TensorView& y, const TensorView& x, int w, int b, int64_t in, int64_t out) {
    ops::gemm(stream_, false, false, N(), out, in, 1.0f, x, param(w), 0.0f, y);
    ops::bias_add(stream_, y, param(b));
  }
  // dW[in,out] += xᵀ·dy; db += Σ rows dy; dx[N,in] = dy·Wᵀ (overwrites).
  void linear_backward(const TensorView& dx, const TensorView& dy, const TensorView& x, int w, int b, int64_t in,
                       int64_t out) {
    ops::gemm(stream_, true, false, in, out, N(), 1.0f, x, dy, 1.0f, grad(w));
    ops::bias_grad(stream_, grad(b), dy);
    ops::gemm(stream_, false, true, N(), in, out, 1.0f, dy, param(w), 0.0f, dx);
  }

  void embed_forward() {
    const int64_t C = cfg_.n_embd;
    ops::embedding_forward(stream_, act(residual_[0], {N(), C}), tokens_.as<int32_t>(), param(0), param(1), B_, T_, C);
  }
  void embed_backward() {
    const int64_t C = cfg_.n_embd;
    ops::embedding_backward(stream_, grad(0), grad(1), act(dres_, {N(), C}), tokens_.as<int32_t>(), B_, T_, C);
  }

  void block_forward(int l) {
    const int64_t C = cfg_.n_embd, n = N();
    BlockActs& a = blocks_[l];
    TensorView x = act(residual_[l], {n, C}), mid = act(a.mid, {n, C}), proj = act(proj_, {n, C});
    ops::layernorm_forward(stream_, act(a.ln1, {n, C}), f32(a.ln1_mean, {n}), f32(a.ln1_rstd, {n}), x,
                           param(p(l, LN1_W)), param(p(l, LN1_B)), kLnEps);
    linear_forward(act(a.qkv, {n, 3 * C}), act(a.ln1, {n, C}), p(l, ATTN_W), p(l, ATTN_B), C, 3 * C);
    ops::attention_forward(stream_, act(a.atty, {n, C}), att_view(a.att), act(a.qkv, {n, 3 * C}), B_, T_, C,
                           cfg_.n_head);
    linear_forward(proj, act(a.atty, {n, C}), p(l, APROJ_W), p(l, APROJ_B), C, C);
    ops::residual_add(stream_, mid, x, proj);
    ops::layernorm_forward(stream_, act(a.ln2, {n, C}), f32(a.ln2_mean, {n}), f32(a.ln2_rstd, {n}), mid,
                           param(p(l, LN2_W)), param(p(l, LN2_B)), kLnEps);
    linear_forward(act(a.fc, {n, 4 * C}), act(a.ln2, {n, C}), p(l, FC_W), p(l, FC_B), C, 4 * C);
    ops::gelu_forward(stream_, act(a.fc_gelu, {n, 4 * C}), act(a.fc, {n, 4 * C}));
    linear_forward(proj, act(a.fc_gelu, {n, 4 * C}), p(l, FPROJ_W), p(l, FPROJ_B), 4 * C, C);
    ops::residual_add(stream_, act(residual_[l + 1], {n, C}), mid, proj);
  }

  // On entry dres = d residual[l+1]; on exit dres = d residual[l].
  void block_backward(int l) {
    const int64_t C = cfg_.n_embd, n = N();
    BlockActs& a = blocks_[l];
    TensorView dres = act(dres_, {n, C}), dC = act(dC_, {n, C});
    TensorView d4a = act(d4a_, {n, 4 * C}), d4b = act(d4b_, {n, 4 * C}), dqkv = act(dqkv_, {n, 3 * C});
    // MLP branch: residual[l+1] = mid + c_proj(gelu(c_fc(ln_2(mid)))).
    linear_backward(d4a, dres, act(a.fc_gelu, {n, 4 * C}), p(l, FPROJ_W), p(l, FPROJ_B), 4 * C, C);
    zero(d4b);
    ops::gelu_backward(stream_, d4b, act(a.fc, {n, 4 * C}), d4a);
    linear_backward(dC, d4b, act(a.ln2, {n, C}), p(l, FC_W), p(l, FC_B), C, 4 * C);
    ops::layernorm_backward(stream_, dres, grad(p(l, LN2_W)), grad(p(l, LN2_B)), dC, act(a.mid, {n, C}),
                            param(p(l, LN2_W)), f32(a.ln2_mean, {n}), f32(a.ln2_rstd, {n}));
    // Attention branch: mid = residual[l] + c_proj(attn(c_attn(ln_1(residual[l])))).
    linear_backward(dC, dres, act(a.atty, {n, C}), p(l, APROJ_W), p(l, APROJ_B), C, C);
    zero(dqkv);
    ops::attention_backward(stream_, dqkv, att_view(datt_), dC, act(a.qkv, {n, 3 * C}), att_view(a.att), B_, T_, C,
                            cfg_.n_head);
    linear_backward(dC, dqkv, act(a.ln1, {n, C}), p(l, ATTN_W), p(l, ATTN_B), C, 3 * C);
    ops::layernorm_backward(stream_, dres, grad(p(l, LN1_W)), grad(p(l, LN1_B)), dC, act(residual_[l], {n, C}),
                            param(p(l, LN1_W)), f32(a.ln1_mean, {n}), f32(a.ln1_rstd, {n}));
  }

  void head_forward() {
    const int64_t C = cfg_.n_embd, V = cfg_.vocab_size, n = N();
    const int L = static_cast<int>(cfg_.n_layer);
    TensorView lnf = act(lnf_, {n, C}), logits = act(logits_, {n, V});
    ops::layernorm_forward(stream_, lnf, f32(lnf_mean_, {n}), f32(lnf_rstd_, {n}), act(residual_[L], {n, C}),
                           param(lnf_w_), param(lnf_b_), kLnEps);
    ops::gemm(stream_, false, true, n, V, C, 1.0f, lnf, param(0), 0.0f, logits);
    // logits become softmax − onehot in place (dloss 1); the real dloss/N is applied in backward.
    ops::softmax_cross_entropy(stream_, f32(losses_, {n}), logits, logits, targets_.as<int32_t>(), 1.0f);
    mean_loss(f32(losses_, {n}), n);
  }

  // dres := d residual[L] (overwrites); dwte += head part; ln_f grads +=.
  void head_backward(float dloss) {
    const int64_t C = cfg_.n_embd, V = cfg_.vocab_size, n = N();
    const int L = static_cast<int>(cfg_.n_layer);
    const float alpha = dloss / loss_divisor();  // mean over the non-ignored positions
    TensorView dlogits = act(logits_, {n, V}), dC = act(dC_, {n, C}), dres = act(dres_, {n, C});
    ops::gemm(stream_, true, false, V, C, n, alpha, dlogits, act(lnf_, {n, C}), 1.0f, grad(0));
    ops::gemm(stream_, false, false, n, C, V, alpha, dlogits, param(0), 0.0f, dC);
    zero(dres);
    ops::layernorm_backward(stream_, dres, grad(lnf_w_), grad(lnf_b_), dC, act(residual_[L], {n, C}), param(lnf_w_),
                            f32(lnf_mean_, {n}), f32(lnf_rstd_, {n}));
  }

  TensorView att_view(const DeviceBuffer& b) const { return f32(b, {B_, cfg_.n_head, T_, T_}); }

  GptConfig cfg_;
  int lnf_w_ = -1, lnf_b_ = -1;
  int64_t B_ = 0, T_ = 0;  // shape of the current batch (set_batch)
  DeviceBuffer tokens_, targets_;  // int32 [B,T] on the device
  std::vector<DeviceBuffer> residual_;
  std::vector<BlockActs> blocks_;
  DeviceBuffer lnf_, lnf_mean_, lnf_rstd_, logits_, losses_;
  DeviceBuffer proj_, dres_, dC_, dqkv_, d4a_, d4b_, datt_;
};

}  // namespace

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
