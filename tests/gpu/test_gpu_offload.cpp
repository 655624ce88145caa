// ZeRO-Offload's device-side machinery on a GPU: host buffers are really pinned or pageable,
// and a device->host copy of pinned memory on its own (copy) stream overlaps a kernel running on
// the compute stream — the overlap HostOptimizer's pipeline relies on. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>

#include "zerotrain/core/device.h"
#include "zerotrain/kernels/ops.h"

using namespace zt;

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TEST(GpuOffload, PinnedAndPageableHostBuffers) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0)";
  auto dev = make_cuda_device(0);
  DeviceBuffer pinned = dev->alloc_host(1 << 20, MemCategory::HostStaging, true);
  DeviceBuffer pageable = dev->alloc_host(1 << 20, MemCategory::HostStaging, false);
  cudaPointerAttributes a{}, b{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned.data()), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&b, pageable.data()), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost) << "pin_memory: true must be page-locked";
  EXPECT_EQ(b.type, cudaMemoryTypeUnregistered) << "pin_memory: false must be pageable";
  EXPECT_EQ(dev->tracker().current(MemCategory::HostStaging), size_t(2) << 20);
}

// A 256 MiB pinned device->host copy on the copy stream while the compute stream scales a large
// buffer many times: together they take clearly less than one after the other.
TEST(GpuOffload, CopyStreamOverlapsCompute) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0)";
  auto dev = make_cuda_device(0);
  auto compute = dev->create_stream("compute");
  auto copy = dev->create_stream("offload copy");
  constexpr size_t kCopy = size_t(256) << 20;
  constexpr int64_t kElems = int64_t(64) << 20;
  DeviceBuffer src = dev->alloc(kCopy, MemCategory::Workspace, true);
  DeviceBuffer dst = dev->alloc_host(kCopy, MemCategory::HostStaging, true, false);
  DeviceBuffer work = dev->alloc(kElems * 4, MemCategory::Workspace, true);
  const TensorView w = work.view(DType::F32, {kElems});
  auto compute_work = [&] { for (int i = 0; i < 40; ++i) ops::scale(*compute, w, 1.0f); };
  auto copy_work = [&] { dev->memcpy_async(dst.data(), src.data(), kCopy, CopyKind::DeviceToHost, *copy); };
  compute_work(); copy_work(); compute->synchronize(); copy->synchronize();  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  compute_work(); compute->synchronize();
  const double t_compute = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  copy_work(); copy->synchronize();
  const double t_copy = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  copy_work(); compute_work(); copy->synchronize(); compute->synchronize();
  const double t_both = ms_since(t0);
  std::printf("compute %.2f ms, copy %.2f ms, both %.2f ms (serial sum %.2f ms)\n", t_compute, t_copy, t_both,
              t_compute + t_copy);
  EXPECT_LT(t_both, 0.85 * (t_compute + t_copy)) << "the copy stream did not overlap the compute stream";
}
