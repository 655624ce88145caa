// cpu_elementwise.cpp — elementwise ops and simple reductions on the CPU backend:
// bias add / bias grad, GELU, ReLU, SwiGLU, residual add, scale, cast, squared L2 norm.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {
namespace {

// Columns handled by one task of a column-parallel reduction (bias_grad). Each column is summed
// over rows 0..N-1 in order, so the result depends neither on the thread count nor on the block
// width. The 16-bit path takes one block per thread, at most kColumnBlock16 wide (4 KiB of sums
// and 4 KiB of widened row on the stack): a block walks every row of dout, so narrow blocks
// re-walk a matrix that no longer fits in L2 in short strided reads.
constexpr int64_t kColumnBlock16 = 1024;
// The fp32 path's column block: wide, so a row's share is one SIMD call (1 KiB of sums on the stack).
constexpr int64_t kColumnBlockF32 = 256;

// Elements per partial sum in squared_norm; partials are added in index order.
constexpr int64_t kNormChunk = 1 << 15;
constexpr int64_t kNormLanes = 8;  // independent double sums per chunk (a power of two)
static_assert(kNormChunk % kNormLanes == 0, "every chunk but the last is whole lanes");

// Elements per task of the fp32 GELU loops (a multiple of vec::kBlock). Elementwise: the split
// does not change any result.
constexpr int64_t kVecChunk = 1 << 12;
static_assert(kVecChunk % vec::kBlock == 0, "tasks start on whole blocks");

// fn(begin, end) over [0, n) in kVecChunk pieces, in parallel when n is large enough.
template <typename Fn>
void for_chunks(int64_t n, const Fn& fn) {
  const int64_t chunks = (n + kVecChunk - 1) / kVecChunk;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) fn(c * kVecChunk, (c + 1) * kVecChunk < n ? (c + 1) * kVecChunk : n);
}

template <typename T, typename F>
void unary_map(T* out, const T* inp, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = from_f32<T>(f(to_f32(inp[i])));
}

// dinp[i] += dout[i] * fprime(inp[i])
template <typename T, typename F>
void unary_backward(T* dinp, const T* inp, const T* dout, int64_t n, F fprime) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    dinp[i] = from_f32<T>(to_f32(dinp[i]) + to_f32(dout[i]) * fprime(to_f32(inp[i])));
  }
}

}  // namespace

void bias_add(const TensorView& out, const TensorView& bias) {
  const int64_t C = bias.numel();
  if (C == 0) return;
  const int64_t N = out.numel() / C;
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* b = static_cast<const T*>(bias.data);
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t i = 0; i < N; ++i) {
      T* row = o + i * C;
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) row[j] = from_f32<T>(to_f32(row[j]) + to_f32(b[j]));
    }
  });
}

void bias_grad(const TensorView& dbias, const TensorView& dout) {
  const int64_t C = dbias.numel();
  if (C == 0) return;
  const int64_t N = dout.numel() / C;
  if (dout.dtype == DType::F32) {  // rows added on the CPU's SIMD path: the same sums, in the same order
    const vec::Kernels& k = vec::active();
    float* db = static_cast<float*>(dbias.data);
    const float* d = static_cast<const float*>(dout.data);
    const int64_t fblocks = (C + kColumnBlockF32 - 1) / kColumnBlockF32;
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain && fblocks > 1)
    for (int64_t blk = 0; blk < fblocks; ++blk) {
      const int64_t j0 = blk * kColumnBlockF32, w = std::min(kColumnBlockF32, C - j0);
      float acc[kColumnBlockF32] = {};
      for (int64_t i = 0; i < N; ++i) vec::add_to(k, acc, d + i * C + j0, w);
      vec::add_to(k, db + j0, acc, w);
    }
    return;
  }
  const bool parallel = N * C > kParallelGrain;
  const int64_t threads = parallel && !omp_in_parallel() ? omp_get_max_threads() : 1;
  const int64_t blocks =
      std::max<int64_t>((C + kColumnBlock16 - 1) / kColumnBlock16, std::min<int64_t>(threads, C / 16));
  const int64_t width = ((C + blocks - 1) / blocks + 15) / 16 * 16;  // whole 16-lane pieces but the last
  dispatch_dtype(dout.dtype, [&](auto tag) {  // dbias: dout's dtype or fp32; rows widened, then the fp32 sums
    using T = decltype(tag);
    const vec::Kernels& k = vec::active();
    const GradOut<T> db(dbias);
    const T* d = static_cast<const T*>(dout.data);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * width, w = std::min(width, C - j0);
      if (w <= 0) continue;
      float acc[kColumnBlock16] = {}, row[kColumnBlock16] = {};
      for (int64_t i = 0; i < N; ++i) {
        widen_n(k, d + i * C + j0, row, w);
        vec::add_to(k, acc, row, w);
      }
      for (int64_t j = 0; j < w; ++j) db.add(j0 + j, acc[j]);
    }
  });
}

void gelu_forward(const TensorView& out, const TensorView& inp) {
  if (out.dtype == DType::F32) {  // SIMD path for the CPU's ISA, bitwise equal to math::gelu
    const vec::Kernels& k = vec::active();
    float* o = static_cast<float*>(out.data);
    const float* x = static_cast<const float*>(inp.data);
    for_chunks(out.numel(), [&](int64_t b, int64_t e) { vec::gelu_forward(k, o + b, x + b, e - b); });
    return;
  }
  dispatch_dtype(out.dtype, [&](auto tag) {  // 16-bit: the same SIMD path a chunk at a time
    using T = decltype(tag);
    const vec::Kernels& k = vec::active();
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(inp.data);
    for_chunks(out.numel(), [&](int64_t b, int64_t e) {
      float buf[kVecChunk] = {};  // zeroed: GCC cannot see widen_n fill what the kernel reads
      widen_n(k, x + b, buf, e - b);
      vec::gelu_forward(k, buf, buf, e - b);
      narrow_n(k, buf, o + b, e - b);
    });
  });
}

void gelu_backward(const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  if (dinp.dtype == DType::F32) {  // SIMD path, bitwise equal to the loop below with math::gelu_grad
    const vec::Kernels& k = vec::active();
    float* d = static_cast<float*>(dinp.data);
    const float* x = static_cast<const float*>(inp.data);
    const float* g = static_cast<const float*>(dout.data);
    for_chunks(dinp.numel(), [&](int64_t b, int64_t e) { vec::gelu_backward(k, d + b, x + b, g + b, e - b); });
    return;
  }
  dispatch_dtype(dinp.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_backward(static_cast<T*>(dinp.data), static_cast<const T*>(inp.data), static_cast<const T*>(dout.data),
                   dinp.numel(), [](float x) { return math::gelu_grad(x); });
  });
}

void relu_forward(const TensorView& out, const TensorView& inp) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_map(static_cast<T*>(out.data), static_cast<const T*>(inp.data), out.numel(),
              [](float x) { return math::relu(x); });
  });
}

void relu_backward(const TensorView& dinp, const TensorView& inp, const TensorView& dout) {
  dispatch_dtype(dinp.dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_backward(static_cast<T*>(dinp.data), static_cast<const T*>(inp.data), static_cast<const T*>(dout.data),
                   dinp.numel(), [](float x) { return math::relu_grad(x); });
  });
}

// SwiGLU on the SIMD rows of cpu_vec_kernels.h (bitwise math::silu / silu_grad); 16-bit
// chunks are widened into fp32 buffers and rounded back once, so every dtype runs the same math.
void swiglu_forward(const TensorView& out, const TensorView& gate, const TensorView& up) {
  const vec::Kernels& k = vec::active();
  if (out.dtype == DType::F32) {
    float* o = static_cast<float*>(out.data);
    const float* g = static_cast<const float*>(gate.data);
    const float* u = static_cast<const float*>(up.data);
    for_chunks(out.numel(), [&](int64_t b, int64_t e) { vec::swiglu_forward(k, o + b, g + b, u + b, e - b); });
    return;
  }
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* g = static_cast<const T*>(gate.data);
    const T* u = static_cast<const T*>(up.data);
    for_chunks(out.numel(), [&](int64_t b, int64_t e) {
      float gb[kVecChunk] = {}, ub[kVecChunk] = {};  // zeroed: GCC cannot see widen_n fill them
      widen_n(k, g + b, gb, e - b);
      widen_n(k, u + b, ub, e - b);
      vec::swiglu_forward(k, gb, gb, ub, e - b);
      narrow_n(k, gb, o + b, e - b);
    });
  });
}

// Element i's inputs are read before its outputs are written: dgate may alias gate, dup may
// alias up (16-bit: whole chunks are widened before any output of the chunk is written).
void swiglu_backward(const TensorView& dgate, const TensorView& dup, const TensorView& dout, const TensorView& gate,
                     const TensorView& up) {
  const vec::Kernels& k = vec::active();
  if (dgate.dtype == DType::F32) {
    float* dg = static_cast<float*>(dgate.data);
    float* du = static_cast<float*>(dup.data);
    const float* dy = static_cast<const float*>(dout.data);
    const float* g = static_cast<const float*>(gate.data);
    const float* u = static_cast<const float*>(up.data);
    for_chunks(dgate.numel(), [&](int64_t b, int64_t e) {
      vec::swiglu_backward(k, dg + b, du + b, dy + b, g + b, u + b, e - b);
    });
    return;
  }
  dispatch_dtype(dgate.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dg = static_cast<T*>(dgate.data);
    T* du = static_cast<T*>(dup.data);
    const T* dy = static_cast<const T*>(dout.data);
    const T* g = static_cast<const T*>(gate.data);
    const T* u = static_cast<const T*>(up.data);
    for_chunks(dgate.numel(), [&](int64_t b, int64_t e) {
      float gb[kVecChunk] = {}, ub[kVecChunk] = {}, yb[kVecChunk] = {};
      widen_n(k, g + b, gb, e - b);
      widen_n(k, u + b, ub, e - b);
      widen_n(k, dy + b, yb, e - b);
      vec::swiglu_backward(k, gb, ub, yb, gb, ub, e - b);
      narrow_n(k, gb, dg + b, e - b);
      narrow_n(k, ub, du + b, e - b);
    });
  });
}

void residual_add(const TensorView& out, const TensorView& a, const TensorView& b) {
  const int64_t n = out.numel();
  if (out.dtype == DType::F32) {
    float* o = static_cast<float*>(out.data);
    const float* x = static_cast<const float*>(a.data);
    const float* y = static_cast<const float*>(b.data);
    // Element i reads x[i], y[i] before writing o[i]: aliasing out with a or b is safe.
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
    return;
  }
  dispatch_dtype(out.dtype, [&](auto tag) {  // 16-bit: widened a chunk at a time, one fp32 add, one rounding
    using T = decltype(tag);
    const vec::Kernels& k = vec::active();
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(a.data);
    const T* y = static_cast<const T*>(b.data);
    // A chunk of x and y is read whole before its o is written: aliasing out with a or b is safe.
    for_chunks(n, [&](int64_t lo, int64_t hi) {
      thread_local float xs[kVecChunk], ys[kVecChunk];  // per thread, not zeroed per chunk: widen_n writes what is read
      widen_n(k, x + lo, xs, hi - lo);
      widen_n(k, y + lo, ys, hi - lo);
      vec::add_to(k, xs, ys, hi - lo);
      narrow_n(k, xs, o + lo, hi - lo);
    });
  });
}

void scale(const TensorView& x, float alpha) {
  const int64_t n = x.numel();
  dispatch_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(x.data);
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) p[i] = from_f32<T>(to_f32(p[i]) * alpha);
  });
}

void cast(const TensorView& dst, const TensorView& src) {
  const int64_t n = dst.numel();
  if (dst.dtype == src.dtype) {  // same type: a copy (memmove: in-place is allowed)
    if (dst.data != src.data) std::memmove(dst.data, src.data, dst.nbytes());
    return;
  }
  dispatch_dtype(dst.dtype, [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_dtype(src.dtype, [&](auto stag) {
      using S = decltype(stag);
      D* d = static_cast<D*>(dst.data);
      const S* s = static_cast<const S*>(src.data);
      if constexpr (std::is_same_v<S, float> != std::is_same_v<D, float>) {  // fp32 <-> 16-bit: the row passes
        const vec::Kernels& k = vec::active();
        for_chunks(n, [&](int64_t b, int64_t e) {
          if constexpr (std::is_same_v<S, float>) narrow_n(k, s + b, d + b, e - b);
          else widen_n(k, s + b, d + b, e - b);
        });
        return;
      }
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) d[i] = from_f32<D>(to_f32(s[i]));
    });
  });
}

void squared_norm(double* out, const TensorView& src) {
  const int64_t n = src.numel();
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  dispatch_dtype(src.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(src.data);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t i1 = (c + 1) * kNormChunk < n ? (c + 1) * kNormChunk : n;
      // kNormLanes independent sums (element i of the chunk into lane i % kNormLanes), then a
      // fixed tree: a function of the chunk alone, and no single serial chain of adds.
      double acc[kNormLanes] = {};
      const int64_t i0 = c * kNormChunk, whole = i0 + (i1 - i0) / kNormLanes * kNormLanes;
      for (int64_t i = i0; i < whole; i += kNormLanes) {
        for (int64_t l = 0; l < kNormLanes; ++l) {
          const double v = to_f32(x[i + l]);
          acc[l] += v * v;
        }
      }
      for (int64_t i = whole; i < i1; ++i) {
        const double v = to_f32(x[i]);
        acc[i - whole] += v * v;
      }
      for (int64_t h = kNormLanes / 2; h >= 1; h /= 2) {
        for (int64_t l = 0; l < h; ++l) acc[l] += acc[l + h];
      }
      partial[static_cast<size_t>(c)] = acc[0];
    }
  });
  double total = 0.0;
  for (double p : partial) total += p;
  *out = total;
}

}  // namespace zt::cpu_ops
