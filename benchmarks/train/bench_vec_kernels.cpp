// bench_vec_kernels.cpp — per-kernel time of the SIMD paths of csrc/kernels/cpu/cpu_vec_kernels.h on
// the CPU matrix's shapes (GPT V=256, T=128, C=128, B=8; one thread), each ISA path this CPU supports
// against the scalar path and, for softmax-cross-entropy, against the previous kernel (glibc
// expf, one sequential sum; csrc/kernels/cpu/cpu_loss.cpp before 1e31992); then the CPU ops that
// run on these paths (tiled attention, LayerNorm, AdamW) under each ZT_CPU_ISA (scalar = the
// reference loops). Median of --reps calls.
// Not a test: nothing is asserted. docs/benchmarks.md, section 3.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../../csrc/kernels/cpu/cpu_vec_kernels.h"
#include "zerotrain/kernels/attention_tile.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/core/cpu_isa.h"

namespace {

using zt::cpu_ops::vec::Kernels;

double median_us(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The softmax-cross-entropy row before cpu_vec (expf, sequential sum), for the "old" column.
float old_row(const float* x, float* d, int64_t V, int32_t t, float dloss, float* e) {
  float m = -INFINITY;
  for (int64_t j = 0; j < V; ++j) m = x[j] > m ? x[j] : m;
  float sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += (e[j] = expf(x[j] - m));
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < V; ++j) d[j] = dloss * (e[j] * inv - (j == t ? 1.0f : 0.0f));
  return logf(sum) - (x[t] - m);
}

// The CPU ops on the CPU matrix's layer shapes, one row per ISA path (forced through ZT_CPU_ISA).
void bench_ops(int reps, std::mt19937& rng) {
  using zt::DType;
  using zt::TensorView;
  const int64_t B = 8, T = 128, C = 128, H = 4, N = B * T, P = 857088;  // P: about the GPT's parameter count
  std::uniform_real_distribution<float> u(-1, 1);
  auto vec_of = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = u(rng);
    return v;
  };
  std::vector<float> qkv = vec_of(N * 3 * C), out(N * C), stats(B * H * T * 2), dout = vec_of(N * C), dqkv(N * 3 * C);
  std::vector<float> x = vec_of(N * C), w = vec_of(C), b = vec_of(C), y(N * C), mean(N), rstd(N), dx(N * C), dw(C),
                     db(C);
  std::vector<float> p = vec_of(P), m = vec_of(P), v = vec_of(P), g = vec_of(P);
  for (float& f : v) f = f * f;
  zt::math::AdamParams a{};
  a.lr = 1e-3f, a.beta1 = 0.9f, a.beta2 = 0.95f, a.eps = 1e-8f, a.weight_decay = 0.1f, a.adam_w_mode = true;
  a.bias_correction1 = 0.1f, a.bias_correction2 = 0.05f;
  auto tv = [](std::vector<float>& f) { return TensorView(f.data(), DType::F32, {static_cast<int64_t>(f.size())}); };
  double base[3] = {0, 0, 0};
  for (zt::cpu::Isa isa : {zt::cpu::Isa::Scalar, zt::cpu::Isa::Avx2, zt::cpu::Isa::Avx512}) {
    if (!zt::cpu::isa_supported(isa)) continue;
    setenv("ZT_CPU_ISA", zt::cpu::isa_name(isa), 1);
    const double t_att = median_us(reps, [&] {
      zt::cpu_ops::attention_tiled_forward(tv(out), tv(stats), tv(qkv), B, T, C, H, 0, 0);
      zt::cpu_ops::attention_tiled_backward(tv(dqkv), tv(dout), tv(qkv), tv(out), tv(stats), B, T, C, H, 0, 0);
    });
    const double t_ln = median_us(reps, [&] {
      zt::cpu_ops::layernorm_forward(tv(y), tv(mean), tv(rstd), tv(x), tv(w), tv(b), 1e-5f);
      zt::cpu_ops::layernorm_backward(tv(dx), tv(dw), tv(db), tv(dout), tv(x), tv(w), tv(mean), tv(rstd));
    });
    const double t_adam =
        median_us(reps, [&] { zt::cpu_ops::adam_step(tv(p), tv(m), tv(v), tv(g), 1.0f, a, TensorView()); });
    const double t[3] = {t_att, t_ln, t_adam};
    const char* names[3] = {"attention_tiled fwd+bwd [8,128,128]", "layernorm fwd+bwd [1024 x 128]",
                            "adam_step fp32 (857088)"};
    for (int i = 0; i < 3; ++i) {
      if (base[i] == 0) base[i] = t[i];
      std::printf("%-34s %-8s %10.1f %9.2f\n", names[i], zt::cpu::isa_name(isa), t[i], base[i] / t[i]);
    }
  }
  unsetenv("ZT_CPU_ISA");
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  const int64_t rows = 8 * 128, V = 256, n_gelu = 8 * 128 * 4 * 128 * 4;  // B·T rows; B·T·4C per layer × L
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<float> x(n_gelu), y(n_gelu), g(n_gelu), logits(rows * V), d(rows * V), e(V);
  for (float& v : x) v = u(rng);
  for (float& v : g) v = u(rng);
  for (float& v : logits) v = u(rng);
  std::vector<const Kernels*> ks{&zt::cpu_ops::vec::kScalar};
  if (zt::cpu::isa_supported(zt::cpu::Isa::Avx2)) ks.push_back(&zt::cpu_ops::vec::kAvx2);
  if (zt::cpu::isa_supported(zt::cpu::Isa::Avx512)) ks.push_back(&zt::cpu_ops::vec::kAvx512);
  std::printf("per-kernel time, one thread, median of %d calls (us per call; speedup = scalar or old / path)\n", reps);
  std::printf("%-34s %-8s %10s %9s\n", "kernel (elements)", "path", "us", "speedup");
  const double old_sx = median_us(reps, [&] {
    for (int64_t i = 0; i < rows; ++i) old_row(&logits[i * V], &d[i * V], V, 7, 1.0f, e.data());
  });
  std::printf("%-34s %-8s %10.1f %9s\n", "softmax_xent [1024 x 256]", "old", old_sx, "1.00");
  double base_f = 0, base_b = 0;
  for (const Kernels* k : ks) {
    const double sx = median_us(reps, [&] {
      for (int64_t i = 0; i < rows; ++i) zt::cpu_ops::vec::softmax_xent_row(*k, &logits[i * V], &d[i * V], V, 7, 1.0f);
    });
    std::printf("%-34s %-8s %10.1f %9.2f\n", "softmax_xent [1024 x 256]", k->name, sx, old_sx / sx);
  }
  for (const Kernels* k : ks) {
    const double f = median_us(reps, [&] { zt::cpu_ops::vec::gelu_forward(*k, y.data(), x.data(), n_gelu); });
    const double b = median_us(reps, [&] { zt::cpu_ops::vec::gelu_backward(*k, y.data(), x.data(), g.data(), n_gelu); });
    if (base_f == 0) base_f = f, base_b = b;
    std::printf("%-34s %-8s %10.1f %9.2f\n", "gelu_forward (4 x 524288)", k->name, f, base_f / f);
    std::printf("%-34s %-8s %10.1f %9.2f\n", "gelu_backward (4 x 524288)", k->name, b, base_b / b);
  }
  bench_ops(reps, rng);
  return 0;
}
