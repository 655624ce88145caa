// cpu_gemm_bf16.cpp — the native bf16 GEMM of the CPU backend (cpu::Bf16Gemm::Native): op(A) and
// op(B) packed once per call into bf16 pairs along k (cpu_gemm_bf16_kernels.h, transposes
// resolved while packing), then every kMR × kNR tile of C from one pass over the whole k range
// with fp32 accumulators, so each element of C is rounded to bf16 once. Tiles run in parallel
// (OpenMP, the rank's team), panel-major so a thread's consecutive tiles share one B panel.
#include <algorithm>
#include <vector>

#include "cpu_gemm_bf16_kernels.h"
#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

using bf16gemm::kMR;
using bf16gemm::kNR;

// Per-thread packed operands; grow to the largest call and are reused.
std::vector<uint32_t>& packed(int slot) {
  thread_local std::vector<uint32_t> buffers[2];
  return buffers[slot];
}

uint32_t* reserve(int slot, int64_t n) {
  std::vector<uint32_t>& buf = packed(slot);
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// A row-major matrix X read as op(X)[r, k] (X stored [K, R] when trans), r < R, k < K.
struct Operand {
  const uint16_t* x;
  int64_t ld;
  bool trans;
  int64_t R, K;
  uint32_t at(int64_t r, int64_t k) const { return trans ? x[k * ld + r] : x[r * ld + k]; }
  // (op(X)[r, 2q], op(X)[r, 2q + 1]) as one pair, zero past the matrix.
  uint32_t pair(int64_t r, int64_t q) const {
    if (r >= R) return 0;
    const int64_t k = 2 * q;
    return at(r, k) | (k + 1 < K ? at(r, k + 1) << 16 : 0u);
  }
};

// Packs op(X) [R, K] into ceil(R / W) blocks of kp pairs × W rows (the A blocks with W = kMR,
// the B panels with W = kNR and X = op(B)ᵀ).
template <int W>
void pack(const Operand& op, int64_t kp, uint32_t* out) {
  const int64_t blocks = (op.R + W - 1) / W;
#pragma omp parallel for schedule(static) if (op.R * op.K > kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint32_t* dst = out + blk * kp * W;
    const int64_t r0 = blk * W;
    if (op.trans) {  // rows of X are columns of op(X): walk k outermost (contiguous reads)
      for (int64_t q = 0; q < kp; ++q)
        for (int64_t i = 0; i < W; ++i) dst[q * W + i] = op.pair(r0 + i, q);
    } else {  // walk along each row of op(X)
      for (int64_t i = 0; i < W; ++i)
        for (int64_t q = 0; q < kp; ++q) dst[q * W + i] = op.pair(r0 + i, q);
    }
  }
}

}  // namespace

void gemm_bf16_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
                      int64_t lda, const uint16_t* B, int64_t ldb, float beta, uint16_t* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const int64_t kp = (K + 1) / 2, mb = (M + kMR - 1) / kMR, nb = (N + kNR - 1) / kNR;
  uint32_t* a = reserve(0, mb * kMR * kp);
  uint32_t* b = reserve(1, nb * kNR * kp);
  pack<kMR>(Operand{A, lda, ta, M, K}, kp, a);
  pack<kNR>(Operand{B, ldb, !tb, N, K}, kp, b);  // op(B)ᵀ[j, k] = op(B)[k, j]
#pragma omp parallel for collapse(2) schedule(static) if (M * N * std::max<int64_t>(K, 1) > 8 * kParallelGrain)
  for (int64_t jb = 0; jb < nb; ++jb) {
    for (int64_t ib = 0; ib < mb; ++ib) {
      const int64_t i0 = ib * kMR, j0 = jb * kNR;
      bf16gemm::tile_avx512bf16(a + ib * kMR * kp, b + jb * kNR * kp, kp, C + i0 * ldc + j0, ldc,
                                static_cast<int>(std::min<int64_t>(kMR, M - i0)),
                                static_cast<int>(std::min<int64_t>(kNR, N - j0)), alpha, beta);
    }
  }
}

}  // namespace zt::cpu_ops
