// The memory pool on the CUDA backend (the same code as on the CPU backend, tests/core/
// test_memory_pool.cpp), and the device memory outside the tracker the memory report shows.
//
// The "slow kernel" is a host function that sleeps on stream a (cudaLaunchHostFunc), followed by
// a memset on a that writes the block after it was released: a reuse on stream b that is not
// ordered after a's guard event lets that late write overwrite b's contents.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "zerotrain/core/device.h"
#include "zerotrain/core/memory_pool.h"
#include "zerotrain/kernels/ops.h"

using namespace zt;

namespace {

constexpr size_t kBytes = size_t(8) << 20;

void sleep_on(Stream& s, int ms) {
  static int delay_ms;
  delay_ms = ms;
  ASSERT_EQ(cudaLaunchHostFunc(
                static_cast<cudaStream_t>(s.native_handle()),
                [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms)); }, nullptr),
            cudaSuccess);
}

size_t count_not(const uint8_t* p, size_t n, uint8_t v) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += p[i] != v;
  return bad;
}

class GpuPool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0)";
    dev_ = make_cuda_device(0);
    a_ = dev_->create_stream("a");
    b_ = dev_->create_stream("b");
    host_ = dev_->alloc_pinned_host(kBytes);
  }
  // Device contents of [p, p + kBytes) once both streams are idle.
  const uint8_t* final_contents(const void* p) {
    a_->synchronize();
    b_->synchronize();
    dev_->memcpy_async(host_.data(), p, kBytes, CopyKind::DeviceToHost, *b_);
    b_->synchronize();
    return host_.as<uint8_t>();
  }
  std::unique_ptr<Device> dev_;
  std::unique_ptr<Stream> a_, b_;
  DeviceBuffer host_;
};

}  // namespace

TEST_F(GpuPool, SameStreamReuseIsImmediate) {
  PoolBuffer x = dev_->pool().allocate(kBytes, MemCategory::Gather, *a_);
  void* p = x.data();
  sleep_on(*a_, 200);
  dev_->memset_async(p, 0xAA, kBytes, *a_);
  x.reset();
  const auto t0 = std::chrono::steady_clock::now();
  PoolBuffer y = dev_->pool().allocate(kBytes, MemCategory::Gather, *a_);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(y.data(), p);
  EXPECT_LT(ms, 100.0) << "a same-stream reuse must not wait for the stream";
  dev_->memset_async(y.data(), 0xBB, kBytes, *a_);
  EXPECT_EQ(count_not(final_contents(p), kBytes, 0xBB), 0u);
  EXPECT_EQ(dev_->pool().stats().same_stream_reuses, 1);
}

TEST_F(GpuPool, CrossStreamReuseIsOrderedAfterTheGuardEvent) {
  PoolBuffer x = dev_->pool().allocate(kBytes, MemCategory::Gather, *a_);
  void* p = x.data();
  sleep_on(*a_, 200);
  dev_->memset_async(p, 0xAA, kBytes, *a_);  // written after the release below is issued
  x.release_on(*a_);
  PoolBuffer other = dev_->pool().allocate(kBytes, MemCategory::Gather, *b_, false, CrossStream::CompletedOnly);
  EXPECT_NE(other.data(), p) << "CompletedOnly handed out a block whose guard event is pending";
  PoolBuffer y = dev_->pool().allocate(kBytes, MemCategory::Gather, *b_);  // CrossStream::Wait
  ASSERT_EQ(y.data(), p);
  dev_->memset_async(y.data(), 0xBB, kBytes, *b_);
  EXPECT_EQ(count_not(final_contents(p), kBytes, 0xBB), 0u) << "a's late write landed after b's: reuse not ordered";
  const PoolStats st = dev_->pool().stats();
  EXPECT_EQ(st.cross_stream_waits, 1);
  EXPECT_EQ(st.device_allocations, 2);
}

TEST_F(GpuPool, EmptyCacheReturnsMemoryToTheDevice) {
  const int64_t used_before = dev_->device_used_bytes();
  {
    PoolBuffer x = dev_->pool().allocate(size_t(256) << 20, MemCategory::Workspace, *a_, true);
    EXPECT_GE(dev_->device_used_bytes(), used_before + (int64_t(256) << 20));
  }
  EXPECT_GE(dev_->device_used_bytes(), used_before + (int64_t(256) << 20)) << "a released block stays cached";
  EXPECT_EQ(dev_->pool().empty_cache(), size_t(256) << 20);
  EXPECT_LT(dev_->device_used_bytes(), used_before + (int64_t(256) << 20));
  EXPECT_EQ(dev_->tracker().reserved(MemCategory::Workspace), 0u);
}

// cuda_context and cublas_workspace are measured; the device's in-use figure covers them and
// what the tracker reserves. Prints the figures (the device check compares whole runs).
TEST_F(GpuPool, OutsideTrackerMemoryIsMeasured) {
  DeviceBuffer m = dev_->alloc(64 * sizeof(float), MemCategory::Workspace, true);
  DeviceBuffer c = dev_->alloc(64 * sizeof(float), MemCategory::Workspace, true);
  ops::gemm(*a_, false, false, 8, 8, 8, 1.0f, m.view(DType::F32, {64}), m.view(DType::F32, {64}), 0.0f,
            c.view(DType::F32, {64}));
  a_->synchronize();
  PoolBuffer big = dev_->pool().allocate(size_t(128) << 20, MemCategory::Gather, *b_);
  int64_t outside = 0, context = 0, cublas = 0;
  for (const OutsideTrackerMemory& o : dev_->outside_tracker_memory()) {
    std::printf("outside the tracker: %-18s %14lld B  (%s)\n", o.category.c_str(), static_cast<long long>(o.bytes),
                o.measured_by.c_str());
    outside += o.bytes;
    if (o.category == "cuda_context") context = o.bytes;
    if (o.category == "cublas_workspace") cublas = o.bytes;
  }
  EXPECT_GT(context, 0);
  EXPECT_GE(cublas, int64_t(32) << 20) << "the stream's cuBLAS workspace";
  int64_t reserved = 0;
  for (int i = 0; i < kNumMemCategories; ++i) {
    const MemCategory cat = static_cast<MemCategory>(i);
    if (cat != MemCategory::PinnedHost) reserved += static_cast<int64_t>(dev_->tracker().reserved(cat));
  }
  const int64_t used = dev_->device_used_bytes();
  std::printf("reserved %lld B + outside %lld B = %lld B; cudaMemGetInfo in use %lld B\n",
              static_cast<long long>(reserved), static_cast<long long>(outside),
              static_cast<long long>(reserved + outside), static_cast<long long>(used));
  EXPECT_GE(used, reserved + outside - (int64_t(4) << 20));  // cudaMalloc rounds up, never down
}
