// zero_ops.h — the few element-wise ops only the ZeRO engine needs, on both backends
// (CPU: csrc/zero/zero_ops.cpp on the stream's thread; CUDA: kernels/zero_ops.cu).
#pragma once
#include "zerotrain/core/device.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/optim/sgd_math.h"

namespace zt::zero_ops {

// dst = (overwrite ? 0 : dst) + alpha · src, element-wise, any dtype pair, same numel. fp32 math.
void accumulate(Stream& s, const TensorView& dst, const TensorView& src, float alpha, bool overwrite);

// SGD with momentum over p (master, F32/BF16), momentum_buf (same numel; unused when momentum
// is 0) and g (any dtype), with g multiplied by grad_scale first; optim::sgd_update per element
// (torch.optim.SGD semantics). param_out (optional) receives cast(p).
void sgd_step(Stream& s, const TensorView& p, const TensorView& momentum_buf, const TensorView& g, float grad_scale,
              const optim::SgdParams& a, bool first_step, const TensorView& param_out);

}  // namespace zt::zero_ops

#if defined(ZT_WITH_CUDA)
namespace zt::cuda_zero_ops {
void accumulate(Stream& s, const TensorView& dst, const TensorView& src, float alpha, bool overwrite);
void sgd_step(Stream& s, const TensorView& p, const TensorView& momentum_buf, const TensorView& g, float grad_scale,
              const optim::SgdParams& a, bool first_step, const TensorView& param_out);
}  // namespace zt::cuda_zero_ops
#endif
