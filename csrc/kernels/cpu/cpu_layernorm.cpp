// cpu_layernorm.cpp — LayerNorm forward/backward over the last dim on the CPU backend.
// Row statistics are fp32 (two-pass mean / variance); mean[N] and rstd[N] are saved for backward.
// Every dtype runs the same fp32 arithmetic on the SIMD rows of cpu_vec_kernels.h (ISA picked at
// run time; every row sum in the fixed 16-lane order, so the bits depend neither on the ISA nor
// on the thread count): 16-bit rows are widened into per-thread fp32 buffers and rounded back
// once. dweight/dbias sum rows 0..N-1 in order per column, column blocks in parallel.
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {
namespace {

// Columns per task of the dweight/dbias reduction; each column sums rows 0..N-1 in order.
constexpr int64_t kColumnBlock = 64;

}  // namespace

void layernorm_forward(const TensorView& out, const TensorView& mean, const TensorView& rstd, const TensorView& inp,
                       const TensorView& weight, const TensorView& bias, float eps) {
  const int64_t C = weight.numel();
  if (C == 0) return;
  const int64_t N = mean.numel();
  float* mean_p = static_cast<float*>(mean.data);
  float* rstd_p = static_cast<float*>(rstd.data);
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(inp.data);
    std::vector<float> wbuf(static_cast<size_t>(2 * C));
    const vec::Kernels& vk = vec::active();
    const float* w = f32_row(vk, static_cast<const T*>(weight.data), C, wbuf.data());
    const float* b = f32_row(vk, static_cast<const T*>(bias.data), C, wbuf.data() + C);
#pragma omp parallel if (N * C > kParallelGrain)
    {
      std::vector<float> buf(static_cast<size_t>(2 * C));  // a widened row, an fp32 output row
#pragma omp for schedule(static)
      for (int64_t i = 0; i < N; ++i) {
        const float* xr = f32_row(vk, x + i * C, C, buf.data());
        const float m = vec::sum(vk, xr, C) / static_cast<float>(C);
        const float rs = math::layernorm_rstd(vec::sq_dev_sum(vk, xr, C, m) / static_cast<float>(C), eps);
        if constexpr (std::is_same_v<T, float>) {
          vec::layernorm_out(vk, o + i * C, xr, w, b, C, m, rs);
        } else {
          vec::layernorm_out(vk, buf.data() + C, xr, w, b, C, m, rs);
          narrow_n(vk, buf.data() + C, o + i * C, C);
        }
        mean_p[i] = m;
        rstd_p[i] = rs;
      }
    }
  });
}

void layernorm_backward(const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                        const TensorView& dout, const TensorView& inp, const TensorView& weight,
                        const TensorView& mean, const TensorView& rstd) {
  const int64_t C = weight.numel();
  if (C == 0) return;
  const int64_t N = mean.numel();
  const float* mean_p = static_cast<const float*>(mean.data);
  const float* rstd_p = static_cast<const float*>(rstd.data);
  dispatch_dtype(dinp.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dx = static_cast<T*>(dinp.data);
    const GradOut<T> dw(dweight), db(dbias);
    const T* dy = static_cast<const T*>(dout.data);
    const T* x = static_cast<const T*>(inp.data);
    std::vector<float> wbuf(static_cast<size_t>(C));
    const vec::Kernels& vk = vec::active();
    const float* w = f32_row(vk, static_cast<const T*>(weight.data), C, wbuf.data());

    // dinp: rows are independent.
#pragma omp parallel if (N * C > kParallelGrain)
    {
      std::vector<float> buf(static_cast<size_t>(3 * C));  // widened x, dy and dinp rows
#pragma omp for schedule(static)
      for (int64_t i = 0; i < N; ++i) {
        const float* xr = f32_row(vk, x + i * C, C, buf.data());
        const float* dyr = f32_row(vk, dy + i * C, C, buf.data() + C);
        const float m = mean_p[i], rs = rstd_p[i];
        float dsum = 0.0f, dnsum = 0.0f;
        vec::layernorm_dsums(vk, xr, dyr, w, C, m, rs, &dsum, &dnsum);
        const float dmean = dsum / static_cast<float>(C), dnmean = dnsum / static_cast<float>(C);
        if constexpr (std::is_same_v<T, float>) {
          vec::layernorm_dinp(vk, dx + i * C, xr, dyr, w, C, m, rs, dmean, dnmean);
        } else {
          float* dxr = buf.data() + 2 * C;
          widen_n(vk, dx + i * C, dxr, C);
          vec::layernorm_dinp(vk, dxr, xr, dyr, w, C, m, rs, dmean, dnmean);
          narrow_n(vk, dxr, dx + i * C, C);
        }
      }
    }

    // dweight, dbias: column blocks in parallel, each column reduced over rows in order.
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * kColumnBlock, nj = j0 + kColumnBlock < C ? kColumnBlock : C - j0;
      float acc_w[kColumnBlock] = {}, acc_b[kColumnBlock] = {}, xb[kColumnBlock], dyb[kColumnBlock];
      for (int64_t i = 0; i < N; ++i) {
        const float* xr = f32_row(vk, x + i * C + j0, nj, xb);
        const float* dyr = f32_row(vk, dy + i * C + j0, nj, dyb);
        vec::layernorm_cols(vk, acc_w, acc_b, xr, dyr, nj, mean_p[i], rstd_p[i]);
      }
      for (int64_t j = 0; j < nj; ++j) {
        dw.add(j0 + j, acc_w[j]);
        db.add(j0 + j, acc_b[j]);
      }
    }
  });
}

}  // namespace zt::cpu_ops
