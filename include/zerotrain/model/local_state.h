// local_state.h — full, unsharded parameter + gradient storage for one model on one device:
// the single-process path (tests, tools, a reference for the engine's equivalence tests).
//
// LocalModelState owns one flat parameter buffer and one flat gradient buffer in the model's
// compute dtype (categories Params / Grads), parameters at `offsets()[i]` in forward order, and
// binds every parameter and gradient to the model at construction.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"

namespace zt {

class ModelWeightsReader;

class LocalModelState {
 public:
  LocalModelState(Model& model, Device& device, Stream& stream, DType compute_dtype);
  ~LocalModelState() { stream_.synchronize(); }  // enqueued work may still use the buffers
  LocalModelState(const LocalModelState&) = delete;
  LocalModelState& operator=(const LocalModelState&) = delete;

  void init(uint64_t seed);                          // init_param_slice for every parameter
  void load(const ModelWeightsReader& weights);      // every parameter from a safetensors file
  void set_params(const std::vector<float>& flat);   // fp32, size num_params()
  std::vector<float> params() const;                 // fp32 copy (synchronizes the stream)
  std::vector<float> grads() const;                  // fp32 copy (synchronizes the stream)
  void zero_grads();                                 // async on the stream

  // Forward over every unit; returns the mean loss (synchronizes).
  float forward(const Batch& batch);
  // Forward, then backward over every unit in reverse with `dloss`; gradients ACCUMULATE.
  // Returns the mean loss (synchronizes).
  float forward_backward(const Batch& batch, float dloss = 1.0f);

  const std::vector<int64_t>& offsets() const { return offsets_; }
  // Device storage of parameter i / its gradient (what the constructor bound).
  void* param_data(int i) const { return params_.as<char>() + offsets_[i] * dtype_size(dt_); }
  void* grad_data(int i) const { return grads_.as<char>() + offsets_[i] * dtype_size(dt_); }
  int64_t total() const { return total_; }

 private:
  Model& model_;
  Device& dev_;
  Stream& stream_;
  DType dt_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
  DeviceBuffer params_, grads_;
};

}  // namespace zt
