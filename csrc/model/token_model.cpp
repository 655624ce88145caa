// token_model.cpp — see token_model.h.
#include "token_model.h"

#include "zerotrain/kernels/ops.h"

namespace zt::model_detail {

bool uses_host_checkpoints(const ModelOptions& opt, int64_t n_layer) {
  return opt.cpu_checkpointing && opt.recompute != Recompute::None && n_layer >= 2;
}

std::string residual_buffer_name(const ModelOptions& opt, int64_t n_layer, int64_t l) {
  return uses_host_checkpoints(opt, n_layer) ? "residual.slot" + std::to_string(l % 2) : "residual." + std::to_string(l);
}

VocabLayout token_vocab_layout(int64_t vocab_size, const ModelOptions& opt) {
  const int64_t m = opt.vocab_pad > 0 ? opt.vocab_pad : default_vocab_pad(opt.device ? opt.device->kind() : DeviceKind::CPU);
  return vocab_layout(vocab_size, m);
}

void add_input_buffers(std::vector<BufferSpec>& out, const ModelOptions& opt, int64_t n_ctx, int64_t C, int64_t n_layer) {
  const int64_t N = opt.micro_batch * n_ctx, e = static_cast<int64_t>(dtype_size(opt.compute_dtype));
  const MemCategory A = MemCategory::Activations;
  out.push_back({"tokens", N * 4, A});
  out.push_back({"targets", N * 4, A});
  if (uses_host_checkpoints(opt, n_layer)) {  // two device slots; the inputs of blocks 0..L-2 in host memory
    for (int64_t l = 0; l < 2; ++l) out.push_back({residual_buffer_name(opt, n_layer, l), N * C * e, A});
    for (int64_t l = 0; l + 1 < n_layer; ++l)
      out.push_back({"host.residual." + std::to_string(l), N * C * e, MemCategory::HostActivations});
  } else {
    for (int64_t l = 0; l <= n_layer; ++l) out.push_back({residual_buffer_name(opt, n_layer, l), N * C * e, A});
  }
}

void add_head_buffers(std::vector<BufferSpec>& out, const ModelOptions& opt, int64_t n_ctx, int64_t C, int64_t vocab_size,
                      bool with_mean) {
  const int64_t N = opt.micro_batch * n_ctx, e = static_cast<int64_t>(dtype_size(opt.compute_dtype));
  const MemCategory A = MemCategory::Activations;
  out.push_back({"lnf", N * C * e, A});
  if (with_mean) out.push_back({"lnf_mean", N * 4, A});
  out.push_back({"lnf_rstd", N * 4, A});
  out.push_back({"logits", N * token_vocab_layout(vocab_size, opt).Vp * e, A});  // padded rows (vocab_pad.h)
  out.push_back({"losses", N * 4, A});
}

TokenModel::TokenModel(const ModelOptions& opt, const char* kind, int64_t vocab_size, int64_t n_ctx, int64_t C,
                       int64_t n_layer)
    : ModelBase(opt, opt.micro_batch * n_ctx), kind_(kind), vocab_size_(vocab_size), n_ctx_(n_ctx), C_(C),
      n_layer_(n_layer), vocab_(token_vocab_layout(vocab_size, opt)) {}

std::vector<int> TokenModel::unit_params(int unit) const {
  std::vector<int> out = Model::unit_params(unit);
  if (unit == num_units() - 1 && params_[head_w_].unit != unit) out.insert(out.begin(), head_w_);  // tied head
  return out;
}

void TokenModel::forward_unit(int unit) {
  ZT_CHECK(B_ > 0, "forward_unit before set_batch");
  const int L = static_cast<int>(n_layer_);
  if (unit == 0) embed_forward();
  else if (unit <= L) block_forward(unit - 1);
  else if (unit == L + 1) head_forward();
  else ZT_CHECK(false, "forward_unit: bad unit " + std::to_string(unit));
}

void TokenModel::backward_unit(int unit, float dloss) {
  ZT_CHECK(B_ > 0, "backward_unit before set_batch");
  const int L = static_cast<int>(n_layer_);
  if (unit == 0) embed_backward();
  else if (unit <= L) block_backward(unit - 1);
  else if (unit == L + 1) head_backward(dloss);
  else ZT_CHECK(false, "backward_unit: bad unit " + std::to_string(unit));
}

void TokenModel::allocate(const std::vector<BufferSpec>& plan) {
  const size_t from_base = ModelBase::base_buffers(0).size();  // listed first, allocated by ModelBase
  for (size_t i = from_base; i < plan.size(); ++i) {
    const size_t bytes = static_cast<size_t>(plan[i].bytes);
    bufs_[plan[i].name] = plan[i].category == MemCategory::HostActivations
                              ? dev_.alloc_host(bytes, plan[i].category, /*pinned=*/true, /*zero=*/false)
                              : dev_.alloc(bytes, plan[i].category);
  }
  tokens_ = &buf("tokens");
  targets_ = &buf("targets");
  for (int64_t l = 0; l <= n_layer_; ++l) residual_.push_back(&buf(residual_buffer_name(opt_, n_layer_, l)));
  if (uses_host_checkpoints(opt_, n_layer_)) {
    std::vector<const DeviceBuffer*> host;
    for (int64_t l = 0; l + 1 < n_layer_; ++l) host.push_back(&buf("host.residual." + std::to_string(l)));
    host_ckpt_ = std::make_unique<HostCheckpoints>(dev_, stream_, residual_, std::move(host));
  }
  lnf_ = &buf("lnf");
  logits_ = &buf("logits");
  losses_ = &buf("losses");
}

const DeviceBuffer& TokenModel::buf(const std::string& name) const {
  auto it = bufs_.find(name);
  ZT_CHECK(it != bufs_.end(), std::string(kind_) + ": no buffer " + name);
  return it->second;
}

size_t TokenModel::residual_bytes() const { return static_cast<size_t>(N() * C_) * dtype_size(dt_); }

void TokenModel::before_block_backward(int l) {
  if (!host_ckpt_) return;
  host_ckpt_->prefetch(l, residual_bytes());  // residual[l-1], one block ahead
  host_ckpt_->before_read(l);
}

void TokenModel::set_batch(const Batch& b) {
  const std::string what = std::string("batch for model ") + kind_ + ": ";
  if (b.B <= 0 || b.B > opt_.micro_batch)
    throw InputError(what + "B=" + std::to_string(b.B) + " must be in [1, micro_batch=" + std::to_string(opt_.micro_batch) + "]");
  if (b.T <= 0 || b.T > n_ctx_)
    throw InputError(what + "T=" + std::to_string(b.T) + " must be in [1, n_ctx=" + std::to_string(n_ctx_) + "]");
  const size_t n = static_cast<size_t>(b.B * b.T);
  if (b.inputs.size() != n || b.targets.size() != n)
    throw InputError(what + "inputs/targets must hold B*T=" + std::to_string(n) + " tokens, got " +
                     std::to_string(b.inputs.size()) + "/" + std::to_string(b.targets.size()));
  for (size_t i = 0; i < n; ++i) {
    if (b.inputs[i] < 0 || b.inputs[i] >= vocab_size_)
      throw InputError(what + "input token " + std::to_string(b.inputs[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(vocab_size_) + ")");
    if (b.targets[i] >= vocab_size_)
      throw InputError(what + "target token " + std::to_string(b.targets[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary (negative targets are ignored)");
  }
  B_ = b.B;
  T_ = b.T;
  loss_divisor_ = count_targets(b.targets);
  upload({{tokens_->data(), b.inputs.data(), n * sizeof(int32_t)}, {targets_->data(), b.targets.data(), n * sizeof(int32_t)}});
}

void TokenModel::lm_head_forward() {
  const int64_t C = C_, V = vocab_size_, Vp = vocab_.Vp, n = N();
  TensorView lnf = act(*lnf_, {n, C}), logits = act(*logits_, {n, Vp});
  // logits become softmax − onehot in place (dloss 1); the real dloss/N is applied in backward.
  if (!vocab_.padded()) {
    ops::gemm(stream_, false, true, n, V, C, 1.0f, lnf, param(head_w_), 0.0f, logits);
    ops::softmax_cross_entropy(stream_, f32(*losses_, {n}), logits, logits, targets_->as<int32_t>(), 1.0f);
  } else {  // rows Vp apart, the GEMM and the loss over the V real columns only
    ops::gemm_ld(stream_, false, true, n, V, C, 1.0f, lnf, C, param(head_w_), C, 0.0f, logits, Vp);
    ops::softmax_cross_entropy_ld(stream_, f32(*losses_, {n}), logits, logits, targets_->as<int32_t>(), 1.0f, V, Vp);
  }
  mean_loss(f32(*losses_, {n}), n);
}

void TokenModel::lm_head_backward(float dloss, const TensorView& dC) {
  const int64_t C = C_, V = vocab_size_, Vp = vocab_.Vp, n = N();
  const float alpha = dloss / loss_divisor();  // mean over the non-ignored positions
  TensorView dlogits = act(*logits_, {n, Vp});
  if (!vocab_.padded()) {
    ops::gemm(stream_, true, false, V, C, n, alpha, dlogits, act(*lnf_, {n, C}), 1.0f, grad(head_w_));
    ops::gemm(stream_, false, false, n, C, V, alpha, dlogits, param(head_w_), 0.0f, dC);
  } else {  // dlogits rows are Vp apart; the padding columns are never read
    ops::gemm_ld(stream_, true, false, V, C, n, alpha, dlogits, Vp, act(*lnf_, {n, C}), C, 1.0f, grad(head_w_), C);
    ops::gemm_ld(stream_, false, false, n, C, V, alpha, dlogits, Vp, param(head_w_), C, 0.0f, dC, C);
  }
}

std::vector<float> TokenModel::forward_logits() {
  ZT_CHECK(B_ > 0 && lnf_ != nullptr, "forward_logits before a forward");
  const int64_t C = C_, V = vocab_size_, n = N();
  DeviceBuffer out = alloc_act(n * V, MemCategory::Workspace);
  ops::gemm(stream_, false, true, n, V, C, 1.0f, act(*lnf_, {n, C}), param(head_w_), 0.0f, act(out, {n, V}));
  std::vector<unsigned char> host(out.bytes());
  dev_.memcpy_async(host.data(), out.data(), host.size(), CopyKind::DeviceToHost, stream_);
  stream_.synchronize();
  std::vector<float> logits(static_cast<size_t>(n * V));
  convert(host.data(), dt_, logits.data(), DType::F32, logits.size());
  return logits;
}

}  // namespace zt::model_detail
