// cpu_rope.cpp — rotary position embedding (Hugging Face rotate-half), in place, on the CPU
// backend. Each (row, head, pair i) is rotated by the table's angle for position pos + t in
// fp32; rows are independent, so they run in parallel with results independent of the thread
// count. Backward applies the transposed rotation (the inverse: the angle negated).
#include "cpu_kernels.h"

namespace zt::cpu_ops {
namespace {

// x[B,T,nh·hs] in place; sign = +1 rotates by the angle (forward), -1 by its negation (backward).
void rope_apply(const TensorView& x, const TensorView& table, int64_t B, int64_t T_, int64_t nh, int64_t hs,
                int64_t pos, float sign) {
  const int64_t rows = B * T_, half = hs / 2, row_len = nh * hs;
  if (rows == 0 || row_len == 0) return;
  const float* tab = static_cast<const float*>(table.data);
  dispatch_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(x.data);
#pragma omp parallel for schedule(static) if (rows * row_len > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const float* cs = tab + (pos + r % T_) * hs;  // cos | sin of position pos + t
      T* row = base + r * row_len;
      for (int64_t h = 0; h < nh; ++h) {
        T* x1 = row + h * hs;
        T* x2 = x1 + half;
        for (int64_t i = 0; i < half; ++i) {
          const float c = cs[i], s = sign * cs[half + i];
          const float a = to_f32(x1[i]), b = to_f32(x2[i]);
          x1[i] = from_f32<T>(a * c - b * s);
          x2[i] = from_f32<T>(b * c + a * s);
        }
      }
    }
  });
}

}  // namespace

void rope_forward(const TensorView& x, const TensorView& table, int64_t B, int64_t T, int64_t nh, int64_t hs,
                  int64_t pos) {
  rope_apply(x, table, B, T, nh, hs, pos, 1.0f);
}

// dx1 <- dx1·c + dx2·s, dx2 <- dx2·c − dx1·s: the forward formula with s negated.
void rope_backward(const TensorView& dx, const TensorView& table, int64_t B, int64_t T, int64_t nh, int64_t hs,
                   int64_t pos) {
  rope_apply(dx, table, B, T, nh, hs, pos, -1.0f);
}

}  // namespace zt::cpu_ops
