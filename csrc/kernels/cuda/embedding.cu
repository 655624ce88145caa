// embedding.cu — token + position embedding on the CUDA backend.
//
// Forward: out[b,t,:] = wte[tokens[b,t]] + wpe[t] (fp32 add, one rounding), coalesced over C;
// with wpe absent (nullptr: rotary positions) out = wte[tokens[b,t]], and backward skips dwpe.
// Backward, deterministic without float atomics (same grouping as the CPU backend):
//  1. stable radix sort of (token, position) pairs by token (CUB; stable, so each token's
//     positions stay in increasing order);
//  2. one block per sorted index; the block at the start of a token's run sums that run's
//     dout rows in position order in fp32 and adds the sum to dwte[token] once;
//  3. dwpe[t,c] += sum over b = 0..B-1 in order (one thread per (t, c)).
// Token ids outside [0, V) are a data bug the data layer must catch; here they stop the kernel
// with a device-side trap (reported at the next synchronisation) instead of reading out of bounds.
#include <cub/device/device_radix_sort.cuh>

#include <cstdio>

#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

__device__ __forceinline__ void check_token(int32_t tok, int64_t V, int64_t i) {
  if (tok < 0 || tok >= V) {
    printf("zerotrain embedding: token id %d at position %lld outside the vocabulary [0, %lld)\n", tok,
           static_cast<long long>(i), static_cast<long long>(V));
    __trap();
  }
}

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t N,
                                         int64_t T_, int64_t C, int64_t V) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < N * C; idx += stride) {
    int64_t i = idx / C, c = idx - i * C;
    int32_t tok = tokens[i];
    check_token(tok, V, i);
    const T te = wte[static_cast<int64_t>(tok) * C + c];
    out[idx] = wpe == nullptr ? te : from_f32<T>(to_f32(te) + to_f32(wpe[(i % T_) * C + c]));
  }
}

// positions[i] = i, and every token id checked once before the sort.
__global__ void iota_check_kernel(int32_t* positions, const int32_t* tokens, int64_t N, int64_t V) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < N; i += stride) {
    check_token(tokens[i], V, i);
    positions[i] = static_cast<int32_t>(i);
  }
}

template <typename T>
__global__ void dwte_runs_kernel(GradOut<T> dwte, const T* dout, const int32_t* sorted_tokens,
                                 const int32_t* sorted_pos, int64_t N, int64_t C) {
  const int64_t start = blockIdx.x;
  const int32_t tok = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == tok) return;  // not the start of a run
  int64_t end = start + 1;
  while (end < N && sorted_tokens[end] == tok) ++end;
  const int64_t row = static_cast<int64_t>(tok) * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t k = start; k < end; ++k) acc += to_f32(dout[static_cast<int64_t>(sorted_pos[k]) * C + c]);
    dwte.add(row + c, acc);
  }
}

template <typename T>
__global__ void dwpe_kernel(GradOut<T> dwpe, const T* dout, int64_t B, int64_t T_, int64_t C) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < T_ * C; idx += stride) {
    float acc = 0.0f;
    for (int64_t b = 0; b < B; ++b) acc += to_f32(dout[b * T_ * C + idx]);
    dwpe.add(idx, acc);
  }
}

int bits_for(int64_t V) {
  int bits = 1;
  while (bits < 31 && (int64_t(1) << bits) < V) ++bits;
  return bits;
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void embedding_forward(Stream& s, const TensorView& out, const int32_t* tokens, const TensorView& wte,
                       const TensorView& wpe, int64_t B, int64_t T, int64_t C) {
  const int64_t N = B * T, V = wte.numel() / C;
  if (N == 0) return;
  ZT_DISPATCH_DTYPE(out.dtype, X,
                    embedding_forward_kernel<X><<<grid_for(N * C, 256), 256, 0, native(s)>>>(
                        static_cast<X*>(out.data), tokens, static_cast<const X*>(wte.data),
                        static_cast<const X*>(wpe.data), N, T, C, V);
                    ZT_CUDA_LAUNCH_CHECK());
}

void embedding_backward(Stream& s, const TensorView& dwte, const TensorView& dwpe, const TensorView& dout,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C) {
  const int64_t N = B * T, V = dwte.numel() / C;
  if (N == 0) return;
  ZT_CHECK(N <= INT32_MAX, "embedding_backward: B*T must fit int32 for the sort");
  const int n = static_cast<int>(N);
  const int end_bit = bits_for(V);
  // Scratch layout: positions[N] | sorted_tokens[N] | sorted_pos[N] | CUB temp storage.
  size_t temp_bytes = 0;
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, static_cast<int32_t*>(nullptr),
                                                static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                                n, 0, end_bit, native(s)));
  const size_t arr = align_up(static_cast<size_t>(N) * sizeof(int32_t));
  char* base = static_cast<char*>(scratch(s, 3 * arr + temp_bytes));
  auto* positions = reinterpret_cast<int32_t*>(base);
  auto* sorted_tokens = reinterpret_cast<int32_t*>(base + arr);
  auto* sorted_pos = reinterpret_cast<int32_t*>(base + 2 * arr);
  void* temp = base + 3 * arr;

  iota_check_kernel<<<grid_for(N, 256), 256, 0, native(s)>>>(positions, tokens, N, V);
  ZT_CUDA_LAUNCH_CHECK();
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, positions, sorted_pos, n, 0,
                                                end_bit, native(s)));
  ZT_DISPATCH_DTYPE(dout.dtype, X, {  // dwte, dwpe: dout's dtype or fp32
    const X* dy = static_cast<const X*>(dout.data);
    int threads = C >= 256 ? 256 : static_cast<int>((C + 31) / 32 * 32);
    dwte_runs_kernel<X><<<static_cast<unsigned>(N), threads, 0, native(s)>>>(grad_out<X>(dwte), dy, sorted_tokens,
                                                                             sorted_pos, N, C);
    ZT_CUDA_LAUNCH_CHECK();
    if (dwpe.data != nullptr) {
      dwpe_kernel<X><<<grid_for(T * C, 256), 256, 0, native(s)>>>(grad_out<X>(dwpe), dy, B, T, C);
      ZT_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace zt::cuda_ops
