// model_base.cpp — ModelBase (see model_base.h) and the Model defaults added to model.h.
#include "model_base.h"

#include <algorithm>
#include <cstring>

#include "zerotrain/kernels/ops.h"

namespace zt {

std::vector<int> Model::unit_params(int unit) const {
  std::vector<int> out;
  const auto& ps = params();
  for (size_t i = 0; i < ps.size(); ++i)
    if (ps[i].unit == unit) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<int> Model::shared_params() const {
  std::vector<int> out;
  for (int u = 0; u < num_units(); ++u)
    for (int i : unit_params(u))
      if (params()[i].unit != u && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t Model::num_params() const {
  int64_t n = 0;
  for (const auto& p : params()) n += p.numel;
  return n;
}

std::vector<float> Model::forward_logits() {
  ZT_CHECK(false, "forward_logits: " + describe() + " has no logits");
  return {};
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Block: return "block";
    case Recompute::Selective: return "selective";
  }
  return "?";
}

namespace model_detail {

// Must list what the constructor below allocates in the Activations category.
std::vector<BufferSpec> ModelBase::base_buffers(int64_t max_rows) {
  return {{"loss", static_cast<int64_t>(sizeof(float)), MemCategory::Activations},
          {"ones", max_rows * static_cast<int64_t>(sizeof(float)), MemCategory::Activations}};
}

TensorView make_view(void* data, DType t, DeviceKind dev, const std::vector<int64_t>& shape) {
  ZT_CHECK(shape.size() <= static_cast<size_t>(TensorView::kMaxDims), "make_view: too many dims");
  TensorView v(data, t, {}, dev);
  for (int64_t s : shape) v.shape[v.ndim++] = s;
  return v;
}

ModelBase::ModelBase(const ModelOptions& opt, int64_t max_rows)
    : opt_(opt), dev_(*opt.device), stream_(*opt.stream), dt_(opt.compute_dtype), grad_dt_(opt.compute_dtype) {
  ZT_CHECK(opt.device != nullptr && opt.stream != nullptr, "ModelOptions needs a device and a stream");
  ZT_CHECK(opt.micro_batch > 0, "ModelOptions.micro_batch must be positive");
  if (opt.plan_only) return;
  loss_ = dev_.alloc(sizeof(float), MemCategory::Activations, /*zero=*/true);
  ones_ = dev_.alloc(static_cast<size_t>(max_rows) * sizeof(float), MemCategory::Activations);
  staging_done_ = dev_.create_event();
  std::vector<float> host_ones(static_cast<size_t>(max_rows), 1.0f);
  dev_.memcpy_async(ones_.data(), host_ones.data(), host_ones.size() * sizeof(float), CopyKind::HostToDevice, stream_);
  stream_.synchronize();  // start-up only: host_ones goes out of scope
}

int ModelBase::add_param(const std::string& name, std::vector<int64_t> shape, int unit, InitKind init, float std) {
  ParamSpec p;
  p.name = name;
  p.numel = 1;
  for (int64_t s : shape) p.numel *= s;
  p.shape = std::move(shape);
  p.unit = unit;
  p.init = init;
  p.init_std = std;
  params_.push_back(std::move(p));
  param_ptr_.push_back(nullptr);
  grad_ptr_.push_back(nullptr);
  return static_cast<int>(params_.size()) - 1;
}

void ModelBase::bind_param(int index, void* data) {
  ZT_CHECK(index >= 0 && index < static_cast<int>(params_.size()), "bind_param: bad index " + std::to_string(index));
  param_ptr_[index] = data;
}

void ModelBase::bind_grad(int index, void* data) {
  ZT_CHECK(index >= 0 && index < static_cast<int>(params_.size()), "bind_grad: bad index " + std::to_string(index));
  grad_ptr_[index] = data;
}

void ModelBase::set_grad_dtype(DType dtype) {
  ZT_CHECK(dtype == dt_ || (dtype == DType::F32 && dt_ != DType::F32),
           std::string("set_grad_dtype: gradients in ") + dtype_name(dtype) + " with compute dtype " + dtype_name(dt_) +
               " (expected the compute dtype or f32)");
  grad_dt_ = dtype;
}

TensorView ModelBase::param(int i) const {
  ZT_CHECK(param_ptr_[i] != nullptr, "parameter " + params_[i].name + " is not bound");
  return make_view(param_ptr_[i], dt_, dev_.kind(), params_[i].shape);
}

TensorView ModelBase::grad(int i) const {
  ZT_CHECK(grad_ptr_[i] != nullptr, "gradient of " + params_[i].name + " is not bound");
  return make_view(grad_ptr_[i], grad_dt_, dev_.kind(), params_[i].shape);
}

TensorView ModelBase::act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const {
  TensorView v(b.data(), dt_, dims, dev_.kind());
  ZT_CHECK(v.nbytes() <= b.bytes(), "activation view " + v.shape_string() + " exceeds its buffer");
  return v;
}

TensorView ModelBase::f32(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const {
  TensorView v(b.data(), DType::F32, dims, dev_.kind());
  ZT_CHECK(v.nbytes() <= b.bytes(), "fp32 view " + v.shape_string() + " exceeds its buffer");
  return v;
}

DeviceBuffer ModelBase::alloc_act(int64_t numel, MemCategory c) const {
  return dev_.alloc(static_cast<size_t>(numel) * dtype_size(dt_), c);
}

DeviceBuffer ModelBase::alloc_f32(int64_t numel, MemCategory c) const {
  return dev_.alloc(static_cast<size_t>(numel) * sizeof(float), c);
}

void ModelBase::zero(const TensorView& t) const { dev_.memset_async(t.data, 0, t.nbytes(), stream_); }

void ModelBase::copy(const TensorView& dst, const TensorView& src) const {
  ZT_CHECK(dst.nbytes() == src.nbytes() && dst.dtype == src.dtype, "model copy: mismatched views");
  dev_.memcpy_async(dst.data, src.data, src.nbytes(), CopyKind::DeviceToDevice, stream_);
}

void ModelBase::mean_loss(const TensorView& losses, int64_t rows) {
  TensorView ones(ones_.data(), DType::F32, {rows, 1}, dev_.kind());
  TensorView out(loss_.data(), DType::F32, {1, 1}, dev_.kind());
  TensorView row(losses.data, DType::F32, {1, rows}, dev_.kind());
  ops::gemm(stream_, false, false, 1, 1, rows, 1.0f / loss_divisor(), row, ones, 0.0f, out);
}

int64_t ModelBase::count_targets(const std::vector<int32_t>& targets) {
  int64_t n = 0;
  for (int32_t t : targets) n += t >= 0 ? 1 : 0;
  return n > 0 ? n : 1;
}

void ModelBase::upload(const std::vector<HostChunk>& chunks) {
  size_t total = 0;
  for (const auto& c : chunks) total += (c.bytes + 63) / 64 * 64;
  staging_done_->synchronize();  // the previous batch's copies have read the staging buffer
  if (staging_.bytes() < total) staging_ = dev_.alloc_pinned_host(total);
  char* base = staging_.as<char>();
  size_t off = 0;
  for (const auto& c : chunks) {
    if (c.bytes == 0) continue;
    std::memcpy(base + off, c.src, c.bytes);
    dev_.memcpy_async(c.dst, base + off, c.bytes, CopyKind::HostToDevice, stream_);
    off += (c.bytes + 63) / 64 * 64;
  }
  staging_done_->record(stream_);
}

}  // namespace model_detail
}  // namespace zt
