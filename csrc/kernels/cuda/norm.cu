// norm.cu — squared L2 norms accumulated in double, deterministic, on the CUDA backend: of a
// tensor (squared_norm) and of LAMB's update direction (lamb_direction_sq_norm, optimizer_math.h).
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

// Element i of the vector being normed.
template <typename T>
struct TensorElem {
  const T* x;
  __device__ double operator()(int64_t i) const { return to_f32(x[i]); }
};

// LAMB's update direction from the master weights p and the moments m, v.
struct LambDirectionElem {
  const void *p, *m, *v;
  DType pt, mt;
  optim::LambParams a;
  __device__ double operator()(int64_t i) const {
    return optim::lamb_direction(ld_dyn(p, pt, i), ld_dyn(m, mt, i), ld_dyn(v, mt, i), a);
  }
};

template <typename Elem>
__global__ void squared_norm_partial_kernel(double* partial, Elem elem, int64_t n) {
  __shared__ double red[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kNormChunk;
  const int64_t end = min(n, begin + kNormChunk);
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kNormThreads) {
    const double v = elem(i);
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

// *out = Σ elem(i)² over [0, n), both passes on s.
template <typename Elem>
void squared_norm_of(Stream& s, double* out, int64_t n, Elem elem) {
  if (n == 0) {
    ZT_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), native(s)));  // 0.0 is all-zero bits
    return;
  }
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  ZT_CHECK(chunks <= INT32_MAX, "squared_norm: tensor too large");
  auto* partial = static_cast<double*>(scratch(s, static_cast<size_t>(chunks) * sizeof(double)));
  squared_norm_partial_kernel<<<static_cast<unsigned>(chunks), kNormThreads, 0, native(s)>>>(partial, elem, n);
  ZT_CUDA_LAUNCH_CHECK();
  squared_norm_finish_kernel<<<1, kFinishThreads, 0, native(s)>>>(out, partial, chunks);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void squared_norm(Stream& s, double* out, const TensorView& src) {
  ZT_DISPATCH_DTYPE(src.dtype, X,
                    squared_norm_of(s, out, src.numel(), TensorElem<X>{static_cast<const X*>(src.data)}));
}

void lamb_direction_sq_norm(Stream& s, double* out, const TensorView& p, const TensorView& m, const TensorView& v,
                            const optim::LambParams& a) {
  ZT_CHECK(m.dtype == v.dtype, "lamb_direction_sq_norm: exp_avg and exp_avg_sq must share a dtype");
  squared_norm_of(s, out, p.numel(), LambDirectionElem{p.data, m.data, v.data, p.dtype, m.dtype, a});
}

}  // namespace zt::cuda_ops
