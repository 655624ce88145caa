// rope.cu — rotary position embedding (Hugging Face rotate-half), in place, on the CUDA backend.
// One thread per (row, head, pair i < hs/2): it reads x1 = x[i], x2 = x[i + hs/2] and the
// table's cos / sin of position pos + t, then writes both (no other thread touches the pair).
// Backward applies the transposed rotation: the forward formula with sin negated.
#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

template <typename T>
__global__ void rope_kernel(T* x, const float* table, int64_t rows, int64_t T_, int64_t nh, int64_t hs, int64_t pos,
                            float sign) {
  const int64_t half = hs / 2;
  const int64_t pairs_per_row = nh * half;
  const int64_t total = rows * pairs_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t r = idx / pairs_per_row;
    const int64_t rem = idx - r * pairs_per_row;
    const int64_t h = rem / half, i = rem - h * half;
    const float* cs = table + (pos + r % T_) * hs;
    const float c = cs[i], s = sign * cs[half + i];
    T* x1 = x + r * nh * hs + h * hs + i;
    T* x2 = x1 + half;
    const float a = to_f32(*x1), b = to_f32(*x2);
    *x1 = from_f32<T>(a * c - b * s);
    *x2 = from_f32<T>(b * c + a * s);
  }
}

void rope_launch(Stream& s, const TensorView& x, const TensorView& table, int64_t B, int64_t T_, int64_t nh,
                 int64_t hs, int64_t pos, float sign) {
  const int64_t rows = B * T_, total = rows * nh * (hs / 2);
  if (total == 0) return;
  ZT_DISPATCH_DTYPE(x.dtype, X, {
    rope_kernel<X><<<grid_for(total, 256), 256, 0, native(s)>>>(static_cast<X*>(x.data),
                                                                 static_cast<const float*>(table.data), rows, T_, nh,
                                                                 hs, pos, sign);
    ZT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void rope_forward(Stream& s, const TensorView& x, const TensorView& table, int64_t B, int64_t T, int64_t nh,
                  int64_t hs, int64_t pos) {
  rope_launch(s, x, table, B, T, nh, hs, pos, 1.0f);
}

void rope_backward(Stream& s, const TensorView& dx, const TensorView& table, int64_t B, int64_t T, int64_t nh,
                   int64_t hs, int64_t pos) {
  rope_launch(s, dx, table, B, T, nh, hs, pos, -1.0f);
}

}  // namespace zt::cuda_ops
