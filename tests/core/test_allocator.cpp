#include <gtest/gtest.h>

#include "zerotrain/core/device.h"

using namespace zt;

TEST(Allocator, TracksCurrentAndPeakPerCategory) {
  auto dev = make_cpu_device();
  MemoryTracker& t = dev->tracker();
  {
    DeviceBuffer a = dev->alloc(1000, MemCategory::Params);
    DeviceBuffer b = dev->alloc(500, MemCategory::Grads, /*zero=*/true);
    EXPECT_EQ(t.current(MemCategory::Params), 1000u);
    EXPECT_EQ(t.current(MemCategory::Grads), 500u);
    EXPECT_EQ(t.current_total(), 1500u);
    EXPECT_EQ(t.reserved(MemCategory::Params), 1000u);  // a direct allocation reserves what it uses
    EXPECT_EQ(t.reserved_total(), 1500u);
    for (size_t i = 0; i < 500; ++i) ASSERT_EQ(b.as<unsigned char>()[i], 0);
    {
      DeviceBuffer c = dev->alloc(4000, MemCategory::Params);
      EXPECT_EQ(t.current(MemCategory::Params), 5000u);
    }
    EXPECT_EQ(t.current(MemCategory::Params), 1000u);
    EXPECT_EQ(t.peak(MemCategory::Params), 5000u);
    EXPECT_EQ(t.peak_total(), 5500u);
    DeviceBuffer moved = std::move(a);  // ownership moves, accounting does not double
    EXPECT_EQ(t.current(MemCategory::Params), 1000u);
    EXPECT_FALSE(static_cast<bool>(a));
  }
  EXPECT_EQ(t.current_total(), 0u);
  EXPECT_EQ(t.reserved_total(), 0u);
  EXPECT_EQ(t.peak_reserved_total(), 5500u);
  EXPECT_EQ(t.peak(MemCategory::Params), 5000u);
  t.reset_peaks();
  EXPECT_EQ(t.peak(MemCategory::Params), 0u);
  DeviceBuffer p = dev->alloc_pinned_host(64);
  EXPECT_EQ(t.current(MemCategory::PinnedHost), 64u);
  EXPECT_NE(t.report("memory").find("pinned_host"), std::string::npos);
}

TEST(Allocator, ZeroBytesIsEmptyAndViewChecksSize) {
  auto dev = make_cpu_device();
  DeviceBuffer z = dev->alloc(0, MemCategory::Workspace);
  EXPECT_FALSE(static_cast<bool>(z));
  DeviceBuffer b = dev->alloc(64, MemCategory::Workspace);
  TensorView v = b.view(DType::F32, {4, 4});
  EXPECT_EQ(v.numel(), 16);
  EXPECT_EQ(v.shape_string(), "[4, 4]");
  EXPECT_EQ(v.slice1d(4, 8).data, static_cast<void*>(b.as<float>() + 4));
  EXPECT_DEATH(b.view(DType::F32, {5, 4}), "larger than its buffer");
}

TEST(Allocator, CategoryNames) {
  EXPECT_STREQ(mem_category_name(MemCategory::OptimMoments), "optimizer_moments");
  EXPECT_STREQ(mem_category_name(MemCategory::Communicator), "communicator");
  EXPECT_STREQ(mem_category_name(MemCategory::HostActivations), "host_activations");
}
