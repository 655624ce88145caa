// kernel_test_util.h — host tensors, random inputs and comparisons for the kernel tests.
// References are written independently in double precision; they never call the kernels.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "zerotrain/core/cpu_stream.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/kernels/ops.h"

namespace zt {
// Readable parameter names in gtest output.
inline void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace zt

namespace zt::test {

// Owns host storage of one dtype; elements are read/written as double (stores round RNE).
class HostTensor {
 public:
  HostTensor(DType t, std::vector<int64_t> dims) : dtype_(t), dims_(std::move(dims)) {
    n_ = 1;
    for (int64_t d : dims_) n_ *= d;
    bytes_.assign(static_cast<size_t>(n_) * dtype_size(t) + 1, 0);  // +1: never a null data()
  }
  int64_t numel() const { return n_; }
  DType dtype() const { return dtype_; }
  TensorView view() {
    TensorView v;
    v.data = bytes_.data();
    v.dtype = dtype_;
    v.device = DeviceKind::CPU;
    v.ndim = static_cast<int>(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) v.shape[i] = dims_[i];
    return v;
  }
  double get(int64_t i) const {
    switch (dtype_) {
      case DType::F32: { float f; std::memcpy(&f, bytes_.data() + 4 * i, 4); return f; }
      case DType::BF16: { uint16_t h; std::memcpy(&h, bytes_.data() + 2 * i, 2); return bf16_bits_to_f32(h); }
      case DType::F16: { uint16_t h; std::memcpy(&h, bytes_.data() + 2 * i, 2); return f16_bits_to_f32(h); }
    }
    return 0;
  }
  void set(int64_t i, double v) {
    float f = static_cast<float>(v);
    switch (dtype_) {
      case DType::F32: std::memcpy(bytes_.data() + 4 * i, &f, 4); break;
      case DType::BF16: { uint16_t h = f32_to_bf16_bits(f); std::memcpy(bytes_.data() + 2 * i, &h, 2); break; }
      case DType::F16: { uint16_t h = f32_to_f16_bits(f); std::memcpy(bytes_.data() + 2 * i, &h, 2); break; }
    }
  }
  std::vector<double> values() const {
    std::vector<double> out(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) out[i] = get(i);
    return out;
  }
  void fill(const std::vector<double>& v) {
    for (int64_t i = 0; i < n_; ++i) set(i, v[i]);
  }
  const std::vector<unsigned char>& raw() const { return bytes_; }

 private:
  DType dtype_;
  std::vector<int64_t> dims_;
  int64_t n_;
  std::vector<unsigned char> bytes_;
};

// Uniform values in [lo, hi), already representable in dtype t (so references see what the kernel sees).
inline std::vector<double> random_values(std::mt19937_64& rng, int64_t n, DType t, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  HostTensor tmp(t, {n});
  for (int64_t i = 0; i < n; ++i) tmp.set(i, dist(rng));
  return tmp.values();
}
inline HostTensor random_tensor(std::mt19937_64& rng, DType t, std::vector<int64_t> dims, double lo = -1.0,
                                double hi = 1.0) {
  HostTensor h(t, std::move(dims));
  h.fill(random_values(rng, h.numel(), t, lo, hi));
  return h;
}

// |got - want| <= atol + rtol |want| for every element; reports the first few failures.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (++failures <= 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size() << " elements out of tolerance";
}

// Per-dtype tolerance for a value that went through one rounding to the storage type.
inline double dtype_rtol(DType t) { return t == DType::F32 ? 1e-5 : t == DType::BF16 ? 1.6e-2 : 2e-3; }

// Central finite difference of f at x (double), component by component.
inline std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f,
                                        std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    double fp = f(x);
    x[i] = x0 - h;
    double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Restores an environment variable (set or unset) when a test that changes it ends.
struct RestoreEnv {
  explicit RestoreEnv(const char* name) : name(name), before(std::getenv(name)), saved(before ? before : "") {}
  ~RestoreEnv() { before ? setenv(name, saved.c_str(), 1) : unsetenv(name); }
  RestoreEnv(const RestoreEnv&) = delete;
  RestoreEnv& operator=(const RestoreEnv&) = delete;
  const char* name;
  const char* before;
  std::string saved;
};

// A CPU device and one compute stream; tests synchronize before reading results.
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = make_cpu_device();
    stream_ = dev_->create_stream("compute");
  }
  Stream& s() { return *stream_; }
  void sync() { stream_->synchronize(); }
  std::mt19937_64 rng_{12345};
  std::unique_ptr<Device> dev_;
  std::unique_ptr<Stream> stream_;
};

inline const DType kAllDtypes[] = {DType::F32, DType::BF16, DType::F16};

}  // namespace zt::test

namespace zt::test {
// |got - want| <= rel * mag + 1e-7 per element, mag = the sum of |terms| that produced want
// (bounds fp32 accumulation error and the final rounding to the storage type).
inline void expect_close_mag(const std::vector<double>& got, const std::vector<double>& want,
                             const std::vector<double>& mag, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= rel * mag[i] + 1e-7)) {
      if (++failures <= 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size() << " elements out of tolerance";
}
// Unit roundoff of the storage type, with headroom for fp32 accumulation.
inline double dtype_eps(DType t) { return t == DType::F32 ? 2e-6 : t == DType::BF16 ? 8e-3 : 1e-3; }
}  // namespace zt::test

namespace zt::test {
inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}
// Checks an accumulating gradient output: after == before + grad (grad from finite differences).
// Tolerance: rel (|before| + |grad|) + rel * max|grad| (fp32 kernels vs a double reference).
inline void expect_accumulated(const std::vector<double>& after, const std::vector<double>& before,
                               const std::vector<double>& grad, double rel, const std::string& what) {
  const double gmax = max_abs(grad);
  std::vector<double> want(grad.size()), mag(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    want[i] = before[i] + grad[i];
    mag[i] = std::fabs(before[i]) + std::fabs(grad[i]) + gmax;
  }
  expect_close_mag(after, want, mag, rel, what);
}
// A gradient an op overwrites (whatever the tensor held before): after == grad within
// rel (|grad| + max|grad| + 1). The 1 is the inputs' scale (the tests draw values of magnitude ~1):
// where grad is exactly 0 (at T = 1 each query sees only its own key, and the gradients of q and
// k vanish), fp32 sums of such terms still leave round-off of their size.
inline void expect_overwritten(const std::vector<double>& after, const std::vector<double>& grad, double rel,
                               const std::string& what) {
  const double gmax = max_abs(grad);
  std::vector<double> mag(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) mag[i] = std::fabs(grad[i]) + gmax + 1.0;
  expect_close_mag(after, grad, mag, rel, what);
}
// Relative tolerance for a backward kernel checked against double finite differences.
inline double grad_rel(DType t) { return t == DType::F32 ? 1e-4 : t == DType::BF16 ? 2e-2 : 4e-3; }

// Sets the OpenMP thread count of the stream's worker thread (the ICV is per thread) for later ops.
inline void set_stream_omp_threads(Stream& s, int threads);

inline std::string dt_tag(DType t) { return std::string(" [") + dtype_name(t) + "]"; }
}  // namespace zt::test

#include <omp.h>
inline void zt::test::set_stream_omp_threads(Stream& s, int threads) {
  cpu_enqueue(s, [threads] { omp_set_num_threads(threads); });
}
