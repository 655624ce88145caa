// cpu_gemm_bf16.cpp — the native bf16 GEMM of the CPU backend (cpu::Bf16Gemm::Native): op(A) and
// op(B) widened to fp32 as they are packed, once per call (cpu_gemm_bf16_kernels.h; transposes
// and row strides resolved while packing), then every kMR × kNR tile of C from one pass over the
// whole k range with fp32 accumulators, rounded to bf16 once as it is stored. Tiles run in
// parallel (OpenMP, the rank's team), panel-major so a thread's consecutive tiles share one B
// panel. Opt-in (ZT_CPU_BF16_GEMM=native): OpenBLAS's cache-blocked sgemm after widening is
// faster where measured (docs/design.md, "GEMM paths on the CPU").
#include <algorithm>
#include <vector>

#include "cpu_gemm_bf16_kernels.h"
#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

using bf16gemm::kMR;
using bf16gemm::kNR;

// Per-thread packed operands; grow to the largest call and are reused.
std::vector<float>& packed(int slot) {
  thread_local std::vector<float> buffers[2];
  return buffers[slot];
}

float* reserve(int slot, int64_t n) {
  std::vector<float>& buf = packed(slot);
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// A row-major matrix X read as op(X)[r, k] (X stored [K, R] when trans), r < R, k < K.
struct Operand {
  const uint16_t* x;
  int64_t ld;
  bool trans;
  int64_t R, K;
};

// Packs op(X) [R, K] into ceil(R / W) blocks of K × W fp32, zero rows past R (the A blocks with
// W = kMR, the B panels with W = kNR and X = op(B)ᵀ).
template <int W>
void pack(const Operand& op, float* out) {
  const int64_t blocks = (op.R + W - 1) / W;
#pragma omp parallel for schedule(static) if (op.R * op.K > kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float* dst = out + blk * op.K * W;
    const int64_t r0 = blk * W, rows = std::min<int64_t>(W, op.R - r0);
    if (rows < W) std::fill(dst, dst + op.K * W, 0.0f);
    // X stored [K, R] when trans: each k's rows are contiguous.
    bf16gemm::pack_avx512(op.x + r0 * (op.trans ? 1 : op.ld), op.ld, op.trans, rows, op.K, W, dst);
  }
}

}  // namespace

void gemm_bf16_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
                      int64_t lda, const uint16_t* B, int64_t ldb, float beta, uint16_t* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const int64_t mb = (M + kMR - 1) / kMR, nb = (N + kNR - 1) / kNR;
  float* a = reserve(0, mb * kMR * K);
  float* b = reserve(1, nb * kNR * K);
  pack<kMR>(Operand{A, lda, ta, M, K}, a);
  pack<kNR>(Operand{B, ldb, !tb, N, K}, b);  // op(B)ᵀ[j, k] = op(B)[k, j]
#pragma omp parallel for collapse(2) schedule(static) if (M * N * std::max<int64_t>(K, 1) > 8 * kParallelGrain)
  for (int64_t jb = 0; jb < nb; ++jb) {
    for (int64_t ib = 0; ib < mb; ++ib) {
      const int64_t i0 = ib * kMR, j0 = jb * kNR;
      bf16gemm::tile_avx512(a + ib * kMR * K, b + jb * kNR * K, K, C + i0 * ldc + j0, ldc,
                                static_cast<int>(std::min<int64_t>(kMR, M - i0)),
                                static_cast<int>(std::min<int64_t>(kNR, N - j0)), alpha, beta);
    }
  }
}

}  // namespace zt::cpu_ops
