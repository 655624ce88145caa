// zero_ops.cpp — the engine ops (ZT_ENGINE_OP in kernels/op_list.h): CPU kernels, then the
// validated entry points, which call dispatch::name like every zt::ops entry point.
#include "zerotrain/zero/zero_ops.h"

#include "zerotrain/kernels/dispatch.h"

namespace zt::cpu_ops {

namespace {
template <typename D, typename S>
void accumulate_cpu(D* dst, const S* src, int64_t n, float alpha, bool overwrite) {
  for (int64_t i = 0; i < n; ++i) {
    float base = overwrite ? 0.0f : to_f32(dst[i]);
    dst[i] = from_f32<D>(base + alpha * to_f32(src[i]));
  }
}
template <typename D>
void accumulate_from(D* dst, const TensorView& src, int64_t n, float alpha, bool overwrite) {
  switch (src.dtype) {
    case DType::F32: accumulate_cpu(dst, static_cast<const float*>(src.data), n, alpha, overwrite); break;
    case DType::BF16: accumulate_cpu(dst, static_cast<const bf16*>(src.data), n, alpha, overwrite); break;
    case DType::F16: accumulate_cpu(dst, static_cast<const fp16*>(src.data), n, alpha, overwrite); break;
  }
}

float load(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return static_cast<const float*>(t.data)[i];
    case DType::BF16: return to_f32(static_cast<const bf16*>(t.data)[i]);
    case DType::F16: return to_f32(static_cast<const fp16*>(t.data)[i]);
  }
  return 0;
}
void store(const TensorView& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::F32: static_cast<float*>(t.data)[i] = v; break;
    case DType::BF16: static_cast<bf16*>(t.data)[i] = from_f32<bf16>(v); break;
    case DType::F16: static_cast<fp16*>(t.data)[i] = from_f32<fp16>(v); break;
  }
}
}  // namespace

void accumulate(const TensorView& dst, const TensorView& src, float alpha, bool overwrite) {
  const int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::F32: accumulate_from(static_cast<float*>(dst.data), src, n, alpha, overwrite); break;
    case DType::BF16: accumulate_from(static_cast<bf16*>(dst.data), src, n, alpha, overwrite); break;
    case DType::F16: accumulate_from(static_cast<fp16*>(dst.data), src, n, alpha, overwrite); break;
  }
}

void sgd_step(const TensorView& p, const TensorView& momentum_buf, const TensorView& g, float grad_scale,
              const optim::SgdParams& a, bool first_step, const TensorView& param_out) {
  for (int64_t i = 0, n = p.numel(); i < n; ++i) {
    float pv = load(p, i);
    float buf = a.momentum != 0.0f ? load(momentum_buf, i) : 0.0f;
    optim::sgd_update(pv, buf, grad_scale * load(g, i), a, first_step);
    store(p, i, pv);
    if (a.momentum != 0.0f) store(momentum_buf, i, buf);
    if (param_out.data) store(param_out, i, pv);
  }
}

}  // namespace zt::cpu_ops

namespace zt::zero_ops {

void accumulate(Stream& s, const TensorView& dst, const TensorView& src, float alpha, bool overwrite) {
  ZT_CHECK(dst.numel() == src.numel(), "accumulate: dst " + dst.shape_string() + " vs src " + src.shape_string());
  if (dst.numel() == 0) return;
  dispatch::accumulate(s, dst, src, alpha, overwrite);
}

void sgd_step(Stream& s, const TensorView& p, const TensorView& momentum_buf, const TensorView& g, float grad_scale,
              const optim::SgdParams& a, bool first_step, const TensorView& param_out) {
  const int64_t n = p.numel();
  ZT_CHECK(g.numel() == n && (a.momentum == 0.0f || momentum_buf.numel() == n) &&
               (param_out.data == nullptr || param_out.numel() == n),
           "sgd_step: shapes differ");
  if (n == 0) return;
  dispatch::sgd_step(s, p, momentum_buf, g, grad_scale, a, first_step, param_out);
}

}  // namespace zt::zero_ops
