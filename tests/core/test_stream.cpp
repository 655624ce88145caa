// CPU streams and events: in-order execution, cross-stream waits, host sync — under concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "zerotrain/core/cpu_stream.h"

using namespace zt;

TEST(CpuStream, RunsInIssueOrder) {
  CpuStream s("compute");
  std::vector<int> order;  // only touched by the stream thread until synchronize()
  for (int i = 0; i < 1000; ++i) s.enqueue([&order, i] { order.push_back(i); });
  s.synchronize();
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
}

TEST(CpuStream, WaitOrdersAcrossStreams) {
  // Producer writes slowly on stream A; consumer on stream B waits for the event.
  for (int trial = 0; trial < 50; ++trial) {
    CpuStream a("comm"), b("compute");
    CpuEvent done;
    int value = 0;
    int seen = -1;
    a.enqueue([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      value = 42;
    });
    done.record(a);
    b.wait(done);
    b.enqueue([&] { seen = value; });
    b.synchronize();
    EXPECT_EQ(seen, 42);
  }
}

TEST(CpuStream, WaitCapturesRecordAtCallTime) {
  // A later record() must not extend an earlier wait (CUDA semantics).
  CpuStream a("a"), b("b");
  CpuEvent e;
  std::atomic<bool> gate{false};
  std::atomic<int> b_ran{0};
  a.enqueue([] {});
  e.record(a);
  a.synchronize();
  b.wait(e);                       // captures record #1, which is complete
  a.enqueue([&] { while (!gate.load()) std::this_thread::yield(); });
  e.record(a);                     // record #2 blocks behind the gate
  b.enqueue([&] { b_ran = 1; });
  b.synchronize();                 // must not deadlock
  EXPECT_EQ(b_ran.load(), 1);
  EXPECT_FALSE(e.query());
  gate = true;
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST(CpuStream, UnrecordedEventIsNoOp) {
  CpuStream s("s");
  CpuEvent e;
  EXPECT_TRUE(e.query());
  s.wait(e);
  int x = 0;
  s.enqueue([&] { x = 1; });
  s.synchronize();
  EXPECT_EQ(x, 1);
  e.synchronize();
}

TEST(CpuStream, PingPongChainUnderConcurrency) {
  // Two streams alternately increment a counter, each step waiting for the other's event.
  CpuStream a("a"), b("b");
  std::vector<std::unique_ptr<CpuEvent>> ev;
  int counter = 0;
  const int kSteps = 400;
  for (int i = 0; i < kSteps; ++i) ev.push_back(std::make_unique<CpuEvent>());
  for (int i = 0; i < kSteps; ++i) {
    CpuStream& s = (i % 2) ? b : a;
    if (i > 0) s.wait(*ev[i - 1]);
    s.enqueue([&counter, i] {
      EXPECT_EQ(counter, i);
      counter = i + 1;
    });
    ev[i]->record(s);
  }
  ev[kSteps - 1]->synchronize();
  a.synchronize();
  b.synchronize();
  EXPECT_EQ(counter, kSteps);
}

TEST(CpuStream, DeviceCopiesAreOrdered) {
  auto dev = make_cpu_device();
  auto s = dev->create_stream("copy");
  DeviceBuffer src = dev->alloc(4096, MemCategory::Workspace);
  DeviceBuffer dst = dev->alloc(4096, MemCategory::Workspace);
  for (int i = 0; i < 1024; ++i) src.as<float>()[i] = static_cast<float>(i);
  dev->memset_async(dst.data(), 0, 4096, *s);
  dev->memcpy_async(dst.data(), src.data(), 4096, CopyKind::DeviceToDevice, *s);
  auto e = dev->create_event(true);
  auto e0 = dev->create_event(true);
  e->record(*s);
  e->synchronize();
  e0->record(*s);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(dst.as<float>()[i], static_cast<float>(i));
  EXPECT_GE(e0->elapsed_ms_since(*e), 0.0f);
}
