// gpu_test_util.h — the CUDA backend checked against the CPU backend: every test builds the
// same inputs on both, runs the op through zt::ops on a CUDA stream and on a CPU stream, and
// compares. Tests skip (GTEST_SKIP, with the reason) when zt::cuda_device_count() == 0.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/ops.h"

namespace zt::gputest {

inline TensorView make_view(void* p, DType t, const std::vector<int64_t>& dims, DeviceKind k) {
  TensorView v;
  v.data = p;
  v.dtype = t;
  v.device = k;
  v.ndim = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) v.shape[i] = dims[i];
  return v;
}

// Both backends, set up once per test.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0): CUDA kernel tests need one";
    gpu_ = make_cuda_device(0);
    cpu_ = make_cpu_device();
    gs_ = gpu_->create_stream("gpu-test");
    cs_ = cpu_->create_stream("cpu-test");
  }
  void TearDown() override {
    if (gs_) gs_->synchronize();  // its cuBLAS handle and scratch die with it (release hook)
    if (cs_) cs_->synchronize();
  }

 public:
  Stream& gs() { return *gs_; }
  Stream& cs() { return *cs_; }
  void sync() {
    gs_->synchronize();
    cs_->synchronize();
  }
  std::vector<float> uniform(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng_);
    return v;
  }

 protected:
  std::unique_ptr<Device> gpu_, cpu_;
  std::unique_ptr<Stream> gs_, cs_;
  std::mt19937 rng_{1234};
};

// One tensor on both backends with the same contents (values rounded to the dtype once).
// The host copy is plain memory (what the CPU backend computes on); the GPU copy is a
// tracked cudaMalloc buffer. `offset` elements of padding in front make misaligned views.
class Dual {
 public:
  Dual(GpuTest& env, Device& gpu, DType t, std::vector<int64_t> dims, const std::vector<float>& init,
       int64_t offset = 0)
      : env_(env), dtype_(t), dims_(std::move(dims)), offset_(offset) {
    n_ = 1;
    for (int64_t d : dims_) n_ *= d;
    const size_t bytes = static_cast<size_t>(n_ + offset_) * dtype_size(t) + 16;
    host_.assign(bytes, 0);
    dev_ = gpu.alloc(bytes, MemCategory::Workspace, true);
    gpu_ = &gpu;
    if (!init.empty()) set(init);
  }
  void set(const std::vector<float>& v) {
    EXPECT_EQ(static_cast<int64_t>(v.size()), n_);
    convert(v.data(), DType::F32, host_ptr(), dtype_, static_cast<size_t>(n_));
    upload();
  }
  // Host copy -> device copy (so both hold identical bits).
  void upload() {
    gpu_->memcpy_async(dev_ptr(), host_ptr(), nbytes(), CopyKind::HostToDevice, env_.gs());
    env_.gs().synchronize();
  }
  TensorView cpu() { return make_view(host_ptr(), dtype_, dims_, DeviceKind::CPU); }
  TensorView gpu() { return make_view(dev_ptr(), dtype_, dims_, DeviceKind::CUDA); }
  std::vector<uint8_t> cpu_raw() const {
    auto* p = host_.data() + offset_ * dtype_size(dtype_);
    return std::vector<uint8_t>(p, p + nbytes());
  }
  std::vector<uint8_t> gpu_raw() {
    std::vector<uint8_t> out(nbytes());
    gpu_->memcpy_async(out.data(), dev_ptr(), nbytes(), CopyKind::DeviceToHost, env_.gs());
    env_.gs().synchronize();
    return out;
  }
  std::vector<float> cpu_values() const { return widen(cpu_raw()); }
  std::vector<float> gpu_values() { return widen(gpu_raw()); }
  int64_t numel() const { return n_; }
  DType dtype() const { return dtype_; }

 private:
  size_t nbytes() const { return static_cast<size_t>(n_) * dtype_size(dtype_); }
  void* host_ptr() { return host_.data() + offset_ * dtype_size(dtype_); }
  void* dev_ptr() { return dev_.as<char>() + offset_ * dtype_size(dtype_); }
  std::vector<float> widen(const std::vector<uint8_t>& raw) const {
    std::vector<float> v(static_cast<size_t>(n_));
    convert(raw.data(), dtype_, v.data(), DType::F32, static_cast<size_t>(n_));
    return v;
  }
  GpuTest& env_;
  Device* gpu_ = nullptr;
  DType dtype_;
  std::vector<int64_t> dims_;
  int64_t offset_ = 0, n_ = 0;
  std::vector<uint8_t> host_;
  DeviceBuffer dev_;
};

// int32 ids (tokens, targets) on both backends.
class DualInts {
 public:
  DualInts(GpuTest& env, Device& gpu, const std::vector<int32_t>& v) : host_(v) {
    dev_ = gpu.alloc(v.size() * sizeof(int32_t) + 4, MemCategory::Workspace, true);
    gpu.memcpy_async(dev_.data(), host_.data(), v.size() * sizeof(int32_t), CopyKind::HostToDevice, env.gs());
    env.gs().synchronize();
  }
  const int32_t* cpu() const { return host_.data(); }
  const int32_t* gpu() const { return dev_.as<int32_t>(); }

 private:
  std::vector<int32_t> host_;
  DeviceBuffer dev_;
};

// Rounding unit of the dtype (half an ulp at 1.0).
inline double unit(DType t) {
  switch (t) {
    case DType::BF16: return 1.0 / 256;
    case DType::F16: return 1.0 / 2048;
    default: return 1.0 / 16777216;
  }
}
inline std::string tag(DType t) { return std::string(" [") + dtype_name(t) + "]"; }

// |got - want| <= rtol |want| + atol_frac * max|want|, elementwise; reports the worst elements.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol_frac,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double maxabs = 0;
  for (float w : want) maxabs = std::max(maxabs, std::fabs(static_cast<double>(w)));
  const double atol = atol_frac * maxabs;
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    double err = std::fabs(g - w);
    bool ok = err <= rtol * std::fabs(w) + atol || (std::isnan(g) && std::isnan(w)) || (g == w);
    if (!ok) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
      worst = std::max(worst, err);
    }
  }
  if (bad) {
    ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements differ (rtol " << rtol << ", atol "
                  << atol << "); first at " << first << ": gpu " << got[first] << " vs cpu " << want[first]
                  << ", worst |err| " << worst;
  }
}

// Tolerance for an output rounded once to dtype after fp32 math that may differ in the last
// fp32 bits between backends (FMA contraction, libm vs CUDA transcendentals, sum order).
inline double tol(DType t, double fp32_rel = 1e-5) { return std::max(4.0 * unit(t), fp32_rel); }

}  // namespace zt::gputest
