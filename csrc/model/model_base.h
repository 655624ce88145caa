// model_base.h — shared machinery of the built-in models (private to csrc/model).
//
// Ownership: the engine owns parameter and gradient storage and binds one pointer per parameter;
// ModelBase keeps the pointers (never frees them). ModelBase owns the loss scalar, the ones
// vector used to average per-row losses, and the pinned host staging used by set_batch.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"

namespace zt::model_detail {

class ModelBase : public Model {
 public:
  // Work enqueued on the stream may still read or write model-owned buffers: every model's
  // destructor synchronizes the stream before its buffers are freed (derived classes too).
  ~ModelBase() override { stream_.synchronize(); }
  const std::vector<ParamSpec>& params() const override { return params_; }
  void bind_param(int index, void* data) override;
  void bind_grad(int index, void* data) override;
  void set_grad_dtype(DType dtype) override;
  DType grad_dtype() const override { return grad_dt_; }
  const float* loss_device() const override { return loss_.as<float>(); }
  // The loss divisor (1/divisor scales the loss and dloss); the shape is in the batch signature.
  std::vector<double> launch_scalars() const override { return {static_cast<double>(loss_divisor_)}; }
  // The buffers the base allocates for max_rows loss rows (loss scalar, ones vector).
  static std::vector<BufferSpec> base_buffers(int64_t max_rows);

 protected:
  // max_rows: the most loss rows one micro-batch can have (sizes the ones vector).
  ModelBase(const ModelOptions& opt, int64_t max_rows);

  int add_param(const std::string& name, std::vector<int64_t> shape, int unit, InitKind init, float std);
  // Bound parameter / gradient `i` as a view with its spec shape (ZT_CHECK that it is bound).
  TensorView param(int i) const;
  TensorView grad(int i) const;
  // Views of model-owned buffers in the compute dtype / fp32, on the model's device.
  TensorView act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const;
  TensorView f32(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const;
  DeviceBuffer alloc_act(int64_t numel, MemCategory c = MemCategory::Activations) const;
  DeviceBuffer alloc_f32(int64_t numel, MemCategory c = MemCategory::Activations) const;
  void zero(const TensorView& t) const;                     // async memset on the stream
  void copy(const TensorView& dst, const TensorView& src) const;  // async device-to-device

  // loss_ = sum of losses[rows] (fp32) / loss_divisor(), on the stream; deterministic (one gemm
  // with ones). Ignored positions (target < 0) have loss 0 and do not count (PyTorch's mean).
  void mean_loss(const TensorView& losses, int64_t rows);
  // Positions whose target is not ignored in the current batch (>= 1, so an all-ignored batch
  // has loss 0 and zero gradients instead of 0/0).
  static int64_t count_targets(const std::vector<int32_t>& targets);
  float loss_divisor() const { return static_cast<float>(loss_divisor_); }
  int64_t loss_divisor_ = 1;  // set_batch: count_targets (classification) or rows (regression)

  // Copies host bytes to device buffers on the stream through pinned staging. The staging
  // buffer is reused only after the previous batch's copies completed (staging_done_).
  struct HostChunk { void* dst; const void* src; size_t bytes; };
  void upload(const std::vector<HostChunk>& chunks);

  ModelOptions opt_;
  Device& dev_;
  Stream& stream_;
  DType dt_;
  DType grad_dt_;  // dt_, or F32 (set_grad_dtype)
  std::vector<ParamSpec> params_;
  std::vector<void*> param_ptr_, grad_ptr_;

 private:
  DeviceBuffer loss_;        // f32 [1]: mean loss of the last forward
  DeviceBuffer ones_;        // f32 [max_rows], all 1
  DeviceBuffer staging_;     // pinned host, grown on demand
  std::unique_ptr<Event> staging_done_;
};

// View with a runtime shape (up to 4 dims).
TensorView make_view(void* data, DType t, DeviceKind dev, const std::vector<int64_t>& shape);

}  // namespace zt::model_detail
