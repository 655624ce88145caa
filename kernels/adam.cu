// adam.cu — Adam/AdamW step on the CUDA backend; per element exactly math::adam_update
// (math.h), the same code the CPU backend runs.
//
// Master weights P and moments M (m and v share a dtype) are template parameters (fp32 | bf16);
// the gradient's dtype and the optional param_out's dtype are read at run time (a uniform
// branch) to keep the instantiations at four. param_out receives the rounded master weight.
// Memory-bound: one grid-stride pass, each element read and written once.
#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

template <typename P, typename M>
__global__ void adam_kernel(P* p, M* m, M* v, const void* g, DType g_type, void* out, DType out_type, int64_t n,
                            float grad_scale, math::AdamParams a) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float pi = to_f32(p[i]), mi = to_f32(m[i]), vi = to_f32(v[i]);
    math::adam_update(pi, mi, vi, ld_dyn(g, g_type, i) * grad_scale, a);
    P pr = from_f32<P>(pi);
    p[i] = pr;
    m[i] = from_f32<M>(mi);
    v[i] = from_f32<M>(vi);
    if (out) st_dyn(out, out_type, i, to_f32(pr));
  }
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void adam_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
               float grad_scale, const math::AdamParams& a, const TensorView& param_out) {
  const int64_t n = p.numel();
  if (n == 0) return;
  const unsigned grid = grid_for(n, 256, 4);
  auto launch = [&](auto ptag, auto mtag) {
    using P = decltype(ptag);
    using M = decltype(mtag);
    adam_kernel<P, M><<<grid, 256, 0, native(s)>>>(static_cast<P*>(p.data), static_cast<M*>(m.data),
                                                   static_cast<M*>(v.data), g.data, g.dtype, param_out.data,
                                                   param_out.dtype, n, grad_scale, a);
    ZT_CUDA_LAUNCH_CHECK();
  };
  ZT_CHECK(p.dtype != DType::F16 && m.dtype != DType::F16, "adam_step: master and moments are fp32 or bf16");
  if (p.dtype == DType::F32) {
    if (m.dtype == DType::F32) launch(float{}, float{}); else launch(float{}, bf16{});
  } else {
    if (m.dtype == DType::F32) launch(bf16{}, float{}); else launch(bf16{}, bf16{});
  }
}

}  // namespace zt::cuda_ops
