// cuda_ops.h — CUDA launchers of every op in op_list.h (csrc/kernels/cuda/*.cu): same signatures and
// semantics as the zt::ops / zt::zero_ops entry points, which validate the arguments and reach
// these through dispatch.h when the stream is a CUDA stream. A launcher only enqueues work on
// s's cudaStream_t. Built only with the CUDA backend.
#pragma once
#include "zerotrain/kernels/ops.h"
#include "zerotrain/kernels/optimizer_math.h"

#if defined(ZT_WITH_CUDA)
namespace zt::cuda_ops {

#define ZT_OP(name, params, args) void name ZT_STREAM_PARAMS params;
#define ZT_ENGINE_OP(name, params, args) void name ZT_STREAM_PARAMS params;
#include "zerotrain/kernels/op_list.h"

// Per-stream resources the launchers keep (csrc/kernels/cuda/stream_resources.cu): a cuBLAS handle with
// a 32 MiB private workspace per stream that ran a GEMM, and a growable scratch buffer per
// stream (two-pass reductions, attention's 16-bit probabilities, the embedding sort). These
// bytes are not in the Device's MemoryTracker; the memory report can add them from here.
size_t workspace_bytes();
// Drains each cached stream and frees every handle and buffer above (e.g. before a memory
// measurement or at shutdown). Must not race with ops being issued.
void release_workspaces();
// Frees the resources of one stream now (after draining it); they are recreated on the
// next op. Destroying a CUDA stream does this by itself (the release hook in core/device.h).
void release_stream_resources(Stream& s);

// ZT_CUDA_SYNC_CHECK=1: after every op's launch, synchronise its stream and check for an error,
// so a kernel fault is reported with the op that caused it (slow; for debugging). Fatal error
// "CUDA error in op `name` on stream `stream`: <cudaGetErrorString>".
void sync_check_after(Stream& s, const char* op);

}  // namespace zt::cuda_ops
#endif

namespace zt::kernels {
// Whether ZT_CUDA_SYNC_CHECK asks for per-op synchronisation: unset, "", "0" -> false; "1" ->
// true; anything else -> InputError naming the variable (read once per process by dispatch).
bool parse_sync_check(const char* value);
bool sync_check_enabled();
}  // namespace zt::kernels
