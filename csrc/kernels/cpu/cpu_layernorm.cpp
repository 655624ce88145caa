// cpu_layernorm.cpp — LayerNorm forward/backward over the last dim on the CPU backend.
// Row statistics are fp32 (two-pass mean / variance); mean[N] and rstd[N] are saved for backward.
// fp32 rows run on the SIMD rows of cpu_vec_kernels.h (ISA picked at run time; every row sum in
// the fixed 16-lane order, so the bits depend neither on the ISA nor on the thread count); 16-bit
// rows widen element by element and sum sequentially.
#include <type_traits>
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
    const T* w = static_cast<const T*>(weight.data);
    const T* b = static_cast<const T*>(bias.data);
    if constexpr (std::is_same_v<T, float>) {
      const vec::Kernels& vk = vec::active();
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
      for (int64_t i = 0; i < N; ++i) {
        const float* xr = x + i * C;
        const float m = vec::sum(vk, xr, C) / static_cast<float>(C);
        const float rs = math::layernorm_rstd(vec::sq_dev_sum(vk, xr, C, m) / static_cast<float>(C), eps);
        vec::layernorm_out(vk, o + i * C, xr, w, b, C, m, rs);
        mean_p[i] = m;
        rstd_p[i] = rs;
      }
      return;
    }
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t i = 0; i < N; ++i) {
      const T* xr = x + i * C;
      float sum = 0.0f;
      for (int64_t j = 0; j < C; ++j) sum += to_f32(xr[j]);
      const float m = sum / static_cast<float>(C);
      float sq = 0.0f;
      for (int64_t j = 0; j < C; ++j) {
        float d = to_f32(xr[j]) - m;
        sq += d * d;
      }
      const float rs = math::layernorm_rstd(sq / static_cast<float>(C), eps);
      T* orow = o + i * C;
      for (int64_t j = 0; j < C; ++j) {
        float n = (to_f32(xr[j]) - m) * rs;
        orow[j] = from_f32<T>(n * to_f32(w[j]) + to_f32(b[j]));
      }
      mean_p[i] = m;
      rstd_p[i] = rs;
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
    const T* w = static_cast<const T*>(weight.data);

    // dinp: rows are independent.
    if constexpr (std::is_same_v<T, float>) {
      const vec::Kernels& vk = vec::active();
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
      for (int64_t i = 0; i < N; ++i) {
        const float m = mean_p[i], rs = rstd_p[i];
        float dsum = 0.0f, dnsum = 0.0f;
        vec::layernorm_dsums(vk, x + i * C, dy + i * C, w, C, m, rs, &dsum, &dnsum);
        vec::layernorm_dinp(vk, dx + i * C, x + i * C, dy + i * C, w, C, m, rs, dsum / static_cast<float>(C),
                            dnsum / static_cast<float>(C));
      }
    } else {
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
      for (int64_t i = 0; i < N; ++i) {
        const T* xr = x + i * C;
        const T* dyr = dy + i * C;
        const float m = mean_p[i], rs = rstd_p[i];
        float dnorm_sum = 0.0f, dnorm_n_sum = 0.0f;
        for (int64_t j = 0; j < C; ++j) {
          float n = (to_f32(xr[j]) - m) * rs;
          float dnorm = to_f32(w[j]) * to_f32(dyr[j]);
          dnorm_sum += dnorm;
          dnorm_n_sum += dnorm * n;
        }
        const float dnorm_mean = dnorm_sum / static_cast<float>(C);
        const float dnorm_n_mean = dnorm_n_sum / static_cast<float>(C);
        T* dxr = dx + i * C;
        for (int64_t j = 0; j < C; ++j) {
          float n = (to_f32(xr[j]) - m) * rs;
          float dnorm = to_f32(w[j]) * to_f32(dyr[j]);
          dxr[j] = from_f32<T>(to_f32(dxr[j]) + math::layernorm_dinp(dnorm, n, dnorm_mean, dnorm_n_mean, rs));
        }
      }
    }

    // dweight, dbias: column blocks in parallel, each column reduced over rows in order.
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
    const vec::Kernels& vk_cols = vec::active();
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * kColumnBlock;
      const int64_t j1 = j0 + kColumnBlock < C ? j0 + kColumnBlock : C;
      float acc_w[kColumnBlock] = {};
      float acc_b[kColumnBlock] = {};
      for (int64_t i = 0; i < N; ++i) {
        const T* xr = x + i * C;
        const T* dyr = dy + i * C;
        const float m = mean_p[i], rs = rstd_p[i];
        if constexpr (std::is_same_v<T, float>) {  // the loop below, one SIMD column block per call
          vec::layernorm_cols(vk_cols, acc_w, acc_b, xr + j0, dyr + j0, j1 - j0, m, rs);
        } else {
          for (int64_t j = j0; j < j1; ++j) {
            float g = to_f32(dyr[j]);
            acc_w[j - j0] += (to_f32(xr[j]) - m) * rs * g;
            acc_b[j - j0] += g;
          }
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        dw.add(j, acc_w[j - j0]);
        db.add(j, acc_b[j - j0]);
      }
    }
  });
}

}  // namespace zt::cpu_ops
