// local_state.cpp — LocalModelState (see local_state.h).
#include "zerotrain/model/local_state.h"

#include "zerotrain/model/unit_runner.h"
#include "zerotrain/model/weights_io.h"

namespace zt {

LocalModelState::LocalModelState(Model& model, Device& device, Stream& stream, DType compute_dtype)
    : model_(model), dev_(device), stream_(stream), dt_(compute_dtype) {
  for (const ParamSpec& p : model.params()) {
    offsets_.push_back(total_);
    total_ += p.numel;
  }
  const size_t bytes = static_cast<size_t>(total_) * dtype_size(dt_);
  params_ = dev_.alloc(bytes, MemCategory::Params, /*zero=*/true);
  grads_ = dev_.alloc(bytes, MemCategory::Grads, /*zero=*/true);
  for (size_t i = 0; i < offsets_.size(); ++i) {
    const size_t off = static_cast<size_t>(offsets_[i]) * dtype_size(dt_);
    model.bind_param(static_cast<int>(i), params_.as<char>() + off);
    model.bind_grad(static_cast<int>(i), grads_.as<char>() + off);
  }
}

void LocalModelState::set_params(const std::vector<float>& flat) {
  ZT_CHECK(static_cast<int64_t>(flat.size()) == total_, "set_params: wrong size");
  std::vector<unsigned char> host(static_cast<size_t>(total_) * dtype_size(dt_));
  convert(flat.data(), DType::F32, host.data(), dt_, flat.size());
  dev_.memcpy_async(params_.data(), host.data(), host.size(), CopyKind::HostToDevice, stream_);
  stream_.synchronize();  // `host` dies at return
}

void LocalModelState::init(uint64_t seed) {
  std::vector<float> flat(static_cast<size_t>(total_));
  const auto& specs = model_.params();
  for (size_t i = 0; i < specs.size(); ++i) init_param_slice(seed, specs[i], 0, specs[i].numel, flat.data() + offsets_[i]);
  set_params(flat);
}

void LocalModelState::load(const ModelWeightsReader& weights) {
  std::vector<float> flat(static_cast<size_t>(total_));
  const auto& specs = model_.params();
  for (size_t i = 0; i < specs.size(); ++i)
    weights.read_param_slice(static_cast<int>(i), 0, specs[i].numel, flat.data() + offsets_[i]);
  set_params(flat);
}

namespace {
std::vector<float> download(Device& dev, Stream& s, const DeviceBuffer& buf, DType dt, int64_t n) {
  std::vector<unsigned char> host(static_cast<size_t>(n) * dtype_size(dt));
  dev.memcpy_async(host.data(), buf.data(), host.size(), CopyKind::DeviceToHost, s);
  s.synchronize();
  std::vector<float> out(static_cast<size_t>(n));
  convert(host.data(), dt, out.data(), DType::F32, out.size());
  return out;
}
}  // namespace

std::vector<float> LocalModelState::params() const { return download(dev_, stream_, params_, dt_, total_); }
std::vector<float> LocalModelState::grads() const { return download(dev_, stream_, grads_, dt_, total_); }

void LocalModelState::zero_grads() { dev_.memset_async(grads_.data(), 0, grads_.bytes(), stream_); }

float LocalModelState::forward(const Batch& batch) {
  model_.set_batch(batch);
  run_forward(model_);
  float loss = 0.0f;
  dev_.memcpy_async(&loss, model_.loss_device(), sizeof(float), CopyKind::DeviceToHost, stream_);
  stream_.synchronize();
  return loss;
}

float LocalModelState::forward_backward(const Batch& batch, float dloss) {
  model_.set_batch(batch);
  run_forward(model_);
  float loss = 0.0f;
  dev_.memcpy_async(&loss, model_.loss_device(), sizeof(float), CopyKind::DeviceToHost, stream_);
  run_backward(model_, dloss);
  stream_.synchronize();
  return loss;
}

}  // namespace zt
