// mlp.cpp — MLP forward/backward over zt::ops (see mlp.h), and load_model / make_model.
//
// Activations (model-owned, sized for micro_batch rows; B = rows of the current batch):
//   x0 [B,in] features in the compute dtype; per layer i: pre[i] [B,d_{i+1}] (Linear output),
//   post[i] [B,d_{i+1}] (activation output, not for the last layer); target [B,out] (regression,
//   compute dtype) or int32 [B] (classification); losses [B] fp32; dpred [B,out] (unit-dloss
//   gradient of the loss w.r.t. the last layer's output, written by the forward).
// Workspace: dpost[i] [B,d_{i+1}] (gradient w.r.t. post[i], written by unit i+1's backward),
//   dpre [B,max d] (gradient w.r.t. the current layer's output).
#include "zerotrain/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model_base.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/llama.h"

namespace zt {

// What the Mlp constructor allocates, in the same order and sizes (its memory prediction).
std::vector<BufferSpec> mlp_buffer_plan(const MlpConfig& cfg, const ModelOptions& opt) {
  const int64_t Bm = opt.micro_batch, e = static_cast<int64_t>(dtype_size(opt.compute_dtype));
  const MemCategory A = MemCategory::Activations, W = MemCategory::Workspace;
  const int layers = static_cast<int>(cfg.dims.size()) - 1;
  std::vector<BufferSpec> out = model_detail::ModelBase::base_buffers(Bm);
  out.push_back({"x0", Bm * cfg.dims[0] * e, A});
  int64_t widest = 0;
  for (int i = 0; i < layers; ++i) {
    const int64_t d = cfg.dims[i + 1];
    widest = std::max(widest, d);
    out.push_back({"pre." + std::to_string(i), Bm * d * e, A});
    if (i + 1 < layers) out.push_back({"post." + std::to_string(i), Bm * d * e, A});
    if (i + 1 < layers) out.push_back({"ws.dpost." + std::to_string(i), Bm * d * e, W});
  }
  out.push_back({"ws.dpre", Bm * widest * e, W});
  out.push_back({"target", cfg.task == MlpTask::Regression ? Bm * cfg.dims.back() * e : Bm * 4, A});
  out.push_back({"losses", Bm * 4, A});
  out.push_back({"dpred", Bm * cfg.dims.back() * e, A});
  return out;
}

std::vector<BufferSpec> model_buffer_plan(const ModelConfig& cfg, const ModelOptions& opt) {
  switch (cfg.type) {
    case ModelConfig::Type::GPT: return gpt_buffer_plan(cfg.gpt, opt);
    case ModelConfig::Type::Llama: return llama_buffer_plan(cfg.llama, opt);
    case ModelConfig::Type::MLP: break;
  }
  return mlp_buffer_plan(cfg.mlp, opt);
}

namespace {

using model_detail::ModelBase;

class Mlp final : public ModelBase {
 public:
  Mlp(const MlpConfig& cfg, const ModelOptions& opt) : ModelBase(opt, opt.micro_batch), cfg_(cfg) {
    const int layers = num_units();
    for (int i = 0; i < layers; ++i) {
      const int64_t in = cfg.dims[i], out = cfg.dims[i + 1];
      const float std = cfg.init_std > 0.0f ? cfg.init_std : 1.0f / std::sqrt(static_cast<float>(in));
      add_param("fc." + std::to_string(i) + ".weight", {out, in}, i, InitKind::Normal, std);
      add_param("fc." + std::to_string(i) + ".bias", {out}, i, InitKind::Zeros, 0.0f);
    }
    if (opt.plan_only) return;
    const int64_t Bm = opt.micro_batch;
    x0_ = alloc_act(Bm * cfg.dims[0]);
    int64_t widest = 0;
    for (int i = 0; i < layers; ++i) {
      const int64_t d = cfg.dims[i + 1];
      widest = std::max(widest, d);
      pre_.push_back(alloc_act(Bm * d));
      post_.push_back(i + 1 < layers ? alloc_act(Bm * d) : DeviceBuffer());
      dpost_.push_back(i + 1 < layers ? alloc_act(Bm * d, MemCategory::Workspace) : DeviceBuffer());
    }
    dpre_ = alloc_act(Bm * widest, MemCategory::Workspace);
    const int64_t out = cfg.dims.back();
    if (cfg.task == MlpTask::Regression) target_ = alloc_act(Bm * out);
    else target_ = dev_.alloc(static_cast<size_t>(Bm) * sizeof(int32_t), MemCategory::Activations);
    losses_ = alloc_f32(Bm);
    dpred_ = alloc_act(Bm * out);
  }

  ~Mlp() override { stream_.synchronize(); }
  std::vector<BufferSpec> buffer_plan() const override { return mlp_buffer_plan(cfg_, opt_); }  // enqueued work may still use the activations

  std::string describe() const override {
    std::ostringstream s;
    s << "mlp: dims=[";
    for (size_t i = 0; i < cfg_.dims.size(); ++i) s << (i ? "," : "") << cfg_.dims[i];
    s << "] activation=" << (cfg_.activation == Activation::GELU ? "gelu" : "relu")
      << " task=" << (cfg_.task == MlpTask::Regression ? "regression" : "classification") << " params=" << num_params();
    return s.str();
  }
  int num_units() const override { return static_cast<int>(cfg_.dims.size()) - 1; }
  int64_t hidden_size() const override {
    int64_t h = 0;
    for (size_t i = 1; i + 1 < cfg_.dims.size(); ++i) h = std::max(h, cfg_.dims[i]);
    return h > 0 ? h : cfg_.dims.back();
  }
  double flops_per_sample() const override { return 6.0 * static_cast<double>(num_params()); }

  void set_batch(const Batch& b) override {
    const std::string what = "batch for model mlp: ";
    const int64_t in = cfg_.dims.front(), out = cfg_.dims.back();
    if (b.B <= 0 || b.B > opt_.micro_batch)
      throw InputError(what + "B=" + std::to_string(b.B) + " must be in [1, micro_batch=" + std::to_string(opt_.micro_batch) + "]");
    if (static_cast<int64_t>(b.features.size()) != b.B * in)
      throw InputError(what + "features must hold B*in=" + std::to_string(b.B * in) + " values, got " +
                       std::to_string(b.features.size()));
    B_ = b.B;
    loss_divisor_ = cfg_.task == MlpTask::Regression ? b.B : count_targets(b.targets);
    feat_host_.resize(static_cast<size_t>(b.B * in) * dtype_size(dt_));
    convert(b.features.data(), DType::F32, feat_host_.data(), dt_, b.features.size());
    std::vector<HostChunk> chunks{{x0_.data(), feat_host_.data(), feat_host_.size()}};
    if (cfg_.task == MlpTask::Regression) {
      if (static_cast<int64_t>(b.targets_f.size()) != b.B * out)
        throw InputError(what + "regression targets_f must hold B*out=" + std::to_string(b.B * out) + " values, got " +
                         std::to_string(b.targets_f.size()));
      tgt_host_.resize(static_cast<size_t>(b.B * out) * dtype_size(dt_));
      convert(b.targets_f.data(), DType::F32, tgt_host_.data(), dt_, b.targets_f.size());
      chunks.push_back({target_.data(), tgt_host_.data(), tgt_host_.size()});
    } else {
      if (static_cast<int64_t>(b.targets.size()) != b.B)
        throw InputError(what + "classification targets must hold B=" + std::to_string(b.B) + " class ids, got " +
                         std::to_string(b.targets.size()));
      for (size_t i = 0; i < b.targets.size(); ++i)
        if (b.targets[i] >= out)
          throw InputError(what + "class id " + std::to_string(b.targets[i]) + " at row " + std::to_string(i) +
                           " is not below the number of outputs " + std::to_string(out));
      chunks.push_back({target_.data(), b.targets.data(), b.targets.size() * sizeof(int32_t)});
    }
    upload(chunks);
  }

  void forward_unit(int i) override {
    ZT_CHECK(B_ > 0, "forward_unit before set_batch");
    ZT_CHECK(i >= 0 && i < num_units(), "forward_unit: bad unit " + std::to_string(i));
    const int64_t in = cfg_.dims[i], out = cfg_.dims[i + 1];
    // pre = x·Wᵀ + b (nn.Linear layout, W [out,in]); hidden layers' GELU fused into the same op.
    TensorView pre = act(pre_[i], {B_, out});
    const bool hidden = i + 1 < num_units(), gelu = hidden && cfg_.activation == Activation::GELU;
    if (gelu) {
      ops::linear_forward(stream_, act(post_[i], {B_, out}), pre, input_of(i), param(2 * i), param(2 * i + 1), B_, in,
                          out, /*trans_w=*/true, /*gelu=*/true);
      return;
    }
    ops::linear_forward(stream_, pre, TensorView{}, input_of(i), param(2 * i), param(2 * i + 1), B_, in, out,
                        /*trans_w=*/true, /*gelu=*/false);
    if (hidden) {
      ops::relu_forward(stream_, act(post_[i], {B_, out}), pre);  // ReLU stays unfused
      return;
    }
    TensorView losses = f32(losses_, {B_}), dpred = act(dpred_, {B_, out});
    if (cfg_.task == MlpTask::Regression) ops::mse_loss(stream_, losses, dpred, pre, act(target_, {B_, out}), 1.0f);
    else ops::softmax_cross_entropy(stream_, losses, dpred, pre, target_.as<int32_t>(), 1.0f);
    mean_loss(losses, B_);
  }

  void backward_unit(int i, float dloss) override {
    ZT_CHECK(B_ > 0, "backward_unit before set_batch");
    ZT_CHECK(i >= 0 && i < num_units(), "backward_unit: bad unit " + std::to_string(i));
    const int64_t in = cfg_.dims[i], out = cfg_.dims[i + 1];
    const bool gelu = cfg_.activation == Activation::GELU;
    TensorView dy = act(dpre_, {B_, out});  // d pre_i
    if (i + 1 == num_units()) {
      copy(dy, act(dpred_, {B_, out}));  // keeps dpred intact: backward is repeatable
      ops::scale(stream_, dy, dloss / loss_divisor());  // mean over the non-ignored rows
    } else if (gelu) {
      dy = act(dpost_[i], {B_, out});  // unit i+1's backward already wrote d pre_i here (fused GELU backward)
    } else {
      zero(dy);
      ops::relu_backward(stream_, dy, act(pre_[i], {B_, out}), act(dpost_[i], {B_, out}));
    }
    // y = x·Wᵀ + b: dW[out,in] += dyᵀ·x; db += Σ rows dy; for i > 0, dpost_[i-1] = dy·W (overwrites),
    // with GELU already d pre_{i-1} = (dy·W) ⊙ gelu'(pre_{i-1}). Layer 0 needs no dx.
    const TensorView dx = i > 0 ? act(dpost_[i - 1], {B_, in}) : TensorView{};
    const TensorView gelu_pre = i > 0 && gelu ? act(pre_[i - 1], {B_, in}) : TensorView{};
    ops::linear_backward(stream_, dx, grad(2 * i), grad(2 * i + 1), dy, input_of(i), param(2 * i), gelu_pre, B_, in,
                         out, /*trans_w=*/true);
  }

 private:
  TensorView input_of(int i) const { return i == 0 ? act(x0_, {B_, cfg_.dims[0]}) : act(post_[i - 1], {B_, cfg_.dims[i]}); }

  MlpConfig cfg_;
  int64_t B_ = 0;
  std::vector<unsigned char> feat_host_, tgt_host_;  // host conversions to the compute dtype
  DeviceBuffer x0_, target_, losses_, dpred_, dpre_;
  std::vector<DeviceBuffer> pre_, post_, dpost_;
};

}  // namespace

std::unique_ptr<Model> make_mlp(const MlpConfig& cfg, const ModelOptions& opt) { return std::make_unique<Mlp>(cfg, opt); }

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& opt) {
  switch (cfg.type) {
    case ModelConfig::Type::GPT: return make_gpt(cfg.gpt, opt);
    case ModelConfig::Type::Llama: return make_llama(cfg.llama, opt);
    case ModelConfig::Type::MLP: break;
  }
  return make_mlp(cfg.mlp, opt);
}

std::unique_ptr<Model> load_model(const std::string& path, const ModelOptions& opt) {
  return make_model(parse_model_config_file(path), opt);
}

}  // namespace zt
