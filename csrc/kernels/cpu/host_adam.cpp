// host_adam.cpp — host_optim::adam_step / sgd_step / lion_step / adagrad_step: validation, the thread split, the ISA
// dispatch and the scalar kernels (which also run every SIMD tail). Baseline x86-64 code.
#include <omp.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "host_adam_kernels.h"
#include "zerotrain/kernels/host_optim.h"

namespace zt::host_optim {

using cpu::HostThreadPool;
using cpu::Isa;
using cpu::isa_name;
using cpu::isa_supported;

namespace {

// Work is split in blocks of kBlock elements (a multiple of every vector width, and of a
// 64-byte line for 2- and 4-byte storage), at least kGrainBlocks blocks per thread.
constexpr int64_t kBlock = 64;
constexpr int64_t kGrainBlocks = 256;  // 16K elements

struct NoOut {};

// The scalar kernel: the CPU backend's loop (csrc/kernels/cpu/cpu_adam.cpp) over [begin, end).
template <typename P, typename M, typename G, typename O>
void adam_scalar_typed(const detail::AdamArgs& args, int64_t begin, int64_t end) {
  P* p = static_cast<P*>(args.p);
  M* m = static_cast<M*>(args.m);
  M* v = static_cast<M*>(args.v);
  const G* g = static_cast<const G*>(args.g);
  const math::AdamParams a{args.lr, args.beta1, args.beta2, args.eps, args.weight_decay,
                           args.bias_correction1, args.bias_correction2, args.adam_w_mode};
  for (int64_t i = begin; i < end; ++i) {
    float pi = to_f32(p[i]), mi = to_f32(m[i]), vi = to_f32(v[i]);
    math::adam_update(pi, mi, vi, to_f32(g[i]) * args.grad_scale, a);
    p[i] = from_f32<P>(pi);
    m[i] = from_f32<M>(mi);
    v[i] = from_f32<M>(vi);
    if constexpr (!std::is_same_v<O, NoOut>) static_cast<O*>(args.out)[i] = from_f32<O>(to_f32(p[i]));
  }
}

template <typename F>
void with_type(uint8_t code, F&& f) {
  switch (code) {
    case detail::kF32: f(float{}); return;
    case detail::kBF16: f(bf16{}); return;
    case detail::kF16: f(fp16{}); return;
    default: f(NoOut{}); return;
  }
}

void adam_scalar(const detail::AdamArgs& a, int64_t begin, int64_t end) {
  if (begin >= end) return;
  auto master = [](uint8_t code, auto&& f) { code == detail::kBF16 ? f(bf16{}) : f(float{}); };
  master(a.pt, [&](auto pt) {
    using P = decltype(pt);  // named here: see host_adam_simd.h
    master(a.st, [&](auto st) {
      using M = decltype(st);
      with_type(a.gt, [&](auto gt) {
        using G = decltype(gt);
        with_type(a.ot, [&](auto ot) {
          if constexpr (!std::is_same_v<G, NoOut>) adam_scalar_typed<P, M, G, decltype(ot)>(a, begin, end);
        });
      });
    });
  });
}

void check_host(const TensorView& t, const char* what, int64_t n) {
  ZT_CHECK(t.device == DeviceKind::CPU, std::string("host_optim: ") + what + " must be a host (CPU) view");
  ZT_CHECK(t.numel() == n, std::string("host_optim: ") + what + " has " + std::to_string(t.numel()) +
                               " elements, expected " + std::to_string(n));
  ZT_CHECK(n == 0 || t.data != nullptr, std::string("host_optim: ") + what + " has no data");
}

bool is_master_dtype(DType t) { return t == DType::F32 || t == DType::BF16; }

// Runs fn(begin, end) over [0, n) in kBlock-aligned parts.
template <typename Fn>
void for_blocks(HostThreadPool& pool, int64_t n, const Fn& fn) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  pool.parallel_for(blocks, kGrainBlocks, [&](int64_t b0, int64_t b1) {
    fn(b0 * kBlock, b1 * kBlock < n ? b1 * kBlock : n);
  });
}

// The same over the calling thread's OpenMP team: one kBlock-aligned contiguous part per team
// thread (elementwise: the split changes nothing), serial below 2 · kGrainBlocks blocks.
template <typename Fn>
void for_team_blocks(int64_t n, const Fn& fn) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel if (blocks >= 2 * kGrainBlocks)
  {
    const int64_t parts = omp_get_num_threads(), k = omp_get_thread_num();
    const int64_t b0 = blocks * k / parts, b1 = blocks * (k + 1) / parts;
    fn(b0 * kBlock, std::min(n, b1 * kBlock));
  }
}

}  // namespace

namespace {

// Validates the operands (as the header says) and flattens them; isa must be supported.
detail::AdamArgs adam_args(Isa isa, const TensorView& p, const TensorView& m, const TensorView& v,
                           const TensorView& g, float grad_scale, const math::AdamParams& a,
                           const TensorView& param_out) {
  const int64_t n = p.numel();
  check_host(p, "p", n), check_host(m, "m", n), check_host(v, "v", n), check_host(g, "g", n);
  const bool has_out = param_out.data != nullptr;
  if (has_out) check_host(param_out, "param_out", n);
  ZT_CHECK(is_master_dtype(p.dtype), std::string("host_optim::adam_step: p must be fp32 or bf16, got ") + dtype_name(p.dtype));
  ZT_CHECK(is_master_dtype(m.dtype) && v.dtype == m.dtype,
           std::string("host_optim::adam_step: m and v must both be fp32 or both bf16, got ") + dtype_name(m.dtype) +
               " and " + dtype_name(v.dtype));
  ZT_CHECK(isa_supported(isa), std::string("host_optim::adam_step: ISA ") + isa_name(isa) + " not supported by this CPU");
  detail::AdamArgs args{};
  args.p = p.data, args.m = m.data, args.v = v.data, args.g = g.data, args.out = has_out ? param_out.data : nullptr;
  args.pt = static_cast<uint8_t>(p.dtype), args.st = static_cast<uint8_t>(m.dtype);
  args.gt = static_cast<uint8_t>(g.dtype), args.ot = has_out ? static_cast<uint8_t>(param_out.dtype) : uint8_t{detail::kNone};
  args.grad_scale = grad_scale, args.lr = a.lr, args.beta1 = a.beta1, args.beta2 = a.beta2, args.eps = a.eps;
  args.weight_decay = a.weight_decay, args.bias_correction1 = a.bias_correction1;
  args.bias_correction2 = a.bias_correction2, args.adam_w_mode = a.adam_w_mode;
  return args;
}

// Elements [begin, end): whole vectors on the isa's kernel, the rest on the scalar one.
void adam_range(Isa isa, const detail::AdamArgs& args, int64_t begin, int64_t end) {
  void (*vec)(const detail::AdamArgs&, int64_t, int64_t) = nullptr;
  int64_t width = 1;
  if (isa == Isa::Avx512) vec = detail::adam_avx512, width = detail::kAvx512Width;
  if (isa == Isa::Avx2) vec = detail::adam_avx2, width = detail::kAvx2Width;
  const int64_t vec_end = begin + (end - begin) / width * width;
  if (vec != nullptr && vec_end > begin) vec(args, begin, vec_end);
  adam_scalar(args, vec != nullptr ? vec_end : begin, end);
}

}  // namespace

void adam_step(HostThreadPool& pool, Isa isa, const TensorView& p, const TensorView& m, const TensorView& v,
               const TensorView& g, float grad_scale, const math::AdamParams& a, const TensorView& param_out) {
  const detail::AdamArgs args = adam_args(isa, p, m, v, g, grad_scale, a, param_out);
  const int64_t n = p.numel();
  if (n == 0) return;
  for_blocks(pool, n, [&](int64_t begin, int64_t end) { adam_range(isa, args, begin, end); });
}

void adam_step_omp(Isa isa, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
                   float grad_scale, const math::AdamParams& a, const TensorView& param_out) {
  const detail::AdamArgs args = adam_args(isa, p, m, v, g, grad_scale, a, param_out);
  if (p.numel() == 0) return;
  for_team_blocks(p.numel(), [&](int64_t begin, int64_t end) { adam_range(isa, args, begin, end); });
}

// ---- SGD (scalar) -----------------------------------------------------------------------

namespace {

float load_at(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32: return static_cast<const float*>(t.data)[i];
    case DType::BF16: return to_f32(static_cast<const bf16*>(t.data)[i]);
    case DType::F16: return to_f32(static_cast<const fp16*>(t.data)[i]);
  }
  return 0.0f;
}
void store_at(const TensorView& t, int64_t i, float x) {
  switch (t.dtype) {
    case DType::F32: static_cast<float*>(t.data)[i] = x; break;
    case DType::BF16: static_cast<bf16*>(t.data)[i] = from_f32<bf16>(x); break;
    case DType::F16: static_cast<fp16*>(t.data)[i] = from_f32<fp16>(x); break;
  }
}

}  // namespace

// zero_ops' CPU sgd_step over [begin, end): out receives the unrounded updated p, as there.
void sgd_step(HostThreadPool& pool, const TensorView& p, const TensorView& momentum, const TensorView& g,
              float grad_scale, const optim::SgdParams& a, bool first_step, const TensorView& param_out) {
  const int64_t n = p.numel();
  const bool has_buf = a.momentum != 0.0f, has_out = param_out.data != nullptr;
  check_host(p, "p", n), check_host(g, "g", n);
  if (has_buf) check_host(momentum, "momentum", n);
  if (has_out) check_host(param_out, "param_out", n);
  ZT_CHECK(is_master_dtype(p.dtype), std::string("host_optim::sgd_step: p must be fp32 or bf16, got ") + dtype_name(p.dtype));
  if (n == 0) return;
  for_blocks(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float pv = load_at(p, i);
      float buf = has_buf ? load_at(momentum, i) : 0.0f;
      optim::sgd_update(pv, buf, grad_scale * load_at(g, i), a, first_step);
      store_at(p, i, pv);
      if (has_buf) store_at(momentum, i, buf);
      if (has_out) store_at(param_out, i, pv);
    }
  });
}

// ---- gradient accumulation into the host shard -----------------------------------------------

namespace {
template <typename D, typename S>
void accumulate_typed(D* dst, const S* src, int64_t begin, int64_t end, bool overwrite) {
  for (int64_t i = begin; i < end; ++i) dst[i] = from_f32<D>((overwrite ? 0.0f : to_f32(dst[i])) + to_f32(src[i]));
}

// The scalar kernel over [begin, end) (and every SIMD tail).
void accumulate_scalar(const detail::AccumulateArgs& a, int64_t begin, int64_t end) {
  auto master = [](uint8_t code, auto&& f) { code == detail::kBF16 ? f(bf16{}) : f(float{}); };
  master(a.dt, [&](auto dt) {
    using D = decltype(dt);
    with_type(a.st, [&](auto st) {
      using S = decltype(st);
      if constexpr (!std::is_same_v<S, NoOut>)
        accumulate_typed(static_cast<D*>(a.dst), static_cast<const S*>(a.src), begin, end, a.overwrite);
    });
  });
}

// Validates the operands (as the header says) and flattens them; isa must be supported.
detail::AccumulateArgs accumulate_args(Isa isa, const TensorView& dst, const TensorView& src, bool overwrite) {
  const int64_t n = dst.numel();
  check_host(dst, "dst", n), check_host(src, "src", n);
  ZT_CHECK(is_master_dtype(dst.dtype), std::string("host_optim::accumulate: dst must be fp32 or bf16, got ") +
                                           dtype_name(dst.dtype));
  ZT_CHECK(isa_supported(isa), std::string("host_optim::accumulate: ISA ") + isa_name(isa) + " not supported by this CPU");
  return detail::AccumulateArgs{dst.data, src.data, static_cast<uint8_t>(dst.dtype), static_cast<uint8_t>(src.dtype),
                                overwrite};
}

// Elements [begin, end): whole vectors on the isa's kernel, the rest on the scalar one.
void accumulate_range(Isa isa, const detail::AccumulateArgs& args, int64_t begin, int64_t end) {
  void (*vec)(const detail::AccumulateArgs&, int64_t, int64_t) = nullptr;
  int64_t width = 1;
  if (isa == Isa::Avx512) vec = detail::accumulate_avx512, width = detail::kAvx512Width;
  if (isa == Isa::Avx2) vec = detail::accumulate_avx2, width = detail::kAvx2Width;
  const int64_t vec_end = begin + (end - begin) / width * width;
  if (vec != nullptr && vec_end > begin) vec(args, begin, vec_end);
  accumulate_scalar(args, vec != nullptr ? vec_end : begin, end);
}

}  // namespace

void accumulate(HostThreadPool& pool, Isa isa, const TensorView& dst, const TensorView& src, bool overwrite) {
  const detail::AccumulateArgs args = accumulate_args(isa, dst, src, overwrite);
  if (dst.numel() == 0) return;
  for_blocks(pool, dst.numel(), [&](int64_t begin, int64_t end) { accumulate_range(isa, args, begin, end); });
}

void accumulate_omp(Isa isa, const TensorView& dst, const TensorView& src, bool overwrite) {
  const detail::AccumulateArgs args = accumulate_args(isa, dst, src, overwrite);
  if (dst.numel() == 0) return;
  for_team_blocks(dst.numel(), [&](int64_t begin, int64_t end) { accumulate_range(isa, args, begin, end); });
}

// ---- Lion and Adagrad ----------------------------------------------------------------------

namespace {

// zero_ops' CPU kernels over [begin, end): one state, out = the unrounded updated p.
template <typename Update>
void state_scalar(const TensorView& p, const TensorView& s, const TensorView& g, float grad_scale,
                  const TensorView& out, int64_t begin, int64_t end, const Update& update) {
  for (int64_t i = begin; i < end; ++i) {
    float pv = load_at(p, i), sv = load_at(s, i);
    update(pv, sv, grad_scale * load_at(g, i));
    store_at(p, i, pv);
    store_at(s, i, sv);
    if (out.data) store_at(out, i, pv);
  }
}

detail::StateArgs state_args(Isa isa, const char* op, const TensorView& p, const TensorView& s, const TensorView& g,
                             float grad_scale, const TensorView& out) {
  const int64_t n = p.numel();
  check_host(p, "p", n), check_host(s, "state", n), check_host(g, "g", n);
  if (out.data) check_host(out, "param_out", n);
  ZT_CHECK(is_master_dtype(p.dtype) && is_master_dtype(s.dtype),
           std::string("host_optim::") + op + ": p and its state must be fp32 or bf16, got " + dtype_name(p.dtype) +
               " and " + dtype_name(s.dtype));
  ZT_CHECK(isa_supported(isa), std::string("host_optim::") + op + ": ISA " + isa_name(isa) + " not supported by this CPU");
  detail::StateArgs a{};
  a.p = p.data, a.s = s.data, a.g = g.data, a.out = out.data;
  a.pt = static_cast<uint8_t>(p.dtype), a.st = static_cast<uint8_t>(s.dtype), a.gt = static_cast<uint8_t>(g.dtype);
  a.ot = out.data ? static_cast<uint8_t>(out.dtype) : uint8_t{detail::kNone};
  a.grad_scale = grad_scale;
  return a;
}

// Whole vectors of [begin, end) on the isa's kernel, the rest (and everything at Scalar) on `scalar`.
template <typename Scalar>
void state_range(Isa isa, const detail::StateArgs& a, int64_t begin, int64_t end,
                 void (*avx2)(const detail::StateArgs&, int64_t, int64_t),
                 void (*avx512)(const detail::StateArgs&, int64_t, int64_t), const Scalar& scalar) {
  void (*vec)(const detail::StateArgs&, int64_t, int64_t) = nullptr;
  int64_t width = 1;
  if (isa == Isa::Avx512) vec = avx512, width = detail::kAvx512Width;
  if (isa == Isa::Avx2) vec = avx2, width = detail::kAvx2Width;
  const int64_t vec_end = begin + (end - begin) / width * width;
  if (vec != nullptr && vec_end > begin) vec(a, begin, vec_end);
  scalar(vec != nullptr ? vec_end : begin, end);
}

}  // namespace

void lion_step(HostThreadPool& pool, Isa isa, const TensorView& p, const TensorView& m, const TensorView& g,
               float grad_scale, const optim::LionParams& a, const TensorView& param_out) {
  detail::StateArgs args = state_args(isa, "lion_step", p, m, g, grad_scale, param_out);
  args.lr = a.lr, args.beta1 = a.beta1, args.beta2 = a.beta2, args.after_decay = a.after_decay;
  if (p.numel() == 0) return;
  for_blocks(pool, p.numel(), [&](int64_t begin, int64_t end) {
    state_range(isa, args, begin, end, detail::lion_avx2, detail::lion_avx512, [&](int64_t b, int64_t e) {
      state_scalar(p, m, g, grad_scale, param_out, b, e,
                   [&](float& pv, float& mv, float gv) { optim::lion_update(pv, mv, gv, a); });
    });
  });
}

void adagrad_step(HostThreadPool& pool, Isa isa, const TensorView& p, const TensorView& sum, const TensorView& g,
                  float grad_scale, const optim::AdagradParams& a, const TensorView& param_out) {
  detail::StateArgs args = state_args(isa, "adagrad_step", p, sum, g, grad_scale, param_out);
  args.clr = a.clr, args.eps = a.eps, args.weight_decay = a.weight_decay;
  if (p.numel() == 0) return;
  for_blocks(pool, p.numel(), [&](int64_t begin, int64_t end) {
    state_range(isa, args, begin, end, detail::adagrad_avx2, detail::adagrad_avx512, [&](int64_t b, int64_t e) {
      state_scalar(p, sum, g, grad_scale, param_out, b, e,
                   [&](float& pv, float& sv, float gv) { optim::adagrad_update(pv, sv, gv, a); });
    });
  });
}

}  // namespace zt::host_optim
