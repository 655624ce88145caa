// Ordering and asynchrony: collectives issued back to back, fed by and feeding a compute stream
// through events only (no host synchronisation inside the loop), give the right results; the
// issuing call never blocks; repeated reductions are bitwise reproducible and all_reduce agrees
// bit for bit with reduce_scatter. Also run under ThreadSanitizer (docs/comm.md).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "comm_test_util.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/cpu_stream.h"

using namespace zt;
using namespace zt::testing_comm;

namespace {

std::unique_ptr<Communicator> make_comm(Device& dev) {
  CommOptions o;
  o.timeout_s = 120;
  o.chunk_bytes = 8192;  // several chunks per collective
  return make_communicator(dev, MPI_COMM_WORLD, o);
}

TEST(CommOrdering, PipelineWithComputeStream) {
  auto dev = make_cpu_device();
  auto comm = make_comm(*dev);
  const int n = comm->world_size(), r = comm->rank();
  CpuStream compute("compute");
  constexpr int kIters = 240, kDepth = 3;  // kDepth buffers in flight, reused round robin
  constexpr size_t kCount = 5003;          // per-rank block (odd)
  std::vector<std::vector<float>> buf(kDepth, std::vector<float>(kCount * n));
  std::vector<std::unique_ptr<Event>> ready, done;
  for (int i = 0; i < kIters; ++i) {
    ready.push_back(comm->create_event());
    done.push_back(comm->create_event());
  }
  std::vector<int> errors(kIters, -1);  // written by the compute thread only
  uint64_t expect_seq = 0;
  for (int i = 0; i < kIters; ++i) {
    std::vector<float>& b = buf[i % kDepth];
    float* p = b.data();
    // Producer: compute fills the buffer (after it consumed this buffer's previous result, by
    // stream order), with some work so that streams really interleave.
    compute.enqueue([p, i, r, n] {
      for (size_t j = 0; j < kCount * n; ++j) p[j] = static_cast<float>((i + 1) * (r + 1)) + static_cast<float>(j % 7);
    });
    ready[i]->record(compute);
    comm->wait(*ready[i]);
    const int kind = i % 4;
    uint64_t seq = 0;
    switch (kind) {
      case 0: seq = comm->all_reduce(p, p, kCount * n, DType::F32, ReduceOp::Sum, "ar", done[i].get()); break;
      case 1: seq = comm->reduce_scatter(p, p + kCount * r, kCount, DType::F32, ReduceOp::Sum, "rs", done[i].get()); break;
      case 2: seq = comm->all_gather(p + kCount * r, p, kCount, DType::F32, "ag", done[i].get()); break;
      case 3: seq = comm->broadcast(p, kCount * n, DType::F32, i % n, "bc", done[i].get()); break;
    }
    EXPECT_EQ(seq, ++expect_seq);
    // Consumer: compute waits for the collective, then checks the result.
    compute.wait(*done[i]);
    compute.enqueue([p, i, r, n, kind, &errors] {
      int bad = 0;
      const float sum_ranks = static_cast<float>(n * (n + 1) / 2);
      for (int k = 0; k < n; ++k) {
        if (kind == 1 && k != r) continue;  // reduce_scatter: only the own block is defined
        for (size_t j = k * kCount; j < (k + 1) * kCount; ++j) {
          const float base = static_cast<float>(j % 7);
          float want = 0;
          switch (kind) {
            case 0: case 1: want = static_cast<float>(i + 1) * sum_ranks + n * base; break;
            case 2: want = static_cast<float>((i + 1) * (k + 1)) + base; break;
            case 3: want = static_cast<float>((i + 1) * (i % n + 1)) + base; break;
          }
          bad += p[j] != want;
        }
      }
      errors[i] = bad;
    });
  }
  compute.synchronize();
  for (int i = 0; i < kIters; ++i) EXPECT_EQ(errors[i], 0) << "iteration " << i << " kind " << i % 4;
  comm->synchronize();
  const CommLog& log = comm->log();
  EXPECT_EQ(log.last_completed(), static_cast<uint64_t>(kIters));
  EXPECT_EQ(log.stats(CommOp::AllReduce).calls, static_cast<uint64_t>(kIters / 4));
  EXPECT_EQ(log.stats(CommOp::ReduceScatter).completed, static_cast<uint64_t>(kIters / 4));
  EXPECT_EQ(log.stats(CommOp::AllGather).bytes, static_cast<uint64_t>(kIters / 4) * kCount * n * 4);
  std::vector<CommRecord> last = log.recent(8);
  ASSERT_EQ(last.size(), 8u);
  for (size_t k = 1; k < last.size(); ++k) {
    EXPECT_EQ(last[k].seq, last[k - 1].seq + 1);
    EXPECT_LE(last[k - 1].completed_s, last[k].started_s) << "collectives overlapped on one stream";
  }
}

TEST(CommOrdering, IssueNeverBlocks) {
  auto dev = make_cpu_device();
  auto comm = make_comm(*dev);
  CpuStream compute("compute");
  std::atomic<bool> gate{false};
  compute.enqueue([&gate] {
    while (!gate.load()) std::this_thread::yield();
  });
  auto ready = comm->create_event(), done = comm->create_event();
  ready->record(compute);
  comm->wait(*ready);
  std::vector<float> x(1000, 1.0f);
  comm->all_reduce(x.data(), x.data(), x.size(), DType::F32, ReduceOp::Sum, "gated", done.get());
  // The collective cannot have started: its input is not ready yet. Yet we are here.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done->query());
  auto rec = comm->log().oldest_incomplete();
  ASSERT_TRUE(rec.has_value());
  EXPECT_FALSE(rec->started());
  gate = true;
  done->synchronize();
  EXPECT_EQ(x[0], static_cast<float>(comm->world_size()));
  compute.synchronize();
}

TEST(CommOrdering, BitwiseReproducibleAndConsistent) {
  auto dev = make_cpu_device();
  auto comm = make_comm(*dev);
  const int n = comm->world_size(), r = comm->rank();
  for (DType dt : {DType::F32, DType::BF16}) {
    const size_t count = 40007, elt = dtype_size(dt);  // per-rank block
    std::vector<uint8_t> in, a, b, rs(count * elt);
    fill_input(in, count * n, dt, r, 77);
    a = in;
    b = in;
    comm->all_reduce(a.data(), a.data(), count * n, dt, ReduceOp::Sum, "run1");
    comm->all_reduce(b.data(), b.data(), count * n, dt, ReduceOp::Sum, "run2");
    comm->reduce_scatter(in.data(), rs.data(), count, dt, ReduceOp::Sum, "rs");
    comm->synchronize();
    EXPECT_TRUE(same_bits(a.data(), b.data(), count * n, dt)) << "two all_reduces differ";
    EXPECT_TRUE(same_bits(a.data() + r * count * elt, rs.data(), count, dt)) << "all_reduce vs reduce_scatter";
    // Every rank holds the same bits: compare everyone's result with rank 0's.
    std::vector<uint8_t> root = a;
    comm->broadcast(root.data(), count * n, dt, 0, "cmp");
    comm->synchronize();
    EXPECT_TRUE(same_bits(a.data(), root.data(), count * n, dt)) << "rank " << r << " differs from rank 0";
  }
}

}  // namespace
