// dispatch.h — the one backend switch of every op in op_list.h: dispatch::name(s, args) runs
// cpu_ops::name or cuda_ops::name by the stream's kind. Entry points validate, then call it.
//  * CPU: the kernel is queued on the stream's worker thread with every argument copied (views
//    by value). The caller keeps the storage behind views and raw pointers (tokens, targets,
//    squared_norm's out) alive until the stream has run the op.
//  * CUDA: the launcher enqueues the kernels on s's cudaStream_t before returning.
#pragma once
#include "zerotrain/core/check.h"
#include "zerotrain/core/cpu_stream.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/cuda_ops.h"

#if defined(ZT_WITH_CUDA)
#define ZT_ON_CUDA(...) __VA_ARGS__
// ZT_CUDA_SYNC_CHECK=1: each op's stream is synchronised and checked right after its launch.
#define ZT_CUDA_SYNC_CHECK_AFTER(name) \
  if (::zt::kernels::sync_check_enabled()) cuda_ops::sync_check_after(s, #name)
#else
#define ZT_ON_CUDA(...) ZT_CHECK(false, "a CUDA stream was passed to a kernel, but the CUDA backend is not built")
#endif

namespace zt::dispatch {

#define ZT_DISPATCH(name, params, args)                   \
  inline void name ZT_STREAM_PARAMS params {              \
    if (s.kind() == DeviceKind::CPU) {                    \
      cpu_enqueue(s, [=] { cpu_ops::name args; });        \
    } else {                                              \
      ZT_ON_CUDA(cuda_ops::name ZT_STREAM_ARGS args;      \
                 ZT_CUDA_SYNC_CHECK_AFTER(name));         \
    }                                                     \
  }
#define ZT_OP ZT_DISPATCH
#define ZT_ENGINE_OP ZT_DISPATCH
#include "zerotrain/kernels/op_list.h"
#undef ZT_DISPATCH
#undef ZT_ON_CUDA
#undef ZT_CUDA_SYNC_CHECK_AFTER

}  // namespace zt::dispatch
