// zero_ops.cpp — the engine ops (ZT_ENGINE_OP in kernels/op_list.h): CPU kernels, then the
// validated entry points, which call dispatch::name like every zt::ops entry point.
#include "zerotrain/zero/zero_ops.h"

#include <algorithm>

#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/kernels/dispatch.h"
#include "zerotrain/kernels/host_optim.h"

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
  const cpu::Isa isa = cpu::active_isa();
  if (alpha == 1.0f && isa != cpu::Isa::Scalar && (dst.dtype == DType::F32 || dst.dtype == DType::BF16)) {
    host_optim::accumulate_omp(isa, dst, src, overwrite);  // bitwise the loop below (1·x is exact)
    return;
  }
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

namespace {
// p and one state updated by update(p, s, g × grad_scale); out (optional) = the updated p.
template <typename Update>
void state_step(const TensorView& p, const TensorView& s, const TensorView& g, float grad_scale,
                const TensorView& param_out, const Update& update) {
  for (int64_t i = 0, n = p.numel(); i < n; ++i) {
    float pv = load(p, i), sv = load(s, i);
    update(pv, sv, grad_scale * load(g, i));
    store(p, i, pv);
    store(s, i, sv);
    if (param_out.data) store(param_out, i, pv);
  }
}
}  // namespace

void lion_step(const TensorView& p, const TensorView& m, const TensorView& g, float grad_scale,
               const optim::LionParams& a, const TensorView& param_out) {
  state_step(p, m, g, grad_scale, param_out, [&](float& pv, float& mv, float gv) { optim::lion_update(pv, mv, gv, a); });
}

void adagrad_step(const TensorView& p, const TensorView& sum, const TensorView& g, float grad_scale,
                  const optim::AdagradParams& a, const TensorView& param_out) {
  state_step(p, sum, g, grad_scale, param_out,
             [&](float& pv, float& sv, float gv) { optim::adagrad_update(pv, sv, gv, a); });
}

void lamb_moments(const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
                  const optim::LambParams& a) {
  for (int64_t i = 0, n = m.numel(); i < n; ++i) {
    float mv = load(m, i), vv = load(v, i);
    optim::lamb_moments(mv, vv, grad_scale * load(g, i), a);
    store(m, i, mv);
    store(v, i, vv);
  }
}

// Partial sums of kNormBlock elements, added in index order.
void lamb_direction_sq_norm(double* out, const TensorView& p, const TensorView& m, const TensorView& v,
                            const optim::LambParams& a) {
  constexpr int64_t kNormBlock = 4096;
  double total = 0.0;
  for (int64_t b = 0, n = p.numel(); b < n; b += kNormBlock) {
    double part = 0.0;
    for (int64_t i = b, e = std::min(n, b + kNormBlock); i < e; ++i) {
      const double u = optim::lamb_direction(load(p, i), load(m, i), load(v, i), a);
      part += u * u;
    }
    total += part;
  }
  *out = total;
}

void lamb_apply(const TensorView& p, const TensorView& m, const TensorView& v, float ratio, const optim::LambParams& a,
                const TensorView& param_out) {
  for (int64_t i = 0, n = p.numel(); i < n; ++i) {
    float pv = load(p, i);
    optim::lamb_apply(pv, load(m, i), load(v, i), ratio, a);
    store(p, i, pv);
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

namespace zt::zero_ops {

namespace {
void check_same(const char* op, int64_t n, std::initializer_list<const TensorView*> views) {
  for (const TensorView* t : views)
    ZT_CHECK(t->data == nullptr || t->numel() == n, std::string(op) + ": operands differ in size (" +
                                                         std::to_string(t->numel()) + " vs " + std::to_string(n) + ")");
}
}  // namespace

void lion_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& g, float grad_scale,
               const optim::LionParams& a, const TensorView& param_out) {
  check_same("lion_step", p.numel(), {&m, &g, &param_out});
  ZT_CHECK(p.numel() == 0 || m.data != nullptr, "lion_step: no exp_avg buffer");
  if (p.numel() == 0) return;
  dispatch::lion_step(s, p, m, g, grad_scale, a, param_out);
}

void adagrad_step(Stream& s, const TensorView& p, const TensorView& sum, const TensorView& g, float grad_scale,
                  const optim::AdagradParams& a, const TensorView& param_out) {
  check_same("adagrad_step", p.numel(), {&sum, &g, &param_out});
  ZT_CHECK(p.numel() == 0 || sum.data != nullptr, "adagrad_step: no sum buffer");
  if (p.numel() == 0) return;
  dispatch::adagrad_step(s, p, sum, g, grad_scale, a, param_out);
}

void lamb_moments(Stream& s, const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
                  const optim::LambParams& a) {
  check_same("lamb_moments", m.numel(), {&v, &g});
  if (m.numel() == 0) return;
  dispatch::lamb_moments(s, m, v, g, grad_scale, a);
}

void lamb_direction_sq_norm(Stream& s, double* out, const TensorView& p, const TensorView& m, const TensorView& v,
                            const optim::LambParams& a) {
  check_same("lamb_direction_sq_norm", p.numel(), {&m, &v});
  ZT_CHECK(out != nullptr, "lamb_direction_sq_norm: no output");
  dispatch::lamb_direction_sq_norm(s, out, p, m, v, a);
}

void lamb_apply(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, float ratio,
                const optim::LambParams& a, const TensorView& param_out) {
  check_same("lamb_apply", p.numel(), {&m, &v, &param_out});
  if (p.numel() == 0) return;
  dispatch::lamb_apply(s, p, m, v, ratio, a, param_out);
}

}  // namespace zt::zero_ops
