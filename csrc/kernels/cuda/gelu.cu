// gelu.cu — GELU (tanh approximation), ReLU and SwiGLU, forward and backward, on the CUDA backend.
// Per-element math is math::gelu / gelu_grad / relu / relu_grad / silu / silu_grad (math.h), shared
// with the CPU. GELU/ReLU forward overwrites out; backward accumulates dinp += dout * f'(inp) with
// one rounding. SwiGLU forward overwrites out = silu(gate) up; backward overwrites dgate and dup,
// each thread reading its element's gate, up and dout before writing (dgate may alias gate, dup up).
#include "cuda_common.cuh"
#include "map_kernel.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/math_llama.h"

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

// Inputs: (gate, up).
struct SwigluOp {
  __device__ float operator()(int64_t, float g, float u, float) const { return math::silu(g) * u; }
};

template <typename T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = to_f32(gate[i]), u = to_f32(up[i]), dy = to_f32(dout[i]);
    const float dg = dy * u * math::silu_grad(g), du = dy * math::silu(g);
    dgate[i] = from_f32<T>(dg);
    dup[i] = from_f32<T>(du);
  }
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

void swiglu_forward(Stream& s, const TensorView& out, const TensorView& gate, const TensorView& up) {
  ZT_DISPATCH_DTYPE(out.dtype, T,
                    launch_map<T, T, 2>(s, out.numel(), static_cast<T*>(out.data), static_cast<const T*>(gate.data),
                                        static_cast<const T*>(up.data), nullptr, SwigluOp{}));
}

void swiglu_backward(Stream& s, const TensorView& dgate, const TensorView& dup, const TensorView& dout,
                     const TensorView& gate, const TensorView& up) {
  const int64_t n = dgate.numel();
  if (n == 0) return;
  ZT_DISPATCH_DTYPE(dgate.dtype, T, {
    swiglu_backward_kernel<T><<<grid_for(n, 256), 256, 0, native(s)>>>(
        static_cast<T*>(dgate.data), static_cast<T*>(dup.data), static_cast<const T*>(dout.data),
        static_cast<const T*>(gate.data), static_cast<const T*>(up.data), n);
    ZT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace zt::cuda_ops
