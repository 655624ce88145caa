// cpu_gemm.cpp — GEMM on the CPU backend: OpenBLAS sgemm, row-major, packed (gemm) or with
// explicit row strides (gemm_ld, the padded LM head), and the raw strided sgemm_rm.
// One thread pool: OpenBLAS runs single-threaded in its caller, and a GEMM op splits its output
// into slices over the calling thread's OpenMP threads (split_gemm). OpenBLAS's own pthreads pool
// next to the OpenMP pool the other kernels use would put two spinning pools on the same cores,
// each waiting out the other's spin between consecutive ops.
// fp32 runs sgemm in place. 16-bit operands may write an fp32 C (weight gradients accumulated
// straight into fp32): no rounding back. bf16 runs our own GEMM (cpu_gemm_bf16.cpp) where
// cpu::active_bf16_gemm() says Native or Dot; otherwise bf16/fp16 operands are widened to fp32 scratch
// (exact; SIMD row passes for bf16 where available) and multiplied by sgemm. Both accumulate in fp32 and round back once (RNE) — the same
// contract as cuBLAS with bf16/fp16 inputs and CUBLAS_COMPUTE_32F.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "cpu_gemm_bf16_kernels.h"
#include "cpu_kernels.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt::cpu_ops {
namespace {

// Per-thread fp32 scratch for widened operands; grows to the largest call and is reused; used from
// a cache line on (cache_aligned).
// Slots 0 and 1 hold A and B, slot 2 C.
std::vector<float>& scratch(int slot) {
  thread_local std::vector<float> buffers[3];
  return buffers[slot];
}

// What a scratch slot holds: n elements widened from the 16-bit src of `type`, or nothing
// (src null: a GEMM's output, or never used). Per thread, as the slots.
struct SlotSource {
  const void* src = nullptr;
  int64_t n = 0;
  const std::type_info* type = nullptr;
};
SlotSource& held(int slot) {
  thread_local SlotSource sources[3];
  return sources[slot];
}
thread_local int reuse_scopes = 0;  // open WidenReuse scopes on this thread

template <typename T>
bool holds(int slot, const T* src, int64_t n) {
  const SlotSource& h = held(slot);
  return reuse_scopes > 0 && h.src == src && h.n == n && h.type == &typeid(T);
}

// Widens n elements of src into fp32 scratch slot `slot`, on SIMD table k's row passes (bf16 on
// AVX-512 / AVX2: cpu_kernels.h's widen_n, bitwise the element loop) — unless, inside a
// WidenReuse scope, the slot already holds them.
template <typename T>
const float* widen(const vec::Kernels& k, const T* src, int64_t n, int slot) {
  // Held elements were widened into this same start: the buffer has not grown since.
  float* out = cache_aligned(scratch(slot), n);
  if (holds(slot, src, n)) return out;
  constexpr int64_t kChunk = 1 << 14;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t b = 0; b < n; b += kChunk) widen_n(k, src + b, out + b, std::min(kChunk, n - b));
  held(slot) = {src, n, &typeid(T)};
  return out;
}

// Rows [M, N] of dst (row stride ld) = bias [N], widened when T is 16-bit and dst fp32.
template <typename T, typename D>
void fill_rows(const vec::Kernels& k, D* dst, int64_t ld, const T* bias, int64_t M, int64_t N) {
#pragma omp parallel for schedule(static) if (M * N > kParallelGrain)
  for (int64_t i = 0; i < M; ++i) {
    if constexpr (std::is_same_v<T, D>) std::memcpy(dst + i * ld, bias, static_cast<size_t>(N) * sizeof(T));
    else widen_n(k, bias, dst + i * ld, N);
  }
}

// Whether cblas_sgemm with beta == 0 overwrites C without reading it (NaN in C does not reach
// the result). OpenBLAS does (its beta kernel stores zeros, its small-matrix kernels never read
// C), which saves a zero-fill pass over C per GEMM; a BLAS that scales by zero would keep NaN, so
// this is probed once, with NaN-filled C, on a small shape (small-matrix kernels) and on one
// that takes the blocked driver (beta kernel + packed GEMM), each transpose combination.
bool blas_beta0_overwrites() {
  static const bool ok = [] {
    for (const int n : {3, 67}) {
      std::vector<float> a(static_cast<size_t>(n * n), 1.0f), b(a), c(a.size());
      for (int t = 0; t < 4; ++t) {
        std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
        cblas_sgemm(CblasRowMajor, t & 1 ? CblasTrans : CblasNoTrans, t & 2 ? CblasTrans : CblasNoTrans, n, n, n,
                    1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        for (float v : c) {
          if (v != static_cast<float>(n)) return false;
        }
      }
    }
    return true;
  }();
  return ok;
}

// Elements from the first to the last used one of a row-major operand: `rows` rows of `cols`
// used columns, row stride ld (the columns between cols and ld are never rounded back).
int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 ? 0 : (rows - 1) * ld + cols; }

// The smallest slice split_gemm hands one thread, in multiply-adds: far above the sizes where
// OpenBLAS takes its small-matrix and direct kernels, so a slice runs the same blocked kernel as
// the whole GEMM would.
constexpr double kMinSliceMacs = 1 << 22;
// Slices are whole multiples of this many rows of C. OpenBLAS's micro-kernels sum a C element in
// an order that depends on where it falls in their register tile (main tile or edge): the
// SkylakeX sgemm kernel's tile is 16 rows of a row-major C, the Haswell (and Zen) kernel's 24, and
// the Haswell kernel also reorders under any split of C's columns. Rows in multiples of 48 keep
// every element where one call would put it, so a split never changes a bit of C
// (GemmTest.ResultDoesNotDependOnThreads; measured bitwise on the Haswell, Zen and SkylakeX cores,
// where a column split or 16-row slices differ on Haswell).
constexpr int64_t kSliceRows = 48;

// C[M,N] = alpha op(A) op(B) + beta C split over the OpenMP threads by C's rows, one contiguous
// slice of whole kSliceRows per thread (the last takes the remainder). Every element of C is
// still one BLAS dot product over the whole K, in the kernel's order; only which thread computes
// it changes.
void split_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const double macs = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int64_t by_size = static_cast<int64_t>(macs / kMinSliceMacs);
  const int64_t slices = std::min<int64_t>({omp_in_parallel() ? 1 : omp_get_max_threads(), by_size,
                                            M / kSliceRows});
  if (slices <= 1) {
    sgemm_rm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const int64_t step = (M / kSliceRows + slices - 1) / slices * kSliceRows;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(slices))
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t lo = s * step, n = (s + 1 == slices ? M : std::min(M, lo + step)) - lo;
    if (n <= 0) continue;  // the last slice takes the rows past the last whole step
    // rows lo.. of C and of op(A): A stored [K,M] when transposed
    sgemm_rm(ta, tb, n, N, K, alpha, ta ? A + lo : A + lo * lda, lda, B, ldb, beta, C + lo * ldc, ldc);
  }
}

// C[M,N] (row stride ldc) = alpha op(A) op(B) + beta C, all fp32, row-major, operands with row
// strides lda, ldb. beta == 0 never reads C. Only the M×N block of C is written.
void sgemm_strided(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (K == 0) {  // empty inner product: C = beta C (beta == 0 writes zeros, even over NaN)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  ZT_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX,
           "gemm dimensions exceed the BLAS int range");
  if (beta == 0.0f && !blas_beta0_overwrites()) {
    // This BLAS treats beta == 0 as "scale by zero", which keeps NaN/inf; the contract is overwrite.
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
  }
  split_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// then(i0, i1) over rows [0, M) of a GEMM's C, in blocks of rows over the threads.
void rows_after(int64_t M, int64_t N, const RowsFn& then) {
  const int64_t block = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N, 1));
  const int64_t blocks = (M + block - 1) / block;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) then(b * block, std::min(M, (b + 1) * block));
}

// 16-bit operands widened to fp32 scratch (on SIMD table k) and multiplied by sgemm: into C directly when C is fp32
// (Out = float: a 16-bit-input, fp32-output GEMM), else into fp32 scratch rounded back once, row
// by row, each row followed by then(i, i + 1) when `then` is given (after the GEMM for fp32 C).
// bias_rows (not null, a 16-bit C only): C starts as that [N] row in every row, widened straight
// into the fp32 scratch (beta is then 1, C is not read).
template <typename T, typename Out>
void gemm_typed(const vec::Kernels& k, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, float beta, Out* C, int64_t ldc, const T* bias_rows = nullptr,
                const RowsFn* then = nullptr) {
  const int64_t na = span(ta ? K : M, ta ? M : K, lda);  // A stored [K,M] when transposed
  const int64_t nb = span(tb ? N : K, tb ? K : N, ldb);  // B stored [N,K] when transposed
  const int sa = holds(1, A, na) ? 1 : 0;  // A widened as the scope's previous GEMM's B stays put
  const float* a32 = widen(k, A, na, sa);
  const float* b32 = widen(k, B, nb, 1 - sa);
  if (bias_rows != nullptr) beta = 1.0f;
  if constexpr (std::is_same_v<Out, float>) {
    sgemm_strided(ta, tb, M, N, K, alpha, a32, lda, b32, ldb, beta, C, ldc);
    if (then != nullptr) rows_after(M, N, *then);
  } else {
    const int64_t nc = span(M, N, ldc);
    float* c32 = cache_aligned(scratch(2), nc);
    if (bias_rows != nullptr) fill_rows(k, c32, ldc, bias_rows, M, N);
    else if (beta != 0.0f) widen(k, C, nc, 2);
    held(2) = {};  // the slot now holds C's fp32 values, not a source's
    sgemm_strided(ta, tb, M, N, K, alpha, a32, lda, b32, ldb, beta, c32, ldc);
#pragma omp parallel for schedule(static) if (M * N > kParallelGrain)
    for (int64_t i = 0; i < M; ++i) {
      narrow_n(k, c32 + i * ldc, C + i * ldc, N);
      if (then != nullptr) (*then)(i, i + 1);
    }
  }
}

// A and B share a dtype; C has it too, or is fp32 with 16-bit A and B (ops.h's gemm contract).
// bias (not null, C's dtype, [N]): C starts as bias in every row, beta is 1. then (not null):
// then(i0, i1) over every row of C once the rows are written (gemm_then_rows).
void gemm_any(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A, int64_t lda,
              const TensorView& B, int64_t ldb, float beta, const TensorView& C, int64_t ldc,
              const TensorView& bias = {}, const RowsFn* then = nullptr) {
  if (M == 0 || N == 0) return;
  // fp32 runs sgemm; fp16 is always widened; bf16 takes the run's path (cpu_isa.h); the ISA is read
  // once, for the path and for every SIMD pass the GEMM runs.
  const cpu::Isa isa = A.dtype == DType::F32 ? cpu::Isa::Scalar : cpu::active_isa();
  const vec::Kernels& k = vec::for_isa(isa);
  const cpu::Bf16Gemm path = A.dtype == DType::BF16 ? cpu::active_bf16_gemm(isa) : cpu::Bf16Gemm::Widen;
  const bool widened = A.dtype != DType::F32 && path == cpu::Bf16Gemm::Widen;
  if (bias.data != nullptr && !(widened && C.dtype == A.dtype)) {  // elsewhere C itself starts as the bias rows
    dispatch_dtype(C.dtype, [&](auto tag) {
      using T = decltype(tag);
      fill_rows(k, static_cast<T*>(C.data), ldc, static_cast<const T*>(bias.data), M, N);
    });
    beta = 1.0f;
  }
  if (A.dtype == DType::F32) {
    sgemm_strided(ta, tb, M, N, K, alpha, static_cast<const float*>(A.data), lda, static_cast<const float*>(B.data),
                  ldb, beta, static_cast<float*>(C.data), ldc);
    if (then != nullptr) rows_after(M, N, *then);
    return;
  }
  const bool f32_out = C.dtype == DType::F32;
  if (!widened) {
    const auto* a = static_cast<const uint16_t*>(A.data);
    const auto* b = static_cast<const uint16_t*>(B.data);
    const auto own = [&](auto* c) {  // c: C as fp32 or as bf16 bits
      if (path == cpu::Bf16Gemm::Dot) gemm_bf16_dot(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
      else gemm_bf16_native(isa, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    };
    if (f32_out) own(static_cast<float*>(C.data));
    else own(static_cast<uint16_t*>(C.data));
    if (then != nullptr) rows_after(M, N, *then);
    return;
  }
  dispatch_dtype(A.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(A.data);
    const T* b = static_cast<const T*>(B.data);
    if (f32_out) {
      gemm_typed(k, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, static_cast<float*>(C.data), ldc,
                 static_cast<const T*>(nullptr), then);
    } else {
      gemm_typed(k, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, static_cast<T*>(C.data), ldc,
                 static_cast<const T*>(bias.data), then);
    }
  });
}

}  // namespace

void sgemm_rm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  static const bool single_threaded_blas = (openblas_set_num_threads(1), true);  // before the first BLAS call
  (void)single_threaded_blas;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb),
              beta, C, static_cast<int>(ldc));
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
          const TensorView& B, float beta, const TensorView& C) {
  // Packed operands: A stored [K,M] when transposed, else [M,K]; B [N,K] when transposed, else [K,N].
  gemm_any(trans_a, trans_b, M, N, K, alpha, A, trans_a ? M : K, B, trans_b ? K : N, beta, C, N);
}

void gemm_bias_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const TensorView& A,
                    const TensorView& B, const TensorView& bias, const TensorView& C) {
  gemm_any(trans_a, trans_b, M, N, K, 1.0f, A, trans_a ? M : K, B, trans_b ? K : N, 1.0f, C, N, bias);
}

void gemm_then_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const TensorView& A,
                    const TensorView& B, const TensorView& bias, const TensorView& C, const RowsFn& rows) {
  gemm_any(trans_a, trans_b, M, N, K, 1.0f, A, trans_a ? M : K, B, trans_b ? K : N, 0.0f, C, N, bias, &rows);
}

WidenReuse::WidenReuse() {
  if (reuse_scopes++ == 0)
    for (int slot = 0; slot < 3; ++slot) held(slot) = {};  // widened before the scope: may be stale
}
WidenReuse::~WidenReuse() { --reuse_scopes; }

void gemm_ld(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const TensorView& A,
             int64_t lda, const TensorView& B, int64_t ldb, float beta, const TensorView& C, int64_t ldc) {
  gemm_any(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace zt::cpu_ops
