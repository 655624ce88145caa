// decoder_weights.h — a decoder's fp32 weights on its device: one buffer, the model's parameters
// in forward order, each a view of its shape.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/allocator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"

namespace zt {

class DecoderWeights {
 public:
  // values: one fp32 vector per spec, each of the spec's numel (ZT_CHECK, naming `who`); uploaded
  // on `stream`, which is synchronised before returning (the host vectors may go away).
  DecoderWeights(std::vector<ParamSpec> specs, const std::vector<std::vector<float>>& values, Device& dev,
                 Stream& stream, const char* who);
  // Parameter `index` as an fp32 view of its shape.
  TensorView param(int index) const;
  int count() const { return static_cast<int>(specs_.size()); }

 private:
  std::vector<ParamSpec> specs_;
  std::vector<int64_t> offset_;  // element offset of each parameter in buffer_
  DeviceBuffer buffer_;          // fp32, every parameter
  DeviceKind kind_;
};

}  // namespace zt
