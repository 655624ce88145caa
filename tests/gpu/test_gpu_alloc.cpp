// Zero-filled device allocations are complete before any later work on any stream.
//
// Device::alloc(..., zero=true) used to zero with cudaMemset: legacy default stream, returns
// before completion, and every zerotrain stream is non-blocking (no implicit ordering with the
// legacy stream). This test makes the legacy stream slow (a host function that sleeps on it),
// reuses freed memory holding a 0xAB pattern, allocates a zeroed buffer and at once, on a
// non-blocking stream, both reads it (must be all zeros) and writes part of it (the write must
// survive). A zero-fill that runs late shows up as 0xAB bytes read, or as the write wiped out.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "zerotrain/core/device.h"

using namespace zt;

namespace {

// Count of bytes in [p, p+n) that differ from `v` (and the first such offset).
size_t count_not(const uint8_t* p, size_t n, uint8_t v, size_t* first) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    if (p[i] != v && bad++ == 0) *first = i;
  return bad;
}

}  // namespace

TEST(GpuAlloc, ZeroedAllocationIsOrderedBeforeWorkOnOtherStreams) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0)";
  auto dev = make_cuda_device(0);
  auto s = dev->create_stream("reader");  // non-blocking, like every zerotrain stream
  constexpr size_t kBytes = size_t(256) << 20;
  constexpr size_t kWritten = size_t(1) << 20;  // the reader stream overwrites the first MiB
  constexpr int kRounds = 12;
  DeviceBuffer host = dev->alloc_pinned_host(kBytes);
  int reused = 0;
  for (int round = 0; round < kRounds; ++round) {
    void* old_ptr = nullptr;
    {
      DeviceBuffer dirty = dev->alloc(kBytes, MemCategory::Workspace, false);
      dev->memset_async(dirty.data(), 0xAB, kBytes, *s);
      s->synchronize();
      old_ptr = dirty.data();
    }  // freed: the next cudaMalloc of this size usually returns the same, still 0xAB, memory
    // Keep the legacy default stream busy for a while: a late zero-fill queued there would run
    // only after the reads and writes below.
    ASSERT_EQ(cudaLaunchHostFunc(
                  nullptr, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, nullptr),
              cudaSuccess);
    DeviceBuffer buf = dev->alloc(kBytes, MemCategory::Workspace, true);
    reused += buf.data() == old_ptr;
    dev->memset_async(buf.data(), 0x5C, kWritten, *s);
    dev->memcpy_async(host.data(), buf.data(), kBytes, CopyKind::DeviceToHost, *s);
    s->synchronize();
    ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    const auto* h = host.as<uint8_t>();
    size_t first = 0;
    size_t bad = count_not(h, kWritten, 0x5C, &first);
    ASSERT_EQ(bad, 0u) << "round " << round << ": a write issued after alloc(zero=true) was wiped in " << bad
                       << " bytes (first at " << first << ", value " << int(h[first]) << "): the zero-fill ran late";
    bad = count_not(h + kWritten, kBytes - kWritten, 0, &first);
    ASSERT_EQ(bad, 0u) << "round " << round << ": " << bad << " bytes of a zeroed allocation read non-zero (first at "
                       << kWritten + first << ", value " << int(h[kWritten + first])
                       << "): the zero-fill was not complete before work on another stream";
  }
  RecordProperty("rounds_on_reused_memory", reused);
  std::printf("zeroed-allocation ordering: %d rounds, %d of them on reused 0xAB memory\n", kRounds, reused);
}

// An allocation the GPU cannot hold ends the process with one line naming the request, its
// category and the device's free/total memory.
TEST(GpuAllocDeathTest, OutOfMemoryNamesBytesCategoryAndFreeTotal) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes: a fresh CUDA context
  EXPECT_EXIT(
      {
        auto dev = make_cuda_device(0);
        DeviceBuffer b = dev->alloc(size_t(64) << 40, MemCategory::Activations);  // 64 TiB
      },
      ::testing::ExitedWithCode(1),
      "out of device memory on cuda:0.*requested 65536.00 GiB \\(70368744177664 B\\) for activations; device has .* "
      "free of .*GiB");
}
