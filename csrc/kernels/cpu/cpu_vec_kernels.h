// cpu_vec_kernels.h — fp32 inner loops of the CPU kernels with a SIMD path per ISA, picked at run
// time: scalar (cpu_vec.cpp, baseline x86-64), AVX2 (cpu_vec_avx2.cpp) and AVX-512F
// (cpu_vec_avx512.cpp), the latter two compiled with per-file ISA flags and -ffp-contract=off
// (top CMakeLists.txt). The ISA is cpu::active_isa(): the best the CPU and OS support,
// or the level forced by ZT_CPU_ISA=scalar|avx2|avx512 (include/zerotrain/kernels/host_optim.h).
//
// Bitwise contract: every path gives bitwise the same results as the scalar one for non-NaN
// inputs (NaN in gives NaN out on every path). The SIMD files evaluate math::gelu, gelu_grad,
// exp_nonpos and the attention / LayerNorm element math operation by operation in their
// evaluation order, without FMA, and every row sum (softmax, attention, LayerNorm) uses the same
// 16 partial sums and the same reduction tree on every path. So results depend neither on the
// ISA nor on the thread count.
//
// Portability invariant (as in csrc/kernels/cpu/host_adam_kernels.h): the SIMD files include only this
// header, <cstdint>, <immintrin.h> and cpu_vec_simd.h, and define nothing with external linkage
// but the kernel tables below, so no inline function (math.h, dtype.h, the standard library) is
// ever emitted from an ISA-flagged file where the linker could pick it for baseline callers.
#pragma once
#include <cstdint>

namespace zt::cpu {
enum class Isa : uint8_t;  // zerotrain/core/cpu_isa.h
}

namespace zt::cpu_ops::vec {

// Every table entry processes exactly n elements with n % kBlock == 0 (callers run the tail
// through the scalar helpers in cpu_vec.cpp). A block is 16 lanes: one AVX-512 vector, two AVX2.
constexpr int64_t kBlock = 16;

// math::kExpNonposMin, repeated here for the SIMD files (which may not include math.h);
// cpu_vec.cpp checks that the two agree.
constexpr float kExpMin = -87.3365f;

struct Kernels {
  const char* name;  // "scalar", "avx2", "avx512"
  // out[i] = math::gelu(x[i]); out may alias x.
  void (*gelu_forward)(float* out, const float* x, int64_t n);
  // dinp[i] = dinp[i] + dout[i] * math::gelu_grad(x[i]).
  void (*gelu_backward)(float* dinp, const float* x, const float* dout, int64_t n);
  // max over x[0..n) (non-NaN inputs); -inf for n == 0.
  float (*row_max)(const float* x, int64_t n);
  // e[j] = math::exp_nonpos(x[j] - m) and acc[j % 16] += e[j] in increasing j (e may alias x).
  void (*row_exp)(const float* x, float* e, int64_t n, float m, float* acc16);
  // d[j] = dloss * (e[j] * inv) (d may alias e).
  void (*row_scale)(float* d, const float* e, int64_t n, float inv, float dloss);
  // p[j] = math::exp_nonpos(s[j] - m) * inv (p may alias s): attn_tile::recomputed_p.
  void (*exp_scale)(const float* s, float* p, int64_t n, float m, float inv);
  // d[j] = p[j] * (d[j] - dr) * scale, left to right: attn_tile::score_grad(p, d, dr, scale).
  void (*score_grad)(float* d, const float* p, int64_t n, float dr, float scale);
  // LayerNorm rows (cpu_layernorm.cpp, fp32). acc16[j % 16] += x[j] in increasing j.
  void (*sum16)(const float* x, int64_t n, float* acc16);
  // acc16[j % 16] += (x[j] - m) * (x[j] - m) in increasing j.
  void (*sqdev16)(const float* x, int64_t n, float m, float* acc16);
  // o[j] = (x[j] - m) * rs * w[j] + b[j], left to right (o may alias x).
  void (*ln_out)(float* o, const float* x, const float* w, const float* b, int64_t n, float m, float rs);
  // dn = w[j] * dy[j], nr = (x[j] - m) * rs: a16[j % 16] += dn, b16[j % 16] += dn * nr.
  void (*ln_dsums)(const float* x, const float* dy, const float* w, int64_t n, float m, float rs, float* a16,
                   float* b16);
  // dx[j] = dx[j] + math::layernorm_dinp(w[j] * dy[j], (x[j] - m) * rs, dmean, dnmean, rs).
  void (*ln_dinp)(float* dx, const float* x, const float* dy, const float* w, int64_t n, float m, float rs,
                  float dmean, float dnmean);
  // One row's share of dweight / dbias: acc_w[j] += (x[j] - m) * rs * dy[j], acc_b[j] += dy[j].
  void (*ln_cols)(float* acc_w, float* acc_b, const float* x, const float* dy, int64_t n, float m, float rs);
  // d[i] = 0 + d[i] * math::gelu_grad(x[i]), in place (the fused linear backward's dGELU).
  void (*gelu_backward_inplace)(float* d, const float* x, int64_t n);
  // acc[j] = acc[j] + x[j] (bias_grad's column sums, the attention heads' gradients).
  void (*add_to)(float* acc, const float* x, int64_t n);
  // acc16[j % 16] += a[j] * b[j] in increasing j (the attention backward's D = dout·out).
  void (*dot16)(const float* a, const float* b, int64_t n, float* acc16);
  // SwiGLU (math_llama.h): o[i] = math::silu(g[i]) * u[i] (o may alias g or u).
  void (*swiglu_forward)(float* o, const float* g, const float* u, int64_t n);
  // dg[i] = dy[i] * u[i] * math::silu_grad(g[i]), du[i] = dy[i] * math::silu(g[i]); element i's
  // inputs are read before its outputs are written (dg may alias g, du may alias u).
  void (*swiglu_backward)(float* dg, float* du, const float* dy, const float* g, const float* u, int64_t n);
};

extern const Kernels kScalar;
extern const Kernels kAvx2;    // call only when cpu::isa_supported(Isa::Avx2)
extern const Kernels kAvx512;  // call only when cpu::isa_supported(Isa::Avx512)

// The table for cpu::active_isa() (reads ZT_CPU_ISA on every call; throws InputError
// for an unknown or unsupported value).
const Kernels& active();
// The table for `isa` (one the CPU supports: cpu::active_isa()'s guarantee).
const Kernels& for_isa(cpu::Isa isa);

// Any n (tails in scalar). Bitwise equal across tables, see above.
void gelu_forward(const Kernels& k, float* out, const float* x, int64_t n);
void gelu_backward(const Kernels& k, float* dinp, const float* x, const float* dout, int64_t n);
// d = 0 + d · gelu'(x) in place: bitwise gelu_backward into a zeroed buffer from dout = d.
void gelu_backward_inplace(const Kernels& k, float* d, const float* x, int64_t n);

// One row of fused softmax + cross-entropy over V logits x: writes
// d[j] = dloss * (softmax(x)[j] - [j == target]) and returns -log softmax(x)[target]
// = log(sum_j exp(x_j - max)) - (x_target - max). d may alias x (x[target] is read before
// any write). 0 <= target < V.
float softmax_xent_row(const Kernels& k, const float* x, float* d, int64_t V, int32_t target, float dloss);

// Tiled-attention rows (csrc/kernels/cpu/cpu_attention_tiled.cpp), any n, bitwise equal across tables.
// max over x[0..n) (non-NaN inputs), -inf for n == 0.
float row_max(const Kernels& k, const float* x, int64_t n);
// e[j] = math::exp_nonpos(x[j] - m) (e may alias x); returns their sum: lane j % 16 partial sums
// in increasing j, then the fixed tree lane l += lane l + h for h = 8, 4, 2, 1.
float exp_sum(const Kernels& k, const float* x, float* e, int64_t n, float m);
void exp_scale(const Kernels& k, const float* s, float* p, int64_t n, float m, float inv);
void score_grad(const Kernels& k, float* d, const float* p, int64_t n, float dr, float scale);

// LayerNorm rows, any n, bitwise equal across tables. Sums are the 16 lane partial sums in
// increasing j followed by the exp_sum tree: a function of the row alone (not of ISA or threads).
float sum(const Kernels& k, const float* x, int64_t n);
float sq_dev_sum(const Kernels& k, const float* x, int64_t n, float m);
void layernorm_out(const Kernels& k, float* o, const float* x, const float* w, const float* b, int64_t n, float m,
                   float rs);
// Returns the sums of dn and of dn * nr (see ln_dsums) through dsum and dnsum.
void layernorm_dsums(const Kernels& k, const float* x, const float* dy, const float* w, int64_t n, float m, float rs,
                     float* dsum, float* dnsum);
void layernorm_dinp(const Kernels& k, float* dx, const float* x, const float* dy, const float* w, int64_t n, float m,
                    float rs, float dmean, float dnmean);
void layernorm_cols(const Kernels& k, float* acc_w, float* acc_b, const float* x, const float* dy, int64_t n, float m,
                    float rs);

// SwiGLU over any n, bitwise equal across tables (see the table entries).
void swiglu_forward(const Kernels& k, float* o, const float* g, const float* u, int64_t n);
void swiglu_backward(const Kernels& k, float* dg, float* du, const float* dy, const float* g, const float* u,
                     int64_t n);

// d[j] = src[j] * a (src defaults to d itself), any n: one IEEE product per element, on row_scale.
void scale_row(const Kernels& k, float* d, int64_t n, float a, const float* src = nullptr);
// acc[j] += x[j], any n (elementwise: bitwise the same on every table).
void add_to(const Kernels& k, float* acc, const float* x, int64_t n);
// Σ a[j] b[j]: the 16 lane partial sums in increasing j, then the exp_sum tree.
float dot(const Kernels& k, const float* a, const float* b, int64_t n);

}  // namespace zt::cpu_ops::vec
