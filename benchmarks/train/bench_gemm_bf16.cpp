// bench_gemm_bf16.cpp — CPU time of one GPT layer's GEMM shapes (docs/benchmarks.md §9): fp32
// sgemm, bf16 widened + sgemm (ZT_CPU_BF16_GEMM=widen) and, with AVX2 or AVX-512F, the native bf16
// GEMM (=native) and, with AVX512_BF16, the dpbf16 one (=dpbf16); one thread, interleaved
// repetitions, median and fastest of the set, then each shape's median per path.
//
// Shapes: N = 512 tokens, C = 256, 4C MLP, V = 2048 LM head; forward (inp · W), dW (inpᵀ · dout,
// accumulating) and dx (dout · Wᵀ) of qkv, attention projection, fc, fc projection and the head.
//
// usage: zt_gemm_bf16_bench [repetitions, default 12] [--per-call]. --per-call interleaves the
// paths call by call within each shape and keeps each path's fastest call: on a VM whose speed
// swings over seconds, the paths then see the same machine and the ratio is steadier than the
// set medians'. Set OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 and pin with taskset. Unlike
// zerotrain, this tool does not re-execute itself when OpenBLAS falls back to its SSE kernels on
// a CPU it does not recognise (benchmarks.md §4).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/kernels/cpu_ops.h"

namespace {

struct Shape {
  int64_t M, N, K;
  bool ta, tb;
};

const Shape kShapes[] = {{512, 768, 256, false, false},  {512, 256, 256, false, false},  {512, 1024, 256, false, false},
                         {512, 256, 1024, false, false}, {512, 2048, 256, false, true},   {256, 768, 512, true, false},
                         {256, 256, 512, true, false},   {256, 1024, 512, true, false},   {1024, 256, 512, true, false},
                         {2048, 256, 512, true, false},  {512, 256, 768, false, true},    {512, 256, 256, false, true},
                         {512, 256, 1024, false, true},  {512, 1024, 256, false, true},   {512, 256, 2048, false, false}};

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// --per-call: per shape, `reps` rounds of one call per path (run(p, shape) → CPU ms), each path's
// fastest call and its ratio to fp32; then each path's sum of fastest over the shapes.
template <typename Run>
int report_per_call(const Run& run, const char* const* paths, int npaths, int reps) {
  std::printf("15 GEMM shapes of one GPT layer (N=512, C=256, 4C, V=2048), each path's fastest of %d calls per\n"
              "shape, the paths interleaved call by call; ms, and the ratio to fp32 sgemm\n", reps);
  double total[4] = {};
  for (const Shape& s : kShapes) {
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int rep = 0; rep < reps; ++rep)
      for (int p = 0; p < npaths; ++p) best[p] = std::min(best[p], run(p, s));
    std::printf("  %4lld x %4lld x %4lld %s%s", static_cast<long long>(s.M), static_cast<long long>(s.N),
                static_cast<long long>(s.K), s.ta ? "T" : "N", s.tb ? "T" : "N");
    for (int p = 0; p < npaths; ++p) {
      total[p] += best[p];
      std::printf("  %s %6.3f ms (%.3f)", paths[p], best[p], best[p] / best[0]);
    }
    std::printf("\n");
  }
  for (int p = 0; p < npaths; ++p)
    std::printf("%-7s sum of fastest %7.2f ms  %.3f x fp32\n", paths[p], total[p], total[p] / total[0]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zt;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 12;
  if (reps < 3 || reps > 10000) {
    std::fprintf(stderr, "zt_gemm_bf16_bench: repetitions '%s': expected an integer in [3, 10000]\n", argv[1]);
    return 2;
  }
  const bool per_call = argc > 2 && std::strcmp(argv[2], "--per-call") == 0;
  if (argc > 3 || (argc > 2 && !per_call)) {
    std::fprintf(stderr, "zt_gemm_bf16_bench: '%s': expected [repetitions] [--per-call]\n", argv[argc - 1]);
    return 2;
  }
  const int64_t n = 2048 * 1024;  // the largest operand
  std::vector<float> af(n), bf(n), cf(n);
  std::vector<bf16> a(n), b(n), c(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    af[i] = dist(rng);
    bf[i] = dist(rng);
    a[i] = bf16(af[i]);
    b[i] = bf16(bf[i]);
  }
  const bool native = cpu::active_isa() != cpu::Isa::Scalar;
  const bool dot = cpu::active_isa() == cpu::Isa::Avx512 && cpu::avx512_bf16_supported();
  const char* paths[] = {"fp32", "widen", "native", "dpbf16"};
  const int npaths = dot ? 4 : native ? 3 : 2;
  constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);
  // CPU ms of one call of shape s on path p.
  const auto run = [&](int p, const Shape& s) {
    if (p > 0) setenv("ZT_CPU_BF16_GEMM", paths[p], 1);
    const DType dt = p == 0 ? DType::F32 : DType::BF16;
    void* A = p == 0 ? static_cast<void*>(af.data()) : a.data();
    void* B = p == 0 ? static_cast<void*>(bf.data()) : b.data();
    void* C = p == 0 ? static_cast<void*>(cf.data()) : c.data();
    const TensorView va(A, dt, {s.ta ? s.K : s.M, s.ta ? s.M : s.K}), vb(B, dt, {s.tb ? s.N : s.K, s.tb ? s.K : s.N});
    const TensorView vc(C, dt, {s.M, s.N});
    const double t0 = cpu_ms();
    cpu_ops::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, va, vb, s.ta ? 1.0f : 0.0f, vc);
    return cpu_ms() - t0;
  };
  if (per_call) return report_per_call(run, paths, npaths, reps);
  std::vector<double> ms[4], shape_ms[4][kNumShapes];
  for (int rep = 0; rep < reps; ++rep) {
    for (int p = 0; p < npaths; ++p) {
      const double t0 = cpu_ms();
      for (int i = 0; i < kNumShapes; ++i) {
        const double t = run(p, kShapes[i]);
        if (rep >= 2) shape_ms[p][i].push_back(t);
      }
      if (rep >= 2) ms[p].push_back(cpu_ms() - t0);  // the first two warm the caches and buffers
    }
  }
  std::printf("15 GEMM shapes of one GPT layer (N=512, C=256, 4C, V=2048), CPU ms per set, %d repetitions\n",
              reps - 2);
  for (int p = 0; p < npaths; ++p) {
    std::sort(ms[p].begin(), ms[p].end());
    std::printf("%-7s median %7.2f ms  fastest %7.2f ms\n", paths[p], ms[p][ms[p].size() / 2], ms[p].front());
  }
  std::printf("per shape (M x N x K, op(A) op(B)), median (fastest) ms:\n");
  for (int i = 0; i < kNumShapes; ++i) {
    const Shape& s = kShapes[i];
    std::printf("  %4lld x %4lld x %4lld %s%s", static_cast<long long>(s.M), static_cast<long long>(s.N),
                static_cast<long long>(s.K), s.ta ? "T" : "N", s.tb ? "T" : "N");
    for (int p = 0; p < npaths; ++p) {
      std::vector<double>& v = shape_ms[p][i];
      std::sort(v.begin(), v.end());
      std::printf("  %s %6.3f (%6.3f)", paths[p], v[v.size() / 2], v.front());
    }
    std::printf("\n");
  }
  if (!native) std::printf("native: not run (needs AVX2 or AVX-512F)\n");
  if (!dot) std::printf("dpbf16: not run (needs AVX-512F and AVX512_BF16)\n");
  return 0;
}
