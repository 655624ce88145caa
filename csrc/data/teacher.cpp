// teacher.cpp — random teacher MLP regression data.
#include "zerotrain/data/teacher.h"

#include <cmath>
#include <sstream>

#include "zerotrain/core/check.h"
#include "counter_rng.h"

namespace zt {

namespace {
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
}  // namespace

TeacherDataset::TeacherDataset(std::vector<int64_t> dims, bool relu, double noise, uint64_t seed,
                               int64_t global_batch)
    : dims_(std::move(dims)), relu_(relu), noise_(noise), seed_(seed), B_(global_batch) {
  if (dims_.size() < 2) throw InputError("teacher data: needs an MLP model (dims [in, ..., out])");
  for (int64_t d : dims_)
    if (d <= 0) throw InputError("teacher data: MLP dims must be > 0");
  if (!(noise_ >= 0) || !std::isfinite(noise_)) throw InputError("teacher data: noise must be a number >= 0");
  const size_t layers = dims_.size() - 1;
  weights_.resize(layers);
  biases_.resize(layers);
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    const double std_w = 1.0 / std::sqrt(static_cast<double>(in));
    weights_[l].resize(static_cast<size_t>(in * out));
    biases_[l].resize(static_cast<size_t>(out));
    for (int64_t i = 0; i < in * out; ++i)
      weights_[l][i] = std_w * data_rng::normal(seed_, data_rng::kTeacherWeights, 2 * l, static_cast<uint64_t>(i));
    for (int64_t o = 0; o < out; ++o)
      biases_[l][o] = 0.1 * data_rng::normal(seed_, data_rng::kTeacherWeights, 2 * l + 1, static_cast<uint64_t>(o));
  }
}

void TeacherDataset::teacher_forward(const float* x, double* y) const {
  std::vector<double> cur(x, x + dims_[0]), nxt;
  const size_t layers = weights_.size();
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    nxt.assign(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o) {
      const double* w = &weights_[l][static_cast<size_t>(o * in)];
      double acc = biases_[l][o];
      for (int64_t i = 0; i < in; ++i) acc += w[i] * cur[i];
      if (l + 1 < layers) acc = relu_ ? std::max(0.0, acc) : gelu_tanh(acc);
      nxt[o] = acc;
    }
    cur.swap(nxt);
  }
  std::copy(cur.begin(), cur.end(), y);
}

void TeacherDataset::fill(int64_t k, int64_t first_sample, int64_t count, Batch& out) const {
  ZT_CHECK(first_sample >= 0 && count >= 0 && first_sample + count <= B_, "teacher fill: samples outside the batch");
  const int64_t in = in_dim(), od = out_dim();
  out.B = count;
  out.T = 1;
  out.inputs.clear();
  out.targets.clear();
  out.features.resize(static_cast<size_t>(count * in));
  out.targets_f.resize(static_cast<size_t>(count * od));
  std::vector<double> y(static_cast<size_t>(od));
  for (int64_t s = 0; s < count; ++s) {
    const uint64_t g = static_cast<uint64_t>(k * B_ + first_sample + s);
    float* x = &out.features[static_cast<size_t>(s * in)];
    for (int64_t j = 0; j < in; ++j)
      x[j] = static_cast<float>(data_rng::normal(seed_, data_rng::kTeacherInputs, g, static_cast<uint64_t>(j)));
    teacher_forward(x, y.data());
    for (int64_t o = 0; o < od; ++o)
      out.targets_f[static_cast<size_t>(s * od + o)] = static_cast<float>(
          y[o] + noise_ * data_rng::normal(seed_, data_rng::kTeacherNoise, g, static_cast<uint64_t>(o)));
  }
}

std::string TeacherDataset::describe() const {
  std::ostringstream os;
  os << "teacher: dims [";
  for (size_t i = 0; i < dims_.size(); ++i) os << (i ? ", " : "") << dims_[i];
  os << "], " << (relu_ ? "relu" : "gelu") << ", noise " << noise_ << ", seed " << seed_
     << "; best achievable MSE " << best_loss();
  return os.str();
}

}  // namespace zt
