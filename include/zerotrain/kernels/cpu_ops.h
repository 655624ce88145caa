// cpu_ops.h — CPU kernels of every op in op_list.h: same semantics as the zt::ops /
// zt::zero_ops entry points minus the stream. A kernel runs synchronously on the calling thread
// (the CpuStream worker, queued by dispatch.h) on host memory. Arguments are already validated
// by the entry points; kernels only ZT_CHECK data-dependent invariants (token / target ids in
// range). Kernel ops: csrc/kernels/cpu/cpu_*.cpp; engine ops: csrc/zero/zero_ops.cpp.
//
// Determinism: every reduction has an order fixed by the shapes alone (never by the OpenMP
// thread count), so repeated runs — with any OMP_NUM_THREADS — are bitwise equal.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/math.h"
#include "zerotrain/kernels/vector_path.h"  // AdamChunk
#include "zerotrain/kernels/optimizer_math.h"

namespace zt::cpu_ops {

#define ZT_OP(name, params, args) void name params;
#define ZT_ENGINE_OP(name, params, args) void name params;
#include "zerotrain/kernels/op_list.h"

}  // namespace zt::cpu_ops
