// elementwise.cu — residual_add, scale, cast, bias_add, bias_grad on the CUDA backend.
// All math in fp32, one rounding per output element (the same as the CPU backend).
#include "column_reduce.cuh"
#include "cuda_common.cuh"
#include "map_kernel.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

struct AddOp {
  __device__ float operator()(int64_t, float a, float b, float) const { return a + b; }
};
struct ScaleOp {
  float alpha;
  __device__ float operator()(int64_t, float x, float, float) const { return x * alpha; }
};
struct IdentityOp {
  __device__ float operator()(int64_t, float x, float, float) const { return x; }
};
// out[r, c] += bias[c], element i = r*C + c.
template <typename T> struct BiasAddOp {
  const T* bias;
  int64_t C;
  __device__ float operator()(int64_t i, float x, float, float) const { return x + to_f32(bias[i % C]); }
};
// dbias[c] += dout[r, c].
template <typename T> struct BiasGradTerm {
  const T* dout;
  int64_t C;
  __device__ void operator()(int64_t r, int64_t c, float (&v)[1]) const { v[0] += to_f32(dout[r * C + c]); }
};

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void residual_add(Stream& s, const TensorView& out, const TensorView& a, const TensorView& b) {
  ZT_DISPATCH_DTYPE(out.dtype, T,
                    launch_map<T, T, 2>(s, out.numel(), static_cast<T*>(out.data), static_cast<const T*>(a.data),
                                        static_cast<const T*>(b.data), nullptr, AddOp{}));
}

void scale(Stream& s, const TensorView& x, float alpha) {
  ZT_DISPATCH_DTYPE(x.dtype, T,
                    launch_map<T, T, 1>(s, x.numel(), static_cast<T*>(x.data), static_cast<const T*>(x.data),
                                        nullptr, nullptr, ScaleOp{alpha}));
}

void cast(Stream& s, const TensorView& dst, const TensorView& src) {
  if (dst.dtype == src.dtype) {  // a copy; overlapping ranges (memmove) go through scratch
    const size_t bytes = dst.nbytes();
    if (dst.data == src.data || bytes == 0) return;
    const char* d0 = static_cast<const char*>(dst.data);
    const char* s0 = static_cast<const char*>(src.data);
    if (d0 + bytes <= s0 || s0 + bytes <= d0) {
      ZT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice, native(s)));
    } else {
      void* tmp = scratch(s, bytes);
      ZT_CUDA_CHECK(cudaMemcpyAsync(tmp, src.data, bytes, cudaMemcpyDeviceToDevice, native(s)));
      ZT_CUDA_CHECK(cudaMemcpyAsync(dst.data, tmp, bytes, cudaMemcpyDeviceToDevice, native(s)));
    }
    return;
  }
  ZT_DISPATCH_DTYPE(src.dtype, TI,
                    ZT_DISPATCH_DTYPE(dst.dtype, TO,
                                      launch_map<TI, TO, 1>(s, dst.numel(), static_cast<TO*>(dst.data),
                                                            static_cast<const TI*>(src.data), nullptr, nullptr,
                                                            IdentityOp{})));
}

void bias_add(Stream& s, const TensorView& out, const TensorView& bias) {
  int64_t C = bias.numel();
  if (C == 0) return;
  ZT_DISPATCH_DTYPE(out.dtype, T,
                    launch_map<T, T, 1>(s, out.numel(), static_cast<T*>(out.data), static_cast<const T*>(out.data),
                                        nullptr, nullptr, BiasAddOp<T>{static_cast<const T*>(bias.data), C}));
}

void bias_grad(Stream& s, const TensorView& dbias, const TensorView& dout) {
  int64_t C = dbias.numel();
  if (C == 0) return;
  int64_t N = dout.numel() / C;
  ZT_DISPATCH_DTYPE(dout.dtype, T,
                    launch_colreduce<T, 1>(s, N, C, ColOutputs<T, 1>{{grad_out<T>(dbias)}},
                                           BiasGradTerm<T>{static_cast<const T*>(dout.data), C}));
}

}  // namespace zt::cuda_ops
