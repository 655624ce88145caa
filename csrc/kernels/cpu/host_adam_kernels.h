// host_adam_kernels.h — the interface between the Adam / Lion / Adagrad / accumulate dispatcher (host_adam.cpp, baseline
// x86-64) and the SIMD translation units (host_adam_avx2.cpp, host_adam_avx512.cpp, compiled
// with ISA flags and -ffp-contract=off).
//
// Invariant that keeps the binary portable: the SIMD files include only this header, <cstdint>,
// <immintrin.h> and host_adam_simd.h, and define nothing with external linkage except the
// adam_* / lion_* / adagrad_* / accumulate_* entry points below. So no inline function (dtype.h, math.h, the standard library) is
// ever emitted from a SIMD file, where the linker could pick the ISA-flagged copy for baseline
// callers. The entry points run only when cpu::isa_supported says so.
#pragma once
#include <cstdint>

namespace zt::host_optim::detail {

// Storage codes; the first three equal zt::DType's values.
enum : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2, kNone = 3 };

// One Adam step's operands and constants (math::AdamParams, flattened).
struct AdamArgs {
  void* p;
  void* m;
  void* v;
  const void* g;
  void* out;                 // nullptr when ot == kNone
  uint8_t pt, st, gt, ot;    // dtype codes of p, m/v, g, out
  float grad_scale, lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2;
  bool adam_w_mode;
};

// Elements [begin, end) of the step. (end - begin) must be a multiple of the vector width
// (kAvx2Width / kAvx512Width); the dispatcher runs the tail through the scalar kernel.
constexpr int64_t kAvx2Width = 8;
constexpr int64_t kAvx512Width = 16;
void adam_avx2(const AdamArgs& a, int64_t begin, int64_t end);
void adam_avx512(const AdamArgs& a, int64_t begin, int64_t end);

// Lion and Adagrad: master p, one state s (Lion's exp_avg, Adagrad's sum), g, optional out.
// out receives the updated fp32 p before it is stored (zero_ops' CPU kernels do the same).
struct StateArgs {
  void* p;
  void* s;
  const void* g;
  void* out;                 // nullptr when ot == kNone
  uint8_t pt, st, gt, ot;    // dtype codes of p, s, g, out
  float grad_scale;
  float lr, beta1, beta2, after_decay;  // Lion (optim::LionParams)
  float clr, eps, weight_decay;         // Adagrad (optim::AdagradParams)
};
void lion_avx2(const StateArgs& a, int64_t begin, int64_t end);
// Gradient accumulation into the host shard: dst (F32 or BF16) = (overwrite ? 0 : dst) + src.
struct AccumulateArgs {
  void* dst;
  const void* src;
  uint8_t dt, st;  // dtype codes of dst, src
  bool overwrite;
};
void accumulate_avx2(const AccumulateArgs& a, int64_t begin, int64_t end);
void accumulate_avx512(const AccumulateArgs& a, int64_t begin, int64_t end);
void lion_avx512(const StateArgs& a, int64_t begin, int64_t end);
void adagrad_avx2(const StateArgs& a, int64_t begin, int64_t end);
void adagrad_avx512(const StateArgs& a, int64_t begin, int64_t end);

}  // namespace zt::host_optim::detail
