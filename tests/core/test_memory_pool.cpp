// The caching memory pool on the CPU backend, whose streams are real worker threads and whose
// events complete only when the stream reaches them: same-stream reuse without waiting,
// cross-stream reuse only after (or ordered after) the guard event, size classes, reserved vs
// in-use statistics, empty_cache, and nothing left allocated at destruction.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "zerotrain/core/cpu_stream.h"
#include "zerotrain/core/memory_pool.h"

using namespace zt;

namespace {

// A task that holds a stream until open() (the stream's "slow kernel").
class Gate {
 public:
  void hold(Stream& s) {
    cpu_enqueue(s, [this] {
      while (!open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
  }
  void open() { open_ = true; }

 private:
  std::atomic<bool> open_{false};
};

// Fills `bytes` at p with v on stream s, then sets *ran.
void fill_on(Stream& s, void* p, int v, size_t bytes, std::atomic<bool>* ran = nullptr) {
  cpu_enqueue(s, [=] {
    std::memset(p, v, bytes);
    if (ran) *ran = true;
  });
}

size_t count_not(const void* p, size_t n, unsigned char v) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += static_cast<const unsigned char*>(p)[i] != v;
  return bad;
}

}  // namespace

TEST(MemoryPool, SizeClasses) {
  EXPECT_EQ(MemoryPool::size_class(1), 512u);
  EXPECT_EQ(MemoryPool::size_class(512), 512u);
  EXPECT_EQ(MemoryPool::size_class(513), 1024u);
  EXPECT_EQ(MemoryPool::size_class(4096), 4096u);
  EXPECT_EQ(MemoryPool::size_class(4097), 4608u);  // 4096 + 4096/8
  EXPECT_EQ(MemoryPool::size_class(5000), 5120u);
  EXPECT_EQ(MemoryPool::size_class(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(MemoryPool::size_class((size_t(1) << 20) + 1), (size_t(1) << 20) + (size_t(1) << 17));
  size_t prev = 0;
  for (size_t b = 1; b < (size_t(1) << 22); b = b * 5 / 4 + 7) {
    const size_t c = MemoryPool::size_class(b);
    ASSERT_GE(c, b);
    ASSERT_GE(c, prev) << "classes are monotone";
    ASSERT_EQ(MemoryPool::size_class(c), c) << "a class is its own class";
    if (b > 4096) {
      ASSERT_LT(c - b, b / 8) << b;
    }
    prev = c;
  }
  auto dev = make_cpu_device();
  auto s = dev->create_stream("s");
  PoolBuffer a = dev->pool().allocate(5000, MemCategory::Workspace, *s);
  EXPECT_EQ(a.bytes(), 5000u);
  EXPECT_EQ(a.block_bytes(), 5120u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  EXPECT_FALSE(static_cast<bool>(dev->pool().allocate(0, MemCategory::Workspace, *s)));
  // A different class is never served from a cached block of another class.
  const void* p = a.data();
  a.reset();
  PoolBuffer b = dev->pool().allocate(6000, MemCategory::Workspace, *s);
  EXPECT_NE(b.data(), p);
  EXPECT_FALSE(b.reused());
  PoolBuffer c = dev->pool().allocate(4700, MemCategory::Workspace, *s);  // 5120 again
  EXPECT_EQ(c.data(), p);
  EXPECT_TRUE(c.reused());
  s->synchronize();
}

// Released on stream A while A still has work queued: A may take it again at once, and the host
// does not wait for A to get there.
TEST(MemoryPool, SameStreamReuseDoesNotWait) {
  auto dev = make_cpu_device();
  auto a = dev->create_stream("a");
  Gate gate;
  PoolBuffer x = dev->pool().allocate(1000, MemCategory::Gather, *a);
  void* p = x.data();
  gate.hold(*a);
  std::atomic<bool> wrote{false};
  fill_on(*a, p, 0x11, 1000, &wrote);  // x's last use, still queued behind the gate
  x.reset();                             // released on a
  PoolBuffer y = dev->pool().allocate(900, MemCategory::Gather, *a);
  EXPECT_EQ(y.data(), p);
  EXPECT_TRUE(y.reused());
  EXPECT_FALSE(wrote.load()) << "the allocation must not have waited for stream a";
  fill_on(*a, y.data(), 0x22, 900);  // ordered after x's last use by stream order
  const PoolStats st = dev->pool().stats();
  EXPECT_EQ(st.same_stream_reuses, 1);
  EXPECT_EQ(st.cross_stream_reuses + st.cross_stream_waits, 0);
  gate.open();
  a->synchronize();
  EXPECT_EQ(count_not(p, 900, 0x22), 0u);
}

// CrossStream::CompletedOnly: a block released on A behind pending work is not handed to B
// until A's guard event completed; then it is.
TEST(MemoryPool, CrossStreamReuseOnlyAfterTheGuardEvent) {
  auto dev = make_cpu_device();
  auto a = dev->create_stream("a"), b = dev->create_stream("b");
  Gate gate;
  PoolBuffer x = dev->pool().allocate(4096, MemCategory::Gather, *a);
  void* p = x.data();
  gate.hold(*a);
  fill_on(*a, p, 0xAA, 4096);  // a slow task writes the block after it is "freed"
  x.reset();
  PoolBuffer y = dev->pool().allocate(4096, MemCategory::Gather, *b, false, CrossStream::CompletedOnly);
  EXPECT_NE(y.data(), p) << "stream b got a block whose guard event on a has not completed";
  EXPECT_FALSE(y.reused());
  fill_on(*b, y.data(), 0xBB, 4096);
  b->synchronize();
  gate.open();
  a->synchronize();
  EXPECT_EQ(count_not(y.data(), 4096, 0xBB), 0u);
  PoolBuffer z = dev->pool().allocate(4096, MemCategory::Gather, *b, false, CrossStream::CompletedOnly);
  EXPECT_EQ(z.data(), p) << "after a's event completed the cached block is b's to reuse";
  EXPECT_TRUE(z.reused());
  const PoolStats st = dev->pool().stats();
  EXPECT_EQ(st.cross_stream_reuses, 1);
  EXPECT_EQ(st.cross_stream_waits, 0);
  EXPECT_EQ(st.device_allocations, 2);
}

// CrossStream::Wait (the default): stream b gets the pending block at once, but b's work on it
// runs only after a's last use. Were the wait missing, b's fill would run first and a's late
// write would overwrite it (0xAA in the final contents).
TEST(MemoryPool, CrossStreamWaitOrdersReuseAfterTheGuardEvent) {
  auto dev = make_cpu_device();
  auto a = dev->create_stream("a"), b = dev->create_stream("b");
  Gate gate;
  PoolBuffer x = dev->pool().allocate(4096, MemCategory::Gather, *a);
  void* p = x.data();
  gate.hold(*a);
  fill_on(*a, p, 0xAA, 4096);
  x.release_on(*a);
  EXPECT_FALSE(static_cast<bool>(x));
  PoolBuffer y = dev->pool().allocate(4096, MemCategory::Workspace, *b);
  ASSERT_EQ(y.data(), p);
  EXPECT_TRUE(y.reused());
  std::atomic<bool> b_ran{false};
  fill_on(*b, y.data(), 0xBB, 4096, &b_ran);
  for (int i = 0; i < 200 && !b_ran.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(b_ran.load()) << "stream b used the block before a's guard event";
  gate.open();
  a->synchronize();
  b->synchronize();
  EXPECT_TRUE(b_ran.load());
  EXPECT_EQ(count_not(p, 4096, 0xBB), 0u) << "a's write landed after b's: reuse was not ordered";
  EXPECT_EQ(dev->pool().stats().cross_stream_waits, 1);
}

// In use vs reserved, per category, in the pool's stats and the device's tracker; a cached block
// stays reserved under its latest user's category and moves with its next lease.
TEST(MemoryPool, ReservedVsInUseStatistics) {
  auto dev = make_cpu_device();
  auto s = dev->create_stream("s");
  MemoryPool& pool = dev->pool();
  MemoryTracker& t = dev->tracker();
  DeviceBuffer direct = dev->alloc(100, MemCategory::Gather);  // reserves what it uses
  PoolBuffer g = pool.allocate(1000, MemCategory::Gather, *s);
  PoolStats st = pool.stats();
  EXPECT_EQ(st.in_use, 1000u);
  EXPECT_EQ(st.reserved, 1024u);
  EXPECT_EQ(st.cached, 0u);
  EXPECT_EQ(st.in_use_by[static_cast<int>(MemCategory::Gather)], 1000u);
  EXPECT_EQ(st.reserved_by[static_cast<int>(MemCategory::Gather)], 1024u);
  EXPECT_EQ(t.current(MemCategory::Gather), 1100u);
  EXPECT_EQ(t.reserved(MemCategory::Gather), 1124u);
  g.reset();
  st = pool.stats();
  EXPECT_EQ(st.in_use, 0u);
  EXPECT_EQ(st.cached, 1024u);
  EXPECT_EQ(st.reserved, 1024u);
  EXPECT_EQ(t.current(MemCategory::Gather), 100u);
  EXPECT_EQ(t.peak(MemCategory::Gather), 1100u);
  EXPECT_EQ(t.reserved(MemCategory::Gather), 1124u) << "a cached block stays reserved";
  PoolBuffer w = pool.allocate(800, MemCategory::Workspace, *s);
  EXPECT_TRUE(w.reused());
  EXPECT_EQ(t.reserved(MemCategory::Gather), 100u);
  EXPECT_EQ(t.reserved(MemCategory::Workspace), 1024u);
  EXPECT_EQ(t.current(MemCategory::Workspace), 800u);
  EXPECT_EQ(t.reserved_total(), 1124u);
  EXPECT_GE(t.peak_reserved_total(), 1124u);
  st = pool.stats();
  EXPECT_EQ(st.allocations, 2);
  EXPECT_EQ(st.device_allocations, 1);
  EXPECT_EQ(st.reserved_by[static_cast<int>(MemCategory::Workspace)], 1024u);
  EXPECT_EQ(st.reserved_by[static_cast<int>(MemCategory::Gather)], 0u);
  EXPECT_NE(t.report("memory").find("reserved (B)"), std::string::npos);
  s->synchronize();
}

// empty_cache frees cached blocks only, and only after their guard event: a block released
// behind a slow task is not freed under it.
TEST(MemoryPool, EmptyCacheWaitsForTheGuardEventAndKeepsLeases) {
  auto dev = make_cpu_device();
  auto a = dev->create_stream("a");
  MemoryPool& pool = dev->pool();
  PoolBuffer kept = pool.allocate(3000, MemCategory::Workspace, *a);
  PoolBuffer x = pool.allocate(20000, MemCategory::Gather, *a);
  Gate gate;
  gate.hold(*a);
  std::atomic<bool> wrote{false};
  fill_on(*a, x.data(), 0x5A, 20000, &wrote);
  x.reset();
  std::atomic<bool> emptied{false};
  size_t freed = 0;
  std::thread t([&] {
    freed = pool.empty_cache();
    emptied = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(emptied.load()) << "empty_cache returned while the block's last use was still queued";
  gate.open();
  t.join();
  EXPECT_TRUE(wrote.load());
  EXPECT_EQ(freed, MemoryPool::size_class(20000));
  const PoolStats st = pool.stats();
  EXPECT_EQ(st.reserved, MemoryPool::size_class(3000));
  EXPECT_EQ(st.cached, 0u);
  EXPECT_EQ(st.device_frees, 1);
  EXPECT_EQ(dev->tracker().reserved(MemCategory::Gather), 0u);
  fill_on(*a, kept.data(), 1, 3000);  // the lease is still valid memory
  a->synchronize();
  EXPECT_EQ(pool.empty_cache(), 0u);
}

// A pool of its own over the CPU device: after every lease is back, destroying the pool returns
// every block (reserved bytes back to 0 in the device's tracker); zero-filled leases of dirty
// reused blocks read zeros.
TEST(MemoryPool, NothingLeftAllocatedAtDestruction) {
  auto dev = make_cpu_device();
  auto a = dev->create_stream("a"), b = dev->create_stream("b");
  {
    MemoryPool pool(*dev);
    for (int round = 0; round < 3; ++round) {
      PoolBuffer x = pool.allocate(10000, MemCategory::Gather, *a, round > 0);
      if (round > 0) {
        a->synchronize();
        EXPECT_EQ(count_not(x.data(), 10000, 0), 0u) << "zero-filled lease of a reused block";
      }
      fill_on(*a, x.data(), 0xEE, 10000);
      PoolBuffer y = pool.allocate(700, MemCategory::Workspace, *b);
      PoolBuffer z = pool.allocate(70000, MemCategory::Activations, *b);
      y.release_on(*a);  // released on another stream than its own: a's free list
    }
    const PoolStats st = pool.stats();
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_EQ(st.reserved, st.cached);
    EXPECT_GT(st.reserved, 0u);
    EXPECT_EQ(dev->tracker().reserved_total(), st.reserved);
    EXPECT_EQ(dev->tracker().current_total(), 0u);
  }
  EXPECT_EQ(dev->tracker().reserved_total(), 0u);
  EXPECT_EQ(dev->tracker().current_total(), 0u);
}
