// host_optim.h — the host-side (CPU) optimizer step for ZeRO-Offload
// (`offload_optimizer: {"device": "cpu"}`): master weights and moments (and the gradient shard they
// read) live in host memory and are updated here, on host pointers, by a SIMD kernel picked at run
// time (core/cpu_isa.h) and split over a host thread pool (core/host_thread_pool.h).
//
// Bitwise contract: for every ISA path and every thread count, adam_step leaves p, m, v and
// param_out bitwise equal to the CPU backend's AdamW (cpu_ops::adam_step: math::adam_update per
// element, then out = from_f32<O>(to_f32(p_stored))), and sgd_step equals cpu_ops::sgd_step
// (optim::sgd_update per element). The SIMD files are compiled with -ffp-contract=off and use
// separate mul/add, IEEE div/sqrt, and integer bf16 round-to-nearest-even identical to
// zt::f32_to_bf16_bits (NaN kept quiet with its sign). Assumes the default MXCSR (no FTZ/DAZ),
// like the rest of the CPU backend.
#pragma once
#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/core/host_thread_pool.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/optimizer_math.h"

namespace zt::host_optim {

// Adam/AdamW over host pointers (DeviceKind::CPU views): p and m, v in F32 or BF16 (m and v of
// one dtype), g in F32/BF16/F16, param_out empty (data == nullptr) or F32/BF16/F16, all of one
// numel. Same semantics as ops::adam_step. `isa` must be supported (ZT_CHECK).
void adam_step(cpu::HostThreadPool& pool, cpu::Isa isa, const TensorView& p, const TensorView& m, const TensorView& v,
               const TensorView& g, float grad_scale, const math::AdamParams& a, const TensorView& param_out);

// The same step split over an OpenMP team instead of a pool (the CPU backend's
// cpu_ops::adam_step runs its SIMD paths through this): one contiguous 64-element-aligned part
// per team thread, serial below 32K elements. Same bitwise contract for every thread count.
void adam_step_omp(cpu::Isa isa, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
                   float grad_scale, const math::AdamParams& a, const TensorView& param_out);

// SGD with momentum over host pointers, same semantics as zero_ops::sgd_step: p in F32/BF16,
// momentum (any dtype; ignored when a.momentum == 0), g and param_out (optional) in any dtype.
void sgd_step(cpu::HostThreadPool& pool, const TensorView& p, const TensorView& momentum, const TensorView& g,
              float grad_scale, const optim::SgdParams& a, bool first_step, const TensorView& param_out);

// Lion (optim::lion_update) and Adagrad (optim::adagrad_update) over host pointers, bitwise
// equal to zero_ops' CPU lion_step / adagrad_step on every ISA path: p and the state (exp_avg /
// sum) in F32 or BF16, g in any dtype, param_out empty or any dtype (it receives the updated p
// before p is stored, as there). `isa` must be supported.
void lion_step(cpu::HostThreadPool& pool, cpu::Isa isa, const TensorView& p, const TensorView& m, const TensorView& g,
               float grad_scale, const optim::LionParams& a, const TensorView& param_out);
void adagrad_step(cpu::HostThreadPool& pool, cpu::Isa isa, const TensorView& p, const TensorView& sum, const TensorView& g,
                  float grad_scale, const optim::AdagradParams& a, const TensorView& param_out);

// Gradient accumulation into ZeRO-Offload's host gradient shard: dst (F32 or BF16) =
// (overwrite ? 0 : dst) + src (any dtype), element by element in fp32, bitwise equal to
// zero_ops::accumulate with alpha 1 (1·x is exact, so there is one rounding either way) on every
// ISA path. `isa` must be supported.
void accumulate(cpu::HostThreadPool& pool, cpu::Isa isa, const TensorView& dst, const TensorView& src, bool overwrite);
// The same over an OpenMP team, split as adam_step_omp (the CPU backend's zero_ops::accumulate
// with alpha 1 runs its SIMD paths through this).
void accumulate_omp(cpu::Isa isa, const TensorView& dst, const TensorView& src, bool overwrite);

}  // namespace zt::host_optim
