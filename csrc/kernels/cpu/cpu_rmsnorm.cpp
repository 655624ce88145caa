// cpu_rmsnorm.cpp — RMSNorm forward/backward over the last dim on the CPU backend (Llama).
// Every dtype runs the same fp32 arithmetic: 16-bit rows are widened into per-thread fp32
// buffers, and the rows run on LayerNorm's SIMD rows (cpu_vec_kernels.h) with mean 0: row sums
// (Σ x², Σ dnorm·n) are 16 lane partial sums in increasing column order, then a fixed tree, so
// the bits depend neither on the ISA nor on the thread count. dweight sums rows 0..N-1 in order
// per column, column blocks in parallel.
#include <type_traits>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {
namespace {

// Columns per task of the dweight reduction.
constexpr int64_t kColumnBlock = 64;

}  // namespace

void rmsnorm_forward(const TensorView& out, const TensorView& rstd, const TensorView& inp, const TensorView& weight,
                     float eps) {
  const int64_t C = weight.numel();
  const int64_t N = rstd.numel();
  if (C == 0 || N == 0) return;
  float* rstd_p = static_cast<float*>(rstd.data);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(inp.data);
    std::vector<float> wbuf(static_cast<size_t>(C));
    const vec::Kernels& vk = vec::active();
    const float* w = f32_row(vk, static_cast<const T*>(weight.data), C, wbuf.data());
#pragma omp parallel if (N * C > kParallelGrain)
    {
      std::vector<float> xbuf(static_cast<size_t>(C));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < N; ++i) {
        const float* xr = f32_row(vk, x + i * C, C, xbuf.data());
        const float rs = math::layernorm_rstd(vec::sq_dev_sum(vk, xr, C, 0.0f) / static_cast<float>(C), eps);
        T* orow = o + i * C;
        for (int64_t j = 0; j < C; ++j) orow[j] = from_f32<T>(xr[j] * rs * w[j]);
        rstd_p[i] = rs;
      }
    }
  });
}

void rmsnorm_backward(const TensorView& dinp, const TensorView& dweight, const TensorView& dout,
                      const TensorView& inp, const TensorView& weight, const TensorView& rstd) {
  const int64_t C = weight.numel();
  const int64_t N = rstd.numel();
  if (C == 0 || N == 0) return;
  const float* rstd_p = static_cast<const float*>(rstd.data);
  dispatch_dtype(dinp.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dx = static_cast<T*>(dinp.data);
    const GradOut<T> dw(dweight);
    const T* dy = static_cast<const T*>(dout.data);
    const T* x = static_cast<const T*>(inp.data);
    std::vector<float> wbuf(static_cast<size_t>(C));
    const vec::Kernels& vk = vec::active();
    const float* w = f32_row(vk, static_cast<const T*>(weight.data), C, wbuf.data());

    // dinp: rows are independent. RMSNorm is LayerNorm's row math with mean 0 and no mean(dnorm)
    // term: the LayerNorm SIMD rows with m = 0 and dmean = 0 compute exactly math::rmsnorm_dinp.
#pragma omp parallel if (N * C > kParallelGrain)
    {
      std::vector<float> buf(static_cast<size_t>(3 * C));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < N; ++i) {
        const float* xr = f32_row(vk, x + i * C, C, buf.data());
        const float* dyr = f32_row(vk, dy + i * C, C, buf.data() + C);
        const float rs = rstd_p[i];
        float dsum = 0.0f, dn_n_sum = 0.0f;  // Σ w dy (unused), Σ w dy · x rs
        vec::layernorm_dsums(vk, xr, dyr, w, C, 0.0f, rs, &dsum, &dn_n_sum);
        if constexpr (std::is_same_v<T, float>) {
          vec::layernorm_dinp(vk, dx + i * C, xr, dyr, w, C, 0.0f, rs, 0.0f, dn_n_sum / static_cast<float>(C));
        } else {
          float* dxr = buf.data() + 2 * C;
          widen_n(vk, dx + i * C, dxr, C);
          vec::layernorm_dinp(vk, dxr, xr, dyr, w, C, 0.0f, rs, 0.0f, dn_n_sum / static_cast<float>(C));
          narrow_n(vk, dxr, dx + i * C, C);
        }
      }
    }

    // dweight[j] += Σ_i dy[i,j] · x[i,j] · rs[i]: column blocks in parallel, rows in order.
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * kColumnBlock;
      const int64_t nj = j0 + kColumnBlock < C ? kColumnBlock : C - j0;
      float acc[kColumnBlock] = {}, unused[kColumnBlock] = {};
      for (int64_t i = 0; i < N; ++i) {
        const T* xr = x + i * C + j0;
        const T* dyr = dy + i * C + j0;
        const float rs = rstd_p[i];
        if constexpr (std::is_same_v<T, float>) {  // (x − 0) rs dy: the loop below, one SIMD call
          vec::layernorm_cols(vk, acc, unused, xr, dyr, nj, 0.0f, rs);
        } else {
          for (int64_t j = 0; j < nj; ++j) acc[j] += to_f32(xr[j]) * rs * to_f32(dyr[j]);
        }
      }
      for (int64_t j = 0; j < nj; ++j) dw.add(j0 + j, acc[j]);
    }
  });
}

}  // namespace zt::cpu_ops
