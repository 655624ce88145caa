// cpu_loss.cpp — fused softmax + cross-entropy and mean squared error on the CPU backend.
// Rows are independent (parallel over rows). softmax_cross_entropy runs each row through
// vec::softmax_xent_row (SIMD path picked at run time, bitwise equal on every path; fp32 rows in
// place, bf16/fp16 rows via fp32 scratch), so dlogits may alias logits. Against the previous
// scalar kernel (glibc expf, one sequential sum) losses and gradients differ by rounding only:
// exp_nonpos is within 4 ulp of exp and the row sum is taken over 16 partial sums
// (tests/kernels/test_vec_kernels.cpp bounds the difference).
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_vec_kernels.h"

namespace zt::cpu_ops {

namespace {
// Rows of V real logits stored ld apart (ld == V: contiguous); columns [V, ld) are untouched.
void softmax_ce_rows(const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                     const int32_t* targets, float dloss, int64_t V, int64_t ld) {
  const int64_t N = losses.numel();
  for (int64_t i = 0; i < N; ++i) {
    ZT_CHECK(targets[i] < V, "target id " + std::to_string(targets[i]) + " outside the vocabulary [0, " +
                                 std::to_string(V) + ")");
  }
  float* loss_p = static_cast<float*>(losses.data);
  const vec::Kernels& k = vec::active();
  dispatch_dtype(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits.data);
    T* dx = static_cast<T*>(dlogits.data);
#pragma omp parallel if (N * V > kParallelGrain)
    {
      // fp32 copy of one row for bf16/fp16 (drow may alias the logits); fp32 rows work in place.
      std::vector<float> row(std::is_same_v<T, float> ? 0 : static_cast<size_t>(V));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < N; ++i) {
        T* drow = dx + i * ld;
        const int32_t target = targets[i];
        if (target < 0) {  // ignored position: no loss, no gradient
          loss_p[i] = 0.0f;
          for (int64_t j = 0; j < V; ++j) drow[j] = from_f32<T>(0.0f);
          continue;
        }
        const T* xr = x + i * ld;
        if constexpr (std::is_same_v<T, float>) {
          loss_p[i] = vec::softmax_xent_row(k, xr, drow, V, target, dloss);
        } else {
          widen_n(k, xr, row.data(), V);
          loss_p[i] = vec::softmax_xent_row(k, row.data(), row.data(), V, target, dloss);
          narrow_n(k, row.data(), drow, V);
        }
      }
    }
  });
}

}  // namespace

void softmax_cross_entropy(const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                           const int32_t* targets, float dloss) {
  const int64_t N = losses.numel();
  if (N == 0) return;
  const int64_t V = logits.numel() / N;
  softmax_ce_rows(losses, dlogits, logits, targets, dloss, V, V);
}

void softmax_cross_entropy_ld(const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                              const int32_t* targets, float dloss, int64_t V, int64_t ld) {
  if (losses.numel() == 0) return;
  softmax_ce_rows(losses, dlogits, logits, targets, dloss, V, ld);
}

void mse_loss(const TensorView& losses, const TensorView& dpred, const TensorView& pred, const TensorView& target,
              float dloss) {
  const int64_t N = losses.numel();
  if (N == 0) return;
  const int64_t K = pred.numel() / N;
  float* loss_p = static_cast<float*>(losses.data);
  dispatch_dtype(pred.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(pred.data);
    const T* y = static_cast<const T*>(target.data);
    T* dp = static_cast<T*>(dpred.data);
#pragma omp parallel for schedule(static) if (N * K > kParallelGrain)
    for (int64_t i = 0; i < N; ++i) {
      float sum = 0.0f;
      for (int64_t j = 0; j < K; ++j) {
        // read both before writing: dpred may alias pred
        float d = to_f32(p[i * K + j]) - to_f32(y[i * K + j]);
        sum += d * d;
        dp[i * K + j] = from_f32<T>(dloss * 2.0f * d / static_cast<float>(K));
      }
      loss_p[i] = K > 0 ? sum / static_cast<float>(K) : 0.0f;
    }
  });
}

}  // namespace zt::cpu_ops
