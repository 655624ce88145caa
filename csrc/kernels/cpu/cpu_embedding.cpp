// cpu_embedding.cpp — token + position embedding forward/backward on the CPU backend; without
// wpe (absent view) the token embedding alone, without dwpe no position gradient.
// Backward is deterministic without atomics: positions are grouped by token id (stable sort,
// so each group lists its positions in increasing order), each group's dout rows are summed in
// fp32 in that order and added to its dwte row once; groups own disjoint rows, so they run in
// parallel. dwpe[t] sums over b = 0..B-1 in order.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "cpu_kernels.h"

namespace zt::cpu_ops {

void embedding_forward(const TensorView& out, const int32_t* tokens, const TensorView& wte, const TensorView& wpe,
                       int64_t B, int64_t T_, int64_t C) {
  const int64_t V = C > 0 ? wte.numel() / C : 0;
  const int64_t N = B * T_;
  for (int64_t i = 0; i < N; ++i) {
    ZT_CHECK(tokens[i] >= 0 && tokens[i] < V,
             "token id " + std::to_string(tokens[i]) + " outside the vocabulary [0, " + std::to_string(V) + ")");
  }
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data);
    const T* te = static_cast<const T*>(wte.data);
    const T* pe = static_cast<const T*>(wpe.data);
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t i = 0; i < N; ++i) {
      const T* tr = te + static_cast<int64_t>(tokens[i]) * C;
      T* orow = o + i * C;
      if (pe == nullptr) {  // no position term (rotary positions)
        for (int64_t j = 0; j < C; ++j) orow[j] = tr[j];
        continue;
      }
      const T* pr = pe + (i % T_) * C;
      for (int64_t j = 0; j < C; ++j) orow[j] = from_f32<T>(to_f32(tr[j]) + to_f32(pr[j]));
    }
  });
}

namespace {
// dwpe[t] += Σ_b dout[b, t] in b order, positions in parallel.
template <typename T>
void add_position_grads(const GradOut<T>& dpe, const T* dy, int64_t B, int64_t T_, int64_t C) {
#pragma omp parallel for schedule(static) if (B * T_ * C > kParallelGrain)
  for (int64_t t = 0; t < T_; ++t) {
    std::vector<float> acc(static_cast<size_t>(C), 0.0f);
    for (int64_t b = 0; b < B; ++b) {
      const T* row = dy + (b * T_ + t) * C;
      for (int64_t j = 0; j < C; ++j) acc[j] += to_f32(row[j]);
    }
    for (int64_t j = 0; j < C; ++j) dpe.add(t * C + j, acc[j]);
  }
}
}  // namespace

void embedding_backward(const TensorView& dwte, const TensorView& dwpe, const TensorView& dout,
                        const int32_t* tokens, int64_t B, int64_t T_, int64_t C) {
  const int64_t V = C > 0 ? dwte.numel() / C : 0;
  const int64_t N = B * T_;
  if (N == 0 || C == 0) return;
  for (int64_t i = 0; i < N; ++i) {
    ZT_CHECK(tokens[i] >= 0 && tokens[i] < V,
             "token id " + std::to_string(tokens[i]) + " outside the vocabulary [0, " + std::to_string(V) + ")");
  }
  // order: positions sorted by token id, ties by position; starts: first index of each group.
  std::vector<int64_t> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return tokens[a] < tokens[b]; });
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < N; ++i) {
    if (i == 0 || tokens[order[i]] != tokens[order[i - 1]]) starts.push_back(i);
  }
  const int64_t groups = static_cast<int64_t>(starts.size());
  starts.push_back(N);

  dispatch_dtype(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    const GradOut<T> dte(dwte), dpe(dwpe);
    const T* dy = static_cast<const T*>(dout.data);
#pragma omp parallel for schedule(static) if (N * C > kParallelGrain)
    for (int64_t g = 0; g < groups; ++g) {
      std::vector<float> acc(static_cast<size_t>(C), 0.0f);
      for (int64_t k = starts[g]; k < starts[g + 1]; ++k) {
        const T* row = dy + order[k] * C;
        for (int64_t j = 0; j < C; ++j) acc[j] += to_f32(row[j]);
      }
      const int64_t row = static_cast<int64_t>(tokens[order[starts[g]]]) * C;
      for (int64_t j = 0; j < C; ++j) dte.add(row + j, acc[j]);
    }
    if (dpe.present()) add_position_grads(dpe, dy, B, T_, C);  // dwpe absent: no position term
  });
}

}  // namespace zt::cpu_ops
