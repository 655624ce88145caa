// cpu_adam.cpp — Adam/AdamW step on the CPU backend (per element: math::adam_update).
// Templated on the storage types: master weights P (fp32 | bf16), moments M for m and v
// (fp32 | bf16), gradient G (fp32 | bf16 | fp16), and the optional compute-dtype copy O.
// The loop below is the scalar reference (ZT_CPU_ISA=scalar); on an AVX2 / AVX-512 CPU the step
// runs on host_optim's SIMD AdamW, bitwise equal to it for every ISA and thread count
// (tests/kernels/test_host_optim.cpp checks both against this loop).
#include <type_traits>

#include "cpu_kernels.h"
#include "zerotrain/kernels/host_optim.h"

namespace zt::cpu_ops {
namespace {

struct NoOut {};  // param_out absent

template <typename P, typename M, typename G, typename O>
void adam_typed(P* p, M* m, M* v, const G* g, O* out, int64_t n, float grad_scale, const math::AdamParams& a) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    float pi = to_f32(p[i]), mi = to_f32(m[i]), vi = to_f32(v[i]);
    math::adam_update(pi, mi, vi, to_f32(g[i]) * grad_scale, a);
    p[i] = from_f32<P>(pi);
    m[i] = from_f32<M>(mi);
    v[i] = from_f32<M>(vi);
    if constexpr (!std::is_same_v<O, NoOut>) out[i] = from_f32<O>(to_f32(p[i]));
  }
}

}  // namespace

void adam_step(const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g, float grad_scale,
               const math::AdamParams& a, const TensorView& param_out) {
  const cpu::Isa isa = cpu::active_isa();
  if (isa != cpu::Isa::Scalar) {
    host_optim::adam_step_omp(isa, p, m, v, g, grad_scale, a, param_out);
    return;
  }
  const int64_t n = p.numel();
  dispatch_dtype(p.dtype, [&](auto ptag) {
    using P = decltype(ptag);
    dispatch_dtype(m.dtype, [&](auto mtag) {
      using M = decltype(mtag);
      dispatch_dtype(g.dtype, [&](auto gtag) {
        using G = decltype(gtag);
        P* pp = static_cast<P*>(p.data);
        M* mp = static_cast<M*>(m.data);
        M* vp = static_cast<M*>(v.data);
        const G* gp = static_cast<const G*>(g.data);
        if (param_out.data == nullptr) {
          adam_typed(pp, mp, vp, gp, static_cast<NoOut*>(nullptr), n, grad_scale, a);
          return;
        }
        dispatch_dtype(param_out.dtype, [&](auto otag) {
          using O = decltype(otag);
          adam_typed(pp, mp, vp, gp, static_cast<O*>(param_out.data), n, grad_scale, a);
        });
      });
    });
  });
}

// One adam_step per chunk, in list order: bitwise what the per-chunk calls gave.
void adam_step_multi(const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
                     float grad_scale, const math::AdamParams& a, const TensorView& param_out,
                     const std::vector<AdamChunk>& chunks) {
  for (const AdamChunk& c : chunks) {
    if (c.n <= 0) continue;
    const TensorView out = param_out.data != nullptr ? param_out.slice1d(c.out, c.n) : TensorView();
    adam_step(p.slice1d(c.p, c.n), m.slice1d(c.p, c.n), v.slice1d(c.p, c.n), g.slice1d(c.g, c.n), grad_scale, a, out);
  }
}

}  // namespace zt::cpu_ops
