// map_kernel.cuh — one elementwise kernel template for the memory-bound ops (residual_add,
// scale, cast, bias_add, activations): out[i] = op(i, in0[i], in1[i], in2[i]) for i < n.
//
// Each thread handles chunks of 8 consecutive elements with one vector load per operand
// (16 B for 16-bit types, 32 B for fp32) when every pointer is aligned to a chunk; otherwise
// (views sliced at odd offsets) a scalar grid-stride loop runs. `out` may alias any input:
// every element is read and written by the same thread, reads first.
#pragma once
#include "cuda_common.cuh"

namespace zt::cuda_detail {

constexpr int kMapChunk = 8;
template <typename T> struct alignas(sizeof(T) * kMapChunk) MapChunk { T v[kMapChunk]; };

template <typename TI, typename TO, int NIN, typename Op>
__global__ void map_kernel(int64_t n, TO* out, const TI* in0, const TI* in1, const TI* in2, bool vectorized, Op op) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t scalar_from = 0;
  if (vectorized) {
    int64_t nchunks = n / kMapChunk;
    for (int64_t c = tid; c < nchunks; c += stride) {
      MapChunk<TI> a{}, b{}, d{};
      if (NIN > 0) a = reinterpret_cast<const MapChunk<TI>*>(in0)[c];
      if (NIN > 1) b = reinterpret_cast<const MapChunk<TI>*>(in1)[c];
      if (NIN > 2) d = reinterpret_cast<const MapChunk<TI>*>(in2)[c];
      MapChunk<TO> r;
#pragma unroll
      for (int k = 0; k < kMapChunk; ++k) {
        float x0 = NIN > 0 ? to_f32(a.v[k]) : 0.0f;
        float x1 = NIN > 1 ? to_f32(b.v[k]) : 0.0f;
        float x2 = NIN > 2 ? to_f32(d.v[k]) : 0.0f;
        r.v[k] = from_f32<TO>(op(c * kMapChunk + k, x0, x1, x2));
      }
      reinterpret_cast<MapChunk<TO>*>(out)[c] = r;
    }
    scalar_from = nchunks * kMapChunk;
  }
  for (int64_t i = scalar_from + tid; i < n; i += stride) {
    float x0 = NIN > 0 ? to_f32(in0[i]) : 0.0f;
    float x1 = NIN > 1 ? to_f32(in1[i]) : 0.0f;
    float x2 = NIN > 2 ? to_f32(in2[i]) : 0.0f;
    out[i] = from_f32<TO>(op(i, x0, x1, x2));
  }
}

inline bool chunk_aligned(const void* p, size_t elem_bytes) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % (elem_bytes * kMapChunk) == 0;
}

// Launch out = op(i, in...) over n elements on s. Unused inputs are nullptr.
template <typename TI, typename TO, int NIN, typename Op>
void launch_map(Stream& s, int64_t n, TO* out, const TI* in0, const TI* in1, const TI* in2, Op op) {
  if (n == 0) return;
  bool vec = chunk_aligned(out, sizeof(TO)) && chunk_aligned(in0, sizeof(TI)) && chunk_aligned(in1, sizeof(TI)) &&
             chunk_aligned(in2, sizeof(TI));
  constexpr int kBlock = 256;
  unsigned grid = grid_for(vec ? (n + kMapChunk - 1) / kMapChunk : n, kBlock);
  map_kernel<TI, TO, NIN, Op><<<grid, kBlock, 0, native(s)>>>(n, out, in0, in1, in2, vec, op);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::cuda_detail
