// cpu_gemm_bf16.cpp — the CPU backend's own bf16 GEMMs (cpu::Bf16Gemm::Native and Dot): op(A) and
// op(B) packed once per call (cpu_gemm_bf16_kernels.h; transposes and row strides resolved while
// packing) — widened to fp32 for the Native FMA tile (AVX-512 or AVX2, as the op's SIMD table),
// as bf16 pairs along k for the Dot (vdpbf16ps) tile, which reads a row-major op(A) of even K where
// it lies (its rows are already pairs along k) — then every register tile of C from one pass over
// the whole k range with fp32 accumulators, rounded to bf16 once as it is stored. Tiles run in
// parallel (OpenMP, the rank's team), panel-major within a chunk of A blocks, so a thread's
// consecutive tiles share one B panel and the chunk's A blocks stay in its core's cache. Which
// path runs where: cpu_isa.h, active_bf16_gemm().
#include <omp.h>

#include <algorithm>
#include <vector>

#include "cpu_gemm_bf16_kernels.h"
#include "cpu_kernels.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt::cpu_ops {
namespace {

// Each Panels type: its tile (kMR rows × kNR columns), the packed element and depth, how many
// A blocks a chunk of the tile loop holds (0: all of them) and how many blocks W wide one pack
// call fills (run_blocks).

// Native: fp32 panels, k deep; the AVX-512 tile (12 × 32), or the AVX2 one (4 × 24), whose
// tiles go 24 A blocks at a time: such a chunk (96 rows; 96 KiB at k = 256) stays in L2 while
// every B panel passes over it, where panel-major over all of A streams A from L3 once per panel
// (5-18% slower at the GPT layer shapes in a one-thread harness on Zen 3).
template <bool kAvx512>
struct FmaPanels {
  using Elem = float;
  static constexpr int kMR = kAvx512 ? bf16gemm::kMR : bf16gemm::kMR2;
  static constexpr int kNR = kAvx512 ? bf16gemm::kNR : bf16gemm::kNR2;
  static constexpr int kChunkBlocks = kAvx512 ? 0 : 24;
  static constexpr bool kReadsAInPlace = false;
  // AVX2 packs runs of up to 192 rows (48 A blocks, 8 B panels): an along-k operand's row of a run
  // is then 384 bytes read at once — six whole cache lines, where a run of 48 rows (96 bytes) shared
  // a line with the next run, which came back to it after it had left L1 (the 15 GEMM shapes of
  // zt_gemm_bf16_bench on Zen 3, one thread, six interleaved runs: native/fp32 median 1.00 -> 0.99
  // against runs of 64 rows of A and 48 of B).
  static constexpr int64_t run_blocks(int W) { return kAvx512 ? 1 : std::max(1, 192 / W); }
  static int64_t depth(int64_t K) { return K; }
  static void pack(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, float* dst) {
    (kAvx512 ? bf16gemm::pack_avx512 : bf16gemm::pack_avx2)(x, ld, along_k, rows, K, W, dst);
  }
  template <typename Out>
  static void tile(const float* a, const float* b, int64_t depth, Out* c, int64_t ldc, int m, int n, float alpha,
                   float beta) {
    (kAvx512 ? bf16gemm::tile_avx512<Out> : bf16gemm::tile_avx2<Out>)(a, b, depth, c, ldc, m, n, alpha, beta);
  }
};

// Dot: bf16 pairs, ceil(k / 2) deep.
struct PairPanels {
  using Elem = uint32_t;
  static constexpr int kMR = bf16gemm::kMR, kNR = bf16gemm::kNR, kChunkBlocks = 0;
  // A whose rows hold their k contiguously, K even, is already in pairs: the tile reads it in place.
  static constexpr bool kReadsAInPlace = true;
  static constexpr int64_t run_blocks(int) { return 1; }
  static int64_t depth(int64_t K) { return (K + 1) / 2; }
  static void pack(const uint16_t* x, int64_t ld, bool along_k, int64_t rows, int64_t K, int W, uint32_t* dst) {
    bf16gemm::pack_pairs_avx512(x, ld, along_k, rows, K, W, dst);
  }
  template <typename Out>
  static void tile(const uint32_t* a, const uint32_t* b, int64_t depth, Out* c, int64_t ldc, int m, int n,
                   float alpha, float beta) {
    bf16gemm::tile_dpbf16(a, b, depth, c, ldc, m, n, alpha, beta);
  }
  template <typename Out>
  static void tile_rows(const uint16_t* a, int64_t lda, const uint32_t* b, int64_t depth, Out* c, int64_t ldc, int m,
                        int n, float alpha, float beta) {
    bf16gemm::tile_dpbf16_rows(a, lda, b, depth, c, ldc, m, n, alpha, beta);
  }
};

// Per-thread packed operands (slot 0: A blocks, 1: B panels); grow to the largest call and are
// reused. They start on a cache line, as then does every panel and panel row whose size is a
// multiple of the tile's vector.
template <typename Elem>
Elem* reserve(int slot, int64_t n) {
  thread_local std::vector<Elem> buffers[2];
  return cache_aligned(buffers[slot], n);
}

// A row-major matrix X read as op(X)[r, k] (X stored [K, R] when trans), r < R, k < K.
struct Operand {
  const uint16_t* x;
  int64_t ld;
  bool trans;
  int64_t R, K;
};

// Packs blocks [blk, blk + n) of op(X) [R, K] in one call (n <= Panels::run_blocks(W)): depth × W
// elements each from row blk · W, zero rows past R (the A blocks with W = kMR, the B panels with
// W = kNR and X = op(B)ᵀ).
template <typename Panels, int W>
void pack_run(const Operand& op, int64_t blk, int64_t n, typename Panels::Elem* out) {
  const int64_t depth = Panels::depth(op.K);
  typename Panels::Elem* dst = out + blk * depth * W;
  const int64_t r0 = blk * W, rows = std::min<int64_t>(n * W, op.R - r0);
  if (rows < n * W) std::fill(dst + rows / W * depth * W, dst + n * depth * W, typename Panels::Elem{0});
  // X stored [K, R] when trans: each k's rows are contiguous.
  Panels::pack(op.x + r0 * (op.trans ? 1 : op.ld), op.ld, op.trans, rows, op.K, W, dst);
}

// One parallel region per GEMM (the team forks once): the A blocks and B panels are packed by
// all threads, then, after the implicit barrier of the second loop, every tile of C: chunk by
// chunk of A blocks, panel-major inside a chunk (one chunk when Panels::kChunkBlocks is 0).
// A is not packed where the tile can read it in place (Panels::kReadsAInPlace, row-major op(A),
// K even). Called inside a parallel region (the attention tiles' products) it runs on the calling
// thread.
template <typename Panels, typename Out>
void gemm_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
                const uint16_t* B, int64_t ldb, float beta, Out* C, int64_t ldc) {
  constexpr int kMR = Panels::kMR, kNR = Panels::kNR;
  if (M == 0 || N == 0) return;
  const int64_t depth = Panels::depth(K), mb = (M + kMR - 1) / kMR, nb = (N + kNR - 1) / kNR;
  const int64_t chunk = Panels::kChunkBlocks > 0 ? std::min<int64_t>(Panels::kChunkBlocks, mb) : mb;
  const bool a_in_place = Panels::kReadsAInPlace && !ta && K % 2 == 0;
  typename Panels::Elem* a = a_in_place ? nullptr : reserve<typename Panels::Elem>(0, mb * kMR * depth);
  typename Panels::Elem* b = reserve<typename Panels::Elem>(1, nb * kNR * depth);
  const Operand op_a{A, lda, ta, M, K}, op_bt{B, ldb, !tb, N, K};  // op(B)ᵀ[j, k] = op(B)[k, j]
  const bool parallel = M * N * std::max<int64_t>(K, 1) > 8 * kParallelGrain && !omp_in_parallel();
  // Runs of blocks per pack call: Panels::run_blocks, shortened so every thread of the team has one.
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  const auto run_of = [threads](int64_t blocks, int64_t longest) {
    return std::clamp<int64_t>((blocks + threads - 1) / threads, 1, longest);
  };
  const int64_t ra = run_of(mb, Panels::run_blocks(kMR)), rb = run_of(nb, Panels::run_blocks(kNR));
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static) nowait
    for (int64_t blk = 0; blk < (a_in_place ? 0 : mb); blk += ra)
      pack_run<Panels, kMR>(op_a, blk, std::min(ra, mb - blk), a);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < nb; blk += rb) pack_run<Panels, kNR>(op_bt, blk, std::min(rb, nb - blk), b);
    // Tile (ib, jb): rows ib · kMR.., columns jb · kNR.. of C.
    const auto tile_at = [&](int64_t ib, int64_t jb) {
      const int64_t i0 = ib * kMR, j0 = jb * kNR;
      const int m = static_cast<int>(std::min<int64_t>(kMR, M - i0));
      const int n = static_cast<int>(std::min<int64_t>(kNR, N - j0));
      const typename Panels::Elem* panel = b + jb * kNR * depth;
      Out* c = C + i0 * ldc + j0;
      if constexpr (Panels::kReadsAInPlace) {
        if (a_in_place) {
          Panels::tile_rows(A + i0 * lda, lda, panel, depth, c, ldc, m, n, alpha, beta);
          return;
        }
      }
      Panels::tile(a + ib * kMR * depth, panel, depth, c, ldc, m, n, alpha, beta);
    };
    // Tiles in order, t → (chunk ic, panel jb, block i in chunk): every chunk but the last is full,
    // so t / (chunk · nb) is t's chunk. Each thread takes one contiguous range of as many tiles
    // (± 1), decodes its first and steps through the rest (no divisions per tile).
    const int64_t tiles = mb * nb, nth = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t t0 = tiles * tid / nth, t1 = tiles * (tid + 1) / nth;
    int64_t ic = t0 / (chunk * nb), len = std::min(chunk, mb - ic * chunk), r = t0 - ic * chunk * nb;
    int64_t jb = r / len, i = r % len;
    for (int64_t t = t0; t < t1; ++t) {
      tile_at(ic * chunk + i, jb);
      if (++i < len) continue;
      i = 0;
      if (++jb < nb) continue;
      jb = 0, ++ic, len = std::min(chunk, mb - ic * chunk);
    }
  }
}

}  // namespace

template <typename Out>
void gemm_bf16_native(cpu::Isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, Out* C,
                      int64_t ldc) {
  const bool avx512 = isa == cpu::Isa::Avx512;  // else AVX2 (active_bf16_gemm's guarantee)
  (avx512 ? gemm_tiled<FmaPanels<true>, Out> : gemm_tiled<FmaPanels<false>, Out>)(ta, tb, M, N, K, alpha, A, lda, B,
                                                                                  ldb, beta, C, ldc);
}

template <typename Out>
void gemm_bf16_dot(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
                   const uint16_t* B, int64_t ldb, float beta, Out* C, int64_t ldc) {
  gemm_tiled<PairPanels>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#define ZT_BF16_GEMM_OUT(Out)                                                                                       \
  template void gemm_bf16_native(cpu::Isa, bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,   \
                                 const uint16_t*, int64_t, float, Out*, int64_t);                                    \
  template void gemm_bf16_dot(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const uint16_t*, \
                              int64_t, float, Out*, int64_t);
ZT_BF16_GEMM_OUT(uint16_t)
ZT_BF16_GEMM_OUT(float)
#undef ZT_BF16_GEMM_OUT

}  // namespace zt::cpu_ops
