// cpu_loss.cpp — fused softmax + cross-entropy and mean squared error on the CPU backend.
// Rows are independent (parallel over rows). softmax_cross_entropy reads each logits row into
// fp32 scratch before writing dlogits, so dlogits may alias logits.
#include <cmath>
#include <string>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {

void softmax_cross_entropy(const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                           const int32_t* targets, float dloss) {
  const int64_t N = losses.numel();
  if (N == 0) return;
  const int64_t V = logits.numel() / N;
  for (int64_t i = 0; i < N; ++i) {
    ZT_CHECK(targets[i] < V, "target id " + std::to_string(targets[i]) + " outside the vocabulary [0, " +
                                 std::to_string(V) + ")");
  }
  float* loss_p = static_cast<float*>(losses.data);
  dispatch_dtype(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits.data);
    T* dx = static_cast<T*>(dlogits.data);
#pragma omp parallel if (N * V > kParallelGrain)
    {
      std::vector<float> row(static_cast<size_t>(V));  // fp32 copy of one row: drow may alias it
#pragma omp for schedule(static)
      for (int64_t i = 0; i < N; ++i) {
        T* drow = dx + i * V;
        const int32_t target = targets[i];
        if (target < 0) {  // ignored position: no loss, no gradient
          loss_p[i] = 0.0f;
          for (int64_t j = 0; j < V; ++j) drow[j] = from_f32<T>(0.0f);
          continue;
        }
        const T* xr = x + i * V;
        float maxv = -INFINITY;
        for (int64_t j = 0; j < V; ++j) {
          row[j] = to_f32(xr[j]);
          if (row[j] > maxv) maxv = row[j];
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < V; ++j) {
          row[j] = expf(row[j] - maxv);
          sum += row[j];
        }
        // -log p[target] = log(sum) - (x[target] - max), taken from the logit (not log of row[]).
        const float shifted_target = to_f32(xr[target]) - maxv;
        loss_p[i] = logf(sum) - shifted_target;
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < V; ++j) {
          float p = row[j] * inv;
          drow[j] = from_f32<T>(dloss * (p - (j == target ? 1.0f : 0.0f)));
        }
      }
    }
  });
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
