// teacher.h — `teacher:` data: MLP regression targets from a random teacher network plus noise.
//
// The teacher has the student's shape (dims [in, h1, …, out] and activation): layer l is
// y = x W_l^T + b_l with W_l [out, in] ~ N(0, 1/in) and b_l ~ N(0, 0.1²) keyed (seed, l, element),
// followed by the activation on every layer but the last. Sample g (global index g = k·B + s) has
// features x ~ N(0, 1) [in] keyed (seed, g, j) and targets y = teacher(x) + σ·ε, ε ~ N(0, 1) [out].
// The student can represent the teacher exactly, so the best achievable MSE (mean over batch and
// outputs) is σ².
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/data/dataset.h"

namespace zt {

class TeacherDataset final : public Dataset {
 public:
  TeacherDataset(std::vector<int64_t> dims, bool relu, double noise, uint64_t seed, int64_t global_batch);

  std::string describe() const override;
  int64_t vocab_size() const override { return 0; }
  double best_loss() const override { return noise_ * noise_; }
  void fill(int64_t global_batch_index, int64_t first_sample, int64_t count, Batch& out) const override;

  // The noiseless teacher in double precision: x [in] -> y [out].
  void teacher_forward(const float* x, double* y) const;
  int64_t in_dim() const { return dims_.front(); }
  int64_t out_dim() const { return dims_.back(); }

 private:
  std::vector<int64_t> dims_;
  bool relu_;
  double noise_;
  uint64_t seed_;
  int64_t B_;
  std::vector<std::vector<double>> weights_;  // per layer [out, in]
  std::vector<std::vector<double>> biases_;   // per layer [out]
};

}  // namespace zt
