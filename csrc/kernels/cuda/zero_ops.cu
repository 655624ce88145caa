// zero_ops.cu — CUDA launchers of the engine ops (ZT_ENGINE_OP in op_list.h, entry points in
// zero/zero_ops.h): grid-stride element-wise kernels.
#include "zerotrain/core/check_cuda.h"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_ops {

namespace {
__device__ __forceinline__ float load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::BF16: return to_f32(static_cast<const bf16*>(p)[i]);
    default: return to_f32(static_cast<const fp16*>(p)[i]);
  }
}
__device__ __forceinline__ void store(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = v; break;
    case DType::BF16: static_cast<bf16*>(p)[i] = from_f32<bf16>(v); break;
    default: static_cast<fp16*>(p)[i] = from_f32<fp16>(v); break;
  }
}

__global__ void accumulate_kernel(void* dst, DType dt, const void* src, DType st, int64_t n, float alpha,
                                  bool overwrite) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float base = overwrite ? 0.0f : load(dst, dt, i);
    store(dst, dt, i, base + alpha * load(src, st, i));
  }
}

__global__ void sgd_kernel(void* p, DType pt, void* buf, DType bt, const void* g, DType gt, float grad_scale,
                           optim::SgdParams a, bool first_step, void* out, DType ot, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float pv = load(p, pt, i);
    float b = a.momentum != 0.0f ? load(buf, bt, i) : 0.0f;
    optim::sgd_update(pv, b, grad_scale * load(g, gt, i), a, first_step);
    store(p, pt, i, pv);
    if (a.momentum != 0.0f) store(buf, bt, i, b);
    if (out) store(out, ot, i, pv);
  }
}

int grid_for(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 4096 ? blocks : 4096);
}
}  // namespace

void accumulate(Stream& s, const TensorView& dst, const TensorView& src, float alpha, bool overwrite) {
  int64_t n = dst.numel();
  accumulate_kernel<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(s.native_handle())>>>(
      dst.data, dst.dtype, src.data, src.dtype, n, alpha, overwrite);
  ZT_CUDA_CHECK(cudaGetLastError());
}

void sgd_step(Stream& s, const TensorView& p, const TensorView& momentum_buf, const TensorView& g, float grad_scale,
              const optim::SgdParams& a, bool first_step, const TensorView& param_out) {
  int64_t n = p.numel();
  sgd_kernel<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(s.native_handle())>>>(
      p.data, p.dtype, momentum_buf.data, momentum_buf.dtype, g.data, g.dtype, grad_scale, a, first_step,
      param_out.data, param_out.dtype, n);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_ops
