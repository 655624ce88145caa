// map_kernel.cuh — one elementwise kernel template for the memory-bound ops (residual_add,
// scale, cast, bias_add, activations): out[i] = op(i, in0[i], in1[i], in2[i]) for i < n.
//
// Vector path (vector_split, vector_path.h, chosen on the host from the actual addresses):
// elements [0, head) scalar, then groups of 8 consecutive elements with 128-bit loads/stores
// per operand (one 16 B access for 16-bit types, two for fp32), then a scalar tail. head is the
// smallest h < 8 that makes every operand's element h 16-byte aligned (views offset by the same
// number of elements still vectorise after a short head); operands misaligned by different
// amounts run the scalar grid-stride loop only. `out` may alias any input: every element is
// read and written by the same thread, reads first. Per-element math is op's, identical on both
// paths (the path changes only how elements are moved).
#pragma once
#include "cuda_common.cuh"
#include "zerotrain/kernels/vector_path.h"

namespace zt::cuda_detail {

constexpr int kMapChunk = static_cast<int>(kVecGroup);
// 8 elements, 16-byte aligned: the compiler emits one (16-bit T) or two (fp32) 128-bit accesses.
template <typename T> struct alignas(16) MapChunk { T v[kMapChunk]; };

// 8 elements at p (16-byte aligned), widened to fp32 / rounded (RNE) from fp32.
template <typename T> __device__ __forceinline__ void load_group_typed(float (&dst)[kMapChunk], const T* p) {
  const MapChunk<T> c = *reinterpret_cast<const MapChunk<T>*>(p);
#pragma unroll
  for (int k = 0; k < kMapChunk; ++k) dst[k] = to_f32(c.v[k]);
}
template <typename T> __device__ __forceinline__ void store_group_typed(T* p, const float (&src)[kMapChunk]) {
  MapChunk<T> c;
#pragma unroll
  for (int k = 0; k < kMapChunk; ++k) c.v[k] = from_f32<T>(src[k]);
  *reinterpret_cast<MapChunk<T>*>(p) = c;
}

// Vector groups c < groups start at element head + 8c; scalar items j < head + (n - tail) are
// element j (j < head) or tail + (j - head).
template <typename TI, typename TO, int NIN, typename Op>
__global__ void map_kernel(int64_t n, TO* out, const TI* in0, const TI* in1, const TI* in2, int64_t head,
                           int64_t groups, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t c = tid; c < groups; c += stride) {
    const int64_t i0 = head + c * kMapChunk;
    MapChunk<TI> a{}, b{}, d{};
    if (NIN > 0) a = *reinterpret_cast<const MapChunk<TI>*>(in0 + i0);
    if (NIN > 1) b = *reinterpret_cast<const MapChunk<TI>*>(in1 + i0);
    if (NIN > 2) d = *reinterpret_cast<const MapChunk<TI>*>(in2 + i0);
    MapChunk<TO> r;
#pragma unroll
    for (int k = 0; k < kMapChunk; ++k) {
      float x0 = NIN > 0 ? to_f32(a.v[k]) : 0.0f;
      float x1 = NIN > 1 ? to_f32(b.v[k]) : 0.0f;
      float x2 = NIN > 2 ? to_f32(d.v[k]) : 0.0f;
      r.v[k] = from_f32<TO>(op(i0 + k, x0, x1, x2));
    }
    *reinterpret_cast<MapChunk<TO>*>(out + i0) = r;
  }
  const int64_t tail = head + groups * kMapChunk;
  const int64_t scalar_items = head + (n - tail);
  for (int64_t j = tid; j < scalar_items; j += stride) {
    const int64_t i = j < head ? j : tail + (j - head);
    float x0 = NIN > 0 ? to_f32(in0[i]) : 0.0f;
    float x1 = NIN > 1 ? to_f32(in1[i]) : 0.0f;
    float x2 = NIN > 2 ? to_f32(in2[i]) : 0.0f;
    out[i] = from_f32<TO>(op(i, x0, x1, x2));
  }
}

// Launch out = op(i, in...) over n elements on s. Unused inputs are nullptr.
template <typename TI, typename TO, int NIN, typename Op>
void launch_map(Stream& s, int64_t n, TO* out, const TI* in0, const TI* in1, const TI* in2, Op op) {
  if (n == 0) return;
  const VecOperand operands[4] = {{out, sizeof(TO)}, {in0, sizeof(TI)}, {in1, sizeof(TI)}, {in2, sizeof(TI)}};
  const VecSplit split = vector_split(n, operands, 4);
  constexpr int kBlock = 256;
  const int64_t items = split.groups + split.head + (n - split.tail_begin());  // per-thread work items
  const unsigned grid = grid_for(items, kBlock);
  map_kernel<TI, TO, NIN, Op><<<grid, kBlock, 0, native(s)>>>(n, out, in0, in1, in2, split.head, split.groups, op);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::cuda_detail
