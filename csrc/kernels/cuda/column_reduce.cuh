// column_reduce.cuh — deterministic column sums over N rows for bias_grad and layernorm's
// dweight/dbias:  out_k[c] += sum_r f_k(r, c)  for k < NOUT, c < C.
//
// Two passes, both in a fixed order that depends only on (N, C), never on the GPU:
//  1. grid (ceil(C/32), chunks): block (32, 8) sums rows [chunk*R, chunk*R + R) of a 32-column
//     tile — thread (x, y) takes rows y, y+8, ...; then the 8 partial sums are added in y order.
//     Result partial[chunk][k][c] (fp32, in the stream's scratch).
//  2. one thread per column adds partial[0..chunks) in chunk order, then adds the total to
//     out_k[c] in fp32 and rounds once to the output's dtype (the compute dtype T, or fp32:
//     GradOut).
#pragma once
#include "cuda_common.cuh"

namespace zt::cuda_detail {

constexpr int kColTile = 32, kColRowsPerThreadBlock = 8;

inline int64_t colreduce_rows_per_chunk(int64_t N) {
  int64_t r = 64;
  while ((N + r - 1) / r > 65535) r *= 2;  // grid.y limit
  return r;
}

// F: __device__ void operator()(int64_t r, int64_t c, float (&v)[NOUT]) const  — adds row r's terms.
template <int NOUT, typename F>
__global__ void colreduce_partial_kernel(int64_t N, int64_t C, int64_t rows_per_chunk, float* partial, F f) {
  __shared__ float sm[NOUT][kColRowsPerThreadBlock][kColTile + 1];
  int64_t c = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  int64_t r1 = min(N, r0 + rows_per_chunk);
  float acc[NOUT];
#pragma unroll
  for (int k = 0; k < NOUT; ++k) acc[k] = 0.0f;
  if (c < C) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColRowsPerThreadBlock) f(r, c, acc);
  }
#pragma unroll
  for (int k = 0; k < NOUT; ++k) sm[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
#pragma unroll
    for (int k = 0; k < NOUT; ++k) {
      float s = 0.0f;
      for (int y = 0; y < kColRowsPerThreadBlock; ++y) s += sm[k][y][threadIdx.x];
      partial[(static_cast<int64_t>(blockIdx.y) * NOUT + k) * C + c] = s;
    }
  }
}

template <typename T, int NOUT> struct ColOutputs { GradOut<T> p[NOUT]; };

template <typename T, int NOUT>
__global__ void colreduce_finish_kernel(int64_t C, int64_t chunks, const float* partial, ColOutputs<T, NOUT> outs) {
  int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
#pragma unroll
  for (int k = 0; k < NOUT; ++k) {
    float s = 0.0f;
    for (int64_t j = 0; j < chunks; ++j) s += partial[(j * NOUT + k) * C + c];
    outs.p[k].add(c, s);
  }
}

template <typename T, int NOUT, typename F>
void launch_colreduce(Stream& s, int64_t N, int64_t C, ColOutputs<T, NOUT> outs, F f) {
  if (C == 0) return;
  int64_t R = colreduce_rows_per_chunk(N);
  int64_t chunks = N == 0 ? 0 : (N + R - 1) / R;
  if (chunks == 0) return;  // nothing to add
  auto* partial = static_cast<float*>(scratch(s, static_cast<size_t>(chunks * NOUT * C) * sizeof(float)));
  dim3 block(kColTile, kColRowsPerThreadBlock);
  dim3 grid(static_cast<unsigned>((C + kColTile - 1) / kColTile), static_cast<unsigned>(chunks));
  colreduce_partial_kernel<NOUT, F><<<grid, block, 0, native(s)>>>(N, C, R, partial, f);
  ZT_CUDA_LAUNCH_CHECK();
  colreduce_finish_kernel<T, NOUT><<<static_cast<unsigned>((C + 255) / 256), 256, 0, native(s)>>>(C, chunks, partial, outs);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::cuda_detail
