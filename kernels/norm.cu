// norm.cu — squared L2 norm accumulated in double, deterministic, on the CUDA backend.
// Pass 1: block c sums elements [c*kChunk, (c+1)*kChunk) (thread k takes k, k+256, ...; then a
// fixed-order block reduction) into partial[c]. Pass 2: one block adds the partials (thread k
// takes k, k+1024, ...; then the block reduction) and overwrites *out. The order depends only
// on n, so repeated runs — on any GPU — are bitwise equal. Non-finite input propagates.
#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

constexpr int kNormThreads = 256;
constexpr int64_t kNormChunk = kNormThreads * 32;
constexpr int kFinishThreads = 1024;

template <typename T>
__global__ void squared_norm_partial_kernel(double* partial, const T* x, int64_t n) {
  __shared__ double red[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kNormChunk;
  const int64_t end = min(n, begin + kNormChunk);
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kNormThreads) {
    double v = to_f32(x[i]);
    acc += v * v;
  }
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void squared_norm_finish_kernel(double* out, const double* partial, int64_t chunks) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < chunks; i += kFinishThreads) acc += partial[i];
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) *out = acc;
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void squared_norm(Stream& s, double* out, const TensorView& src) {
  const int64_t n = src.numel();
  if (n == 0) {
    ZT_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), native(s)));  // 0.0 is all-zero bits
    return;
  }
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  ZT_CHECK(chunks <= INT32_MAX, "squared_norm: tensor too large");
  auto* partial = static_cast<double*>(scratch(s, static_cast<size_t>(chunks) * sizeof(double)));
  ZT_DISPATCH_DTYPE(src.dtype, X,
                    squared_norm_partial_kernel<X><<<static_cast<unsigned>(chunks), kNormThreads, 0, native(s)>>>(
                        partial, static_cast<const X*>(src.data), n);
                    ZT_CUDA_LAUNCH_CHECK());
  squared_norm_finish_kernel<<<1, kFinishThreads, 0, native(s)>>>(out, partial, chunks);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::cuda_ops
