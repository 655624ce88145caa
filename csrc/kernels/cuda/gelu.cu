// gelu.cu — GELU (tanh approximation) and ReLU, forward and backward, on the CUDA backend.
// Per-element math is math::gelu / gelu_grad / relu / relu_grad (math.h), shared with the CPU.
// Forward overwrites out; backward accumulates dinp += dout * f'(inp) with one rounding.
#include "cuda_common.cuh"
#include "map_kernel.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

struct GeluOp {
  __device__ float operator()(int64_t, float x, float, float) const { return math::gelu(x); }
};
struct ReluOp {
  __device__ float operator()(int64_t, float x, float, float) const { return math::relu(x); }
};
// Inputs: (dinp, inp, dout).
struct GeluBackOp {
  __device__ float operator()(int64_t, float dinp, float x, float dout) const { return dinp + dout * math::gelu_grad(x); }
};
struct ReluBackOp {
  __device__ float operator()(int64_t, float dinp, float x, float dout) const { return dinp + dout * math::relu_grad(x); }
};

template <typename Op>
void forward(Stream& s, const TensorView& out, const TensorView& inp) {
  ZT_DISPATCH_DTYPE(out.dtype, T,
                    launch_map<T, T, 1>(s, out.numel(), static_cast<T*>(out.data), static_cast<const T*>(inp.data),
                                        nullptr, nullptr, Op{}));
}
template <typename Op>
void backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  ZT_DISPATCH_DTYPE(dinp.dtype, T,
                    launch_map<T, T, 3>(s, dinp.numel(), static_cast<T*>(dinp.data), static_cast<const T*>(dinp.data),
                                        static_cast<const T*>(inp.data), static_cast<const T*>(dout.data), Op{}));
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void gelu_forward(Stream& s, const TensorView& out, const TensorView& inp) { forward<GeluOp>(s, out, inp); }
void relu_forward(Stream& s, const TensorView& out, const TensorView& inp) { forward<ReluOp>(s, out, inp); }
void gelu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  backward<GeluBackOp>(s, dinp, inp, dout);
}
void relu_backward(Stream& s, const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  backward<ReluBackOp>(s, dinp, inp, dout);
}

}  // namespace zt::cuda_ops
