// cpu_kernels.h — helpers shared by the CPU kernels (private to csrc/kernels). The kernels'
// declarations and contract: zerotrain/kernels/cpu_ops.h.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "cpu_gemm_bf16_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {

// Calls f(T{}) with T the storage type of `t` (float, bf16, fp16).
template <typename F>
void dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::BF16: f(bf16{}); return;
    case DType::F16: f(fp16{}); return;
  }
  ZT_CHECK(false, "unknown dtype");
}

// A parameter gradient that a backward kernel over compute-dtype T tensors adds into: stored as T,
// or as fp32 (gradients accumulated straight into the fp32 buffer, without a 16-bit copy).
// add(j, v): g[j] += v, rounded once to the gradient's dtype.
template <typename T>
class GradOut {
 public:
  explicit GradOut(const TensorView& g) : data_(g.data), f32_(g.dtype == DType::F32) {}
  bool present() const { return data_ != nullptr; }
  void add(int64_t j, float v) const {
    if (f32_) {
      static_cast<float*>(data_)[j] += v;
    } else {
      T* p = static_cast<T*>(data_) + j;
      *p = from_f32<T>(to_f32(*p) + v);
    }
  }

 private:
  void* data_;
  bool f32_;
};

// OpenMP regions only pay off above this many elements of work.
constexpr int64_t kParallelGrain = 1 << 14;

// The first n elements of `buf` from a cache line on (kCacheLine bytes), growing it as needed: the
// per-thread scratch of the GEMMs (packed panels, widened operands, fp32 C). A large allocation
// sits 16 bytes past a page, where a 32-byte load or store straddles two lines one time in two and
// a 64-byte one always. The pointer holds until buf grows again.
constexpr size_t kCacheLine = 64;
template <typename T>
T* cache_aligned(std::vector<T>& buf, int64_t n) {
  static_assert(kCacheLine % sizeof(T) == 0, "whole elements per cache line");
  constexpr size_t pad = kCacheLine / sizeof(T);
  if (buf.size() < static_cast<size_t>(n) + pad) buf.resize(static_cast<size_t>(n) + pad);
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + (kCacheLine - addr % kCacheLine) % kCacheLine / sizeof(T);
}

// Attention heads (cpu_attention*.cpp): head h of batch row b is channels [offset + h·hs, +hs)
// of rows of length row_stride; load_head widens it to fp32 [T,hs], add_head adds an fp32 [T,hs]
// back (one rounding per element).
template <typename T>
void load_head(const T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride, int64_t offset, int64_t hs,
               float* dst) {
  for (int64_t t = 0; t < T_; ++t) {
    const T* src = base + (b * T_ + t) * row_stride + offset + h * hs;
    for (int64_t i = 0; i < hs; ++i) dst[t * hs + i] = to_f32(src[i]);
  }
}
template <typename T>
void add_head(T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride, int64_t offset, int64_t hs,
              const float* src) {
  for (int64_t t = 0; t < T_; ++t) {
    T* dst = base + (b * T_ + t) * row_stride + offset + h * hs;
    for (int64_t i = 0; i < hs; ++i) dst[i] = from_f32<T>(to_f32(dst[i]) + src[t * hs + i]);
  }
}
// dst[i] = to_f32(src[i]) and dst[i] = from_f32<T>(src[i]) over n elements: 16-bit rows through
// the fp32 SIMD kernels (cpu_vec_kernels.h) a chunk at a time, bitwise as the per-element loops.
template <typename T>
void widen_n(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}
template <typename T>
void narrow_n(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<T>(src[i]);
}

// widen_n / narrow_n for an op running on SIMD table k: bf16 rows take the conversion passes of
// k's ISA (AVX-512 or AVX2; cpu_gemm_bf16_kernels.h, bitwise the loops above), so the ISA choice
// (ZT_CPU_ISA) is the op's, read once per op.
template <typename T>
void widen_n(const vec::Kernels& k, const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, bf16>) {
    const auto* s = reinterpret_cast<const uint16_t*>(src);
    if (&k == &vec::kAvx512) return bf16gemm::widen_avx512(s, dst, n);
    if (&k == &vec::kAvx2) return bf16gemm::widen_avx2(s, dst, n);
  }
  widen_n(src, dst, n);
}
template <typename T>
void narrow_n(const vec::Kernels& k, const float* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, bf16>) {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    if (&k == &vec::kAvx512)
      return cpu::avx512_bf16_supported() ? bf16gemm::narrow_avx512bf16(src, d, n) : bf16gemm::narrow_avx512(src, d, n);
    if (&k == &vec::kAvx2) return bf16gemm::narrow_avx2(src, d, n);
  }
  narrow_n(src, dst, n);
}

// load_head / store_head on SIMD table k: bf16 heads convert through k's passes (bitwise the
// element loops). store_head overwrites head h with the fp32 [T,hs] rows of src, one rounding per
// element; zero_head zeroes it (the start of a head that fp32 kernels accumulate into in place).
template <typename T>
void load_head(const vec::Kernels& k, const T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride,
               int64_t offset, int64_t hs, float* dst) {
  if constexpr (!std::is_same_v<T, bf16>) {
    load_head(base, b, h, T_, row_stride, offset, hs, dst);
  } else {
    for (int64_t t = 0; t < T_; ++t) widen_n(k, base + (b * T_ + t) * row_stride + offset + h * hs, dst + t * hs, hs);
  }
}
template <typename T>
void store_head(const vec::Kernels& k, T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride, int64_t offset,
                int64_t hs, const float* src) {
  for (int64_t t = 0; t < T_; ++t) narrow_n(k, src + t * hs, base + (b * T_ + t) * row_stride + offset + h * hs, hs);
}
template <typename T>
void zero_head(T* base, int64_t b, int64_t h, int64_t T_, int64_t row_stride, int64_t offset, int64_t hs) {
  for (int64_t t = 0; t < T_; ++t) {
    T* row = base + (b * T_ + t) * row_stride + offset + h * hs;
    std::fill(row, row + hs, T{});
  }
}

// The fp32 values of row src[0..n): src itself for fp32, else widened into buf (on table k).
template <typename T>
const float* f32_row(const vec::Kernels& k, const T* src, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    (void)k;
    (void)n;
    (void)buf;
    return src;
  } else {
    widen_n(k, src, buf, n);
    return buf;
  }
}

// C[M,N] (ldc) = alpha op(A) op(B) + beta C, fp32 row-major sgemm, K > 0 (cpu_gemm.cpp).
void sgemm_rm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// C[M,N] = op(A) op(B) + bias, bias [N] (C's dtype) added to every row: gemm with C starting as the
// bias rows and beta 1 (cpu_gemm.cpp). On the widened path a 16-bit C starts as the widened bias
// in its fp32 scratch, so C is neither filled nor widened. Bitwise fill-the-rows-then-gemm.
void gemm_bias_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const TensorView& A,
                    const TensorView& B, const TensorView& bias, const TensorView& C);

// gemm (bias empty: beta 0) or gemm_bias_rows, then rows(i0, i1) over every row of C: work on the
// GEMM's output that is cheapest while the rows are still in cache (the fused linear ops' GELU).
// On the widened 16-bit path rows(i, i + 1) runs inside the rounding pass, right after row i is
// rounded into C; on every other path it runs after the GEMM, over blocks of rows on the threads.
// rows must be elementwise per row (no row reads another), so where it runs changes no result.
using RowsFn = std::function<void(int64_t i0, int64_t i1)>;
void gemm_then_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const TensorView& A,
                    const TensorView& B, const TensorView& bias, const TensorView& C, const RowsFn& rows);

// While one is open on this thread, a 16-bit operand the widened GEMM path already holds in fp32
// scratch (the same pointer, element count and dtype, widened by a GEMM inside the scope) is not
// widened again — the fused linear backward's dout, A or B of its two GEMMs. Only for sources
// nothing writes while the scope is open; opening the outermost scope forgets what came before.
class WidenReuse {
 public:
  WidenReuse();
  ~WidenReuse();
  WidenReuse(const WidenReuse&) = delete;
  WidenReuse& operator=(const WidenReuse&) = delete;
};

// The native bf16 GEMM (cpu_gemm_bf16.cpp; cpu::Bf16Gemm::Native) on the FMA tile of isa, the
// active ISA: AVX2 or AVX-512 (both tiles give the same bits). sgemm_rm's contract on bf16 bits,
// fp32 accumulation in increasing k; C is bf16 bits (Out = uint16_t, rounded once, nearest even)
// or fp32 (Out = float); any K >= 0 (K == 0: C = beta C); beta == 0 never reads C.
template <typename Out>
void gemm_bf16_native(cpu::Isa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, Out* C, int64_t ldc);
// The same contract on the vdpbf16ps tile (cpu::Bf16Gemm::Dot; call only when
// cpu::avx512_bf16_supported()); subnormal products and sums flush to zero.
template <typename Out>
void gemm_bf16_dot(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
                   const uint16_t* B, int64_t ldb, float beta, Out* C, int64_t ldc);

}  // namespace zt::cpu_ops
