// zero_optim.cu — CUDA launchers of the Lion, Adagrad and LAMB element-wise engine ops
// (op_list.h; entry points in csrc/zero/zero_ops.cpp): grid-stride kernels over
// optimizer_math.h. LAMB's direction norm is in norm.cu.
#include "cuda_common.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

struct LionUpdate {
  optim::LionParams a;
  __device__ void operator()(float& p, float& m, float g) const { optim::lion_update(p, m, g, a); }
};
struct AdagradUpdate {
  optim::AdagradParams a;
  __device__ void operator()(float& p, float& s, float g) const { optim::adagrad_update(p, s, g, a); }
};

// p and one state s updated by update(p, s, g × grad_scale); out (optional) = the updated p.
template <typename Update>
__global__ void state_kernel(void* p, DType pt, void* s, DType st, const void* g, DType gt, float grad_scale,
                             Update update, void* out, DType ot, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float pv = ld_dyn(p, pt, i), sv = ld_dyn(s, st, i);
    update(pv, sv, grad_scale * ld_dyn(g, gt, i));
    st_dyn(p, pt, i, pv);
    st_dyn(s, st, i, sv);
    if (out) st_dyn(out, ot, i, pv);
  }
}

template <typename Update>
void launch_state(Stream& s, const TensorView& p, const TensorView& state, const TensorView& g, float grad_scale,
                  Update update, const TensorView& out) {
  const int64_t n = p.numel();
  state_kernel<<<grid_for(n, 256, 4), 256, 0, native(s)>>>(p.data, p.dtype, state.data, state.dtype, g.data, g.dtype,
                                                             grad_scale, update, out.data, out.dtype, n);
  ZT_CUDA_LAUNCH_CHECK();
}

__global__ void lamb_moments_kernel(void* m, void* v, DType mt, const void* g, DType gt, float grad_scale,
                                    optim::LambParams a, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float mv = ld_dyn(m, mt, i), vv = ld_dyn(v, mt, i);
    optim::lamb_moments(mv, vv, grad_scale * ld_dyn(g, gt, i), a);
    st_dyn(m, mt, i, mv);
    st_dyn(v, mt, i, vv);
  }
}

__global__ void lamb_apply_kernel(void* p, DType pt, const void* m, const void* v, DType mt, float ratio,
                                  optim::LambParams a, void* out, DType ot, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float pv = ld_dyn(p, pt, i);
    optim::lamb_apply(pv, ld_dyn(m, mt, i), ld_dyn(v, mt, i), ratio, a);
    st_dyn(p, pt, i, pv);
    if (out) st_dyn(out, ot, i, pv);
  }
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void lion_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& g, float grad_scale,
               const optim::LionParams& a, const TensorView& param_out) {
  launch_state(s, p, m, g, grad_scale, LionUpdate{a}, param_out);
}

void adagrad_step(Stream& s, const TensorView& p, const TensorView& sum, const TensorView& g, float grad_scale,
                  const optim::AdagradParams& a, const TensorView& param_out) {
  launch_state(s, p, sum, g, grad_scale, AdagradUpdate{a}, param_out);
}

void lamb_moments(Stream& s, const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
                  const optim::LambParams& a) {
  ZT_CHECK(m.dtype == v.dtype, "lamb_moments: exp_avg and exp_avg_sq must share a dtype");
  const int64_t n = m.numel();
  lamb_moments_kernel<<<grid_for(n, 256, 4), 256, 0, native(s)>>>(m.data, v.data, m.dtype, g.data, g.dtype,
                                                                   grad_scale, a, n);
  ZT_CUDA_LAUNCH_CHECK();
}

void lamb_apply(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, float ratio,
                const optim::LambParams& a, const TensorView& param_out) {
  ZT_CHECK(m.dtype == v.dtype, "lamb_apply: exp_avg and exp_avg_sq must share a dtype");
  const int64_t n = p.numel();
  lamb_apply_kernel<<<grid_for(n, 256, 4), 256, 0, native(s)>>>(p.data, p.dtype, m.data, v.data, m.dtype, ratio, a,
                                                                 param_out.data, param_out.dtype, n);
  ZT_CUDA_LAUNCH_CHECK();
}

}  // namespace zt::cuda_ops
