// host_reduce.h — the MPI backend's reduction kernel: a fixed-order fp32 reduction of n
// contributions, so the result does not depend on which rank's data arrived first.
//
//   dst[i] = round_to_dtype( src[0][i] ⊕ src[1][i] ⊕ ... ⊕ src[n-1][i] )   (left to right)
//
// Values are widened to fp32, combined left to right in fp32 (sum starts from src[0][i], so
// -0 stays -0 with one source), optionally divided by `divisor` (avg), then rounded once to the
// dtype (round to nearest even). Max propagates NaN. Sum and avg take 8 lanes at a time where
// cpu::active_isa() is AVX2 or above, with the same bits (a NaN stays a NaN; of several NaN
// contributions, whose payload comes out is not fixed). One source with nothing to divide is copied
// bit for bit (the round trip through fp32 is exact, but for a signalling NaN's quiet bit). dst may be the same pointer as any source
// (each tile of elements is read from every source before it is written); it must not
// partially overlap one.
#pragma once
#include <cstddef>

#include "zerotrain/core/dtype.h"

namespace zt {

enum class ReduceOp : uint8_t { Sum = 0, Avg, Max };
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max"

void reduce_in_order(const void* const* srcs, int nsrc, void* dst, size_t count, DType dt, ReduceOp op,
                     int divisor);

}  // namespace zt
