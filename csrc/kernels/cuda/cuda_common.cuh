// cuda_common.cuh — helpers shared by the csrc/kernels/cuda/*.cu launchers (not a public header).
//
//  * dtype dispatch onto the storage types float / zt::bf16 / zt::fp16 (dtype.h), so every
//    conversion is the same round-to-nearest-even code the CPU backend runs;
//  * deterministic warp/block reductions (fixed butterfly / tree order, no atomics);
//  * per-(device, stream) resources: a cuBLAS handle with its own workspace and a growable
//    scratch buffer for two-pass reductions (see StreamResources).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "zerotrain/core/check_cuda.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/core/tensor.h"

namespace zt::cuda_detail {

inline cudaStream_t native(Stream& s) { return static_cast<cudaStream_t>(s.native_handle()); }

// Checks the launch that was just issued (configuration errors surface here; faults at sync).
#define ZT_CUDA_LAUNCH_CHECK() ZT_CUDA_CHECK(cudaGetLastError())

// Dispatch a runtime DType onto a storage type alias T (float, zt::bf16, zt::fp16).
#define ZT_DISPATCH_DTYPE(dtype, T, ...)                                      \
  switch (dtype) {                                                            \
    case ::zt::DType::F32: { using T = float; __VA_ARGS__; break; }           \
    case ::zt::DType::BF16: { using T = ::zt::bf16; __VA_ARGS__; break; }     \
    case ::zt::DType::F16: { using T = ::zt::fp16; __VA_ARGS__; break; }      \
    default: ZT_CHECK(false, "unknown dtype");                                \
  }

// Load/store through the shared conversions (dtype.h).
template <typename T> __device__ __forceinline__ float ld(const T* p, int64_t i) { return to_f32(p[i]); }
template <typename T> __device__ __forceinline__ void st(T* p, int64_t i, float v) { p[i] = from_f32<T>(v); }

// A parameter gradient that a backward kernel over compute-dtype T tensors adds into: stored as
// T, or as fp32 (gradients accumulated straight into the fp32 buffer, without a 16-bit copy).
// add(i, v): g[i] += v, rounded once to the gradient's dtype.
template <typename T>
struct GradOut {
  void* p;
  bool f32;
  __device__ __forceinline__ void add(int64_t i, float v) const {
    if (f32) {
      static_cast<float*>(p)[i] += v;
    } else {
      T* q = static_cast<T*>(p) + i;
      *q = from_f32<T>(to_f32(*q) + v);
    }
  }
};
template <typename T>
GradOut<T> grad_out(const TensorView& g) {
  return GradOut<T>{g.data, g.dtype == DType::F32};
}

// Runtime-typed load/store for kernels where a template per dtype would multiply instantiations
// (Adam's gradient and param_out). The branch is uniform across the grid.
__device__ __forceinline__ float ld_dyn(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::BF16: return to_f32(static_cast<const bf16*>(p)[i]);
    case DType::F16: return to_f32(static_cast<const fp16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}
__device__ __forceinline__ void st_dyn(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::BF16: static_cast<bf16*>(p)[i] = from_f32<bf16>(v); break;
    case DType::F16: static_cast<fp16*>(p)[i] = from_f32<fp16>(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// ---- reductions: every lane gets the same value, the order is fixed by the lane pattern ----
template <typename A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
// Block-wide sum/max for blockDim.x a multiple of 32 (<= 1024); `shared` holds >= 32 values.
// All threads receive the result. Deterministic: warp butterflies, then warp 0 over the warp results.
template <typename A> __device__ A block_sum(A v, A* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  A r = lane < nwarps ? shared[lane] : A(0);
  return warp_sum(r);
}
__device__ inline float block_max(float v, float* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? shared[lane] : -INFINITY;
  return warp_max(r);
}

// Grid size for a grid-stride loop over n items: enough blocks to fill the GPU, capped.
inline unsigned grid_for(int64_t n, int block, int64_t items_per_thread = 1) {
  int64_t per_block = static_cast<int64_t>(block) * items_per_thread;
  int64_t g = (n + per_block - 1) / per_block;
  if (g < 1) g = 1;
  if (g > 65535LL * 16) g = 65535LL * 16;
  return static_cast<unsigned>(g);
}

// ---- per-stream resources ------------------------------------------------------------------
// Owned by a process-wide cache (csrc/kernels/cuda/stream_resources.cu); destroyed with their stream
// (the release hook in core/device.h) or by cuda_ops::release_workspaces(). Invariant: an entry is used only by work issued on its
// stream, and ops on one stream are issued from one host thread at a time, so stream order
// alone guards the workspace and the scratch buffer.
struct StreamResources;
StreamResources& stream_resources(Stream& s);
// cuBLAS handle bound to s, with a private workspace (bitwise-reproducible algorithm choice).
void* cublas_handle(Stream& s);  // cublasHandle_t
// That handle's private workspace (created with it) and its size: cuBLASLt calls on s use it too
// (stream order serialises them with the cublasGemmEx calls that share it).
void* cublas_workspace(Stream& s, size_t* bytes);
// Scratch of at least `bytes` bytes on s's device, valid for work issued on s until the next
// scratch() call on s. Growing it synchronizes s once (warm-up only; steady state never syncs).
void* scratch(Stream& s, size_t bytes);

// Row-major strided-batched GEMM (gemm.cu), fp32 accumulation: for i < batch,
//   C_i[M,N] = alpha op(A_i) op(B_i) + beta C_i,  X_i = X + i*strideX (elements),
// op(A) is [M,K] (A_i stored [K,M] when trans_a), op(B) is [K,N] (B_i stored [N,K] when trans_b);
// lda/ldb/ldc are the row strides of the stored matrices. A and B share a dtype; C may be F32
// with 16-bit A/B (cuBLAS's mixed bf16/fp16-in, fp32-out mode).
void gemm_rowmajor(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const void* A, int64_t lda, int64_t strideA, const void* B, int64_t ldb, int64_t strideB,
                   DType ab_type, float beta, void* C, int64_t ldc, int64_t strideC, DType c_type,
                   int64_t batch);

// Round a byte offset up to 256 so carved sub-buffers stay aligned for vector loads.
inline size_t align_up(size_t b) { return (b + 255) & ~size_t(255); }

}  // namespace zt::cuda_detail
