// zero_ops.h — the element-wise ops only the ZeRO engine needs, on both backends:
// zero_ops::accumulate, the SGD / Lion / Adagrad / LAMB steps and the block-wise quantiser of
// quantised collectives, declared from the ZT_ENGINE_OP entries of kernels/op_list.h (signatures
// and contracts there). Entry points and CPU kernels: csrc/zero/zero_ops.cpp, quantize_ops.cpp;
// CUDA launchers: csrc/kernels/cuda/zero_ops.cu, zero_optim.cu, quantize.cu.
#pragma once
#include "zerotrain/core/device.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/optimizer_math.h"

namespace zt::zero_ops {

#define ZT_ENGINE_OP(name, params, args) void name ZT_STREAM_PARAMS params;
#include "zerotrain/kernels/op_list.h"

}  // namespace zt::zero_ops
