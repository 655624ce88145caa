// loss.cu — fused softmax + cross-entropy and mean squared error on the CUDA backend.
//
// softmax_cross_entropy: one block per row of logits[N,V]. Pass 1 keeps a per-thread online
// (max, sum of exp) and combines them with deterministic block reductions; the target logit is
// read in pass 1, before any write, so dlogits may alias logits (each element is read and then
// written by the same thread). Pass 2 writes dloss * (softmax - onehot). A target < 0 is
// ignored (loss 0, zero gradient row); a target >= V traps (a data bug, like a bad token id).
// mse_loss: one warp per row; dpred may alias pred (same-lane read-then-write).
#include <cstdio>

#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

constexpr int kCeThreads = 512;

template <typename T>
__global__ void softmax_ce_kernel(float* losses, T* dlogits, const T* logits, const int32_t* targets, float dloss,
                                  int64_t V, int64_t ld) {  // rows ld apart; columns [V, ld) untouched
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  T* drow = dlogits + row * ld;
  if (target < 0) {
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) drow[j] = from_f32<T>(0.0f);
    if (threadIdx.x == 0) losses[row] = 0.0f;
    return;
  }
  if (target >= V) {
    if (threadIdx.x == 0)
      printf("zerotrain cross-entropy: target id %d in row %lld outside the vocabulary [0, %lld)\n", target,
             static_cast<long long>(row), static_cast<long long>(V));
    __trap();
  }
  const T* x = logits + row * ld;
  float m = -INFINITY, sum = 0.0f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    float v = to_f32(x[j]);
    if (v > m) {
      sum = sum * expf(m - v) + 1.0f;
      m = v;
    } else {
      sum += expf(v - m);
    }
  }
  const float target_logit = to_f32(x[target]);  // read before any thread writes drow
  const float gmax = block_max(m, red);
  const float total = block_sum(m == -INFINITY ? 0.0f : sum * expf(m - gmax), red);
  if (threadIdx.x == 0) losses[row] = logf(total) - (target_logit - gmax);
  const float inv = 1.0f / total;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    float p = expf(to_f32(x[j]) - gmax) * inv;
    drow[j] = from_f32<T>(dloss * (p - (j == target ? 1.0f : 0.0f)));
  }
}

constexpr int kMseWarps = 8;

template <typename T>
__global__ void mse_kernel(float* losses, T* dpred, const T* pred, const T* target, float dloss, int64_t N,
                           int64_t K) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kMseWarps + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= N) return;
  float sum = 0.0f;
  for (int64_t j = lane; j < K; j += 32) {
    int64_t i = row * K + j;
    float d = to_f32(pred[i]) - to_f32(target[i]);
    sum += d * d;
    dpred[i] = from_f32<T>(dloss * 2.0f * d / static_cast<float>(K));
  }
  sum = warp_sum(sum);
  if (lane == 0) losses[row] = K > 0 ? sum / static_cast<float>(K) : 0.0f;
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void softmax_cross_entropy_ld(Stream& s, const TensorView& losses, const TensorView& dlogits,
                              const TensorView& logits, const int32_t* targets, float dloss, int64_t V, int64_t ld) {
  const int64_t N = losses.numel();
  if (N == 0) return;
  ZT_CHECK(N <= INT32_MAX, "softmax_cross_entropy: too many rows for one launch");
  ZT_DISPATCH_DTYPE(logits.dtype, X,
                    softmax_ce_kernel<X><<<static_cast<unsigned>(N), kCeThreads, 0, native(s)>>>(
                        static_cast<float*>(losses.data), static_cast<X*>(dlogits.data),
                        static_cast<const X*>(logits.data), targets, dloss, V, ld);
                    ZT_CUDA_LAUNCH_CHECK());
}

void softmax_cross_entropy(Stream& s, const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                           const int32_t* targets, float dloss) {
  const int64_t N = losses.numel();
  if (N == 0) return;
  const int64_t V = logits.numel() / N;
  softmax_cross_entropy_ld(s, losses, dlogits, logits, targets, dloss, V, V);
}

void mse_loss(Stream& s, const TensorView& losses, const TensorView& dpred, const TensorView& pred,
              const TensorView& target, float dloss) {
  const int64_t N = losses.numel();
  if (N == 0) return;
  const int64_t K = pred.numel() / N;
  ZT_DISPATCH_DTYPE(pred.dtype, X,
                    mse_kernel<X><<<static_cast<unsigned>((N + kMseWarps - 1) / kMseWarps), kMseWarps * 32, 0,
                                    native(s)>>>(static_cast<float*>(losses.data), static_cast<X*>(dpred.data),
                                                 static_cast<const X*>(pred.data), static_cast<const X*>(target.data),
                                                 dloss, N, K);
                    ZT_CUDA_LAUNCH_CHECK());
}

}  // namespace zt::cuda_ops
