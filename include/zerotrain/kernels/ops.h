// ops.h — one entry point per op, the same on both backends (the contract between the
// model layer and the kernels). The signatures and per-op contracts are the ZT_OP entries of
// op_list.h. Each entry point (csrc/kernels/ops*.cpp) validates its arguments, then dispatches
// on the stream's kind (dispatch.h): CPU → the cpu_ops kernel (csrc/kernels/cpu/cpu_*.cpp) run on
// the stream's worker thread; CUDA → the cuda_ops launcher (csrc/kernels/cuda/*.cu) on the stream.
//
// Conventions
//  * All tensors are row-major, contiguous. Shapes are in the comments: B batch, T time,
//    C channels, H heads, V vocab, N rows (= B*T for token ops).
//  * "act" tensors (activations, params, grads in compute dtype) have dtype F32, BF16 or F16 —
//    every tensor of one call has the same dtype unless stated. Math is fp32 inside.
//  * Grad outputs named d* ACCUMULATE (+=) unless the comment says "overwrites": the engine
//    zeroes gradient storage when it wants fresh gradients (llm.c's convention).
//  * Reductions are deterministic (fixed order, no float atomics): repeated runs are bitwise equal.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/math.h"
#include "zerotrain/kernels/optimizer_math.h"
#include "zerotrain/kernels/vector_path.h"  // AdamChunk

namespace zt::ops {

#define ZT_OP(name, params, args) void name ZT_STREAM_PARAMS params;
#include "zerotrain/kernels/op_list.h"

}  // namespace zt::ops
