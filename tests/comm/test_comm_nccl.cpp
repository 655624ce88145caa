// NCCL backend, one rank per GPU: every collective × dtype × in place/out of place against the
// same rank-order reference as the MPI tests (within the dtype's rounding, since NCCL's order is
// its own), events, the log. Skips with a reason where there is no CUDA backend or no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/device.h"

using namespace zt;
using namespace zt::testing_comm;

namespace {

class NcclComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    NodeLocal nl = node_local(MPI_COMM_WORLD);
    dev_ = make_cuda_device(cuda_ordinal_for_local_rank(nl.local_rank, nl.local_size, cuda_device_count()));
    CommOptions o;
    o.timeout_s = 120;
    comm_ = make_communicator(*dev_, MPI_COMM_WORLD, o);
    stream_ = dev_->create_stream("test");
  }
  void TearDown() override {
    stream_.reset();
    comm_.reset();
    dev_.reset();
  }
  DeviceBuffer upload(const std::vector<uint8_t>& host, size_t bytes) {
    DeviceBuffer b = dev_->alloc(bytes ? bytes : 1, MemCategory::Workspace, true);
    if (!host.empty()) dev_->memcpy_async(b.data(), host.data(), host.size(), CopyKind::HostToDevice, *stream_);
    stream_->synchronize();
    return b;
  }
  std::vector<uint8_t> download(const void* p, size_t bytes) {
    std::vector<uint8_t> h(bytes);
    if (bytes) dev_->memcpy_async(h.data(), p, bytes, CopyKind::DeviceToHost, *stream_);
    stream_->synchronize();
    return h;
  }
  static void expect_close(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t count, DType dt,
                           const std::string& what) {
    const float tol = dt == DType::F32 ? 1e-5f : (dt == DType::BF16 ? 1e-2f : 2e-3f);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      float g = load(got.data(), i, dt), w = load(want.data(), i, dt);
      if (!(std::fabs(g - w) <= tol * (1.0f + std::fabs(w)))) ++bad;
    }
    EXPECT_EQ(bad, 0u) << what;
  }
  std::unique_ptr<Device> dev_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Stream> stream_;
};

TEST_F(NcclComm, AllCollectives) {
  const int n = comm_->world_size(), r = comm_->rank();
  EXPECT_EQ(comm_->backend(), CommBackend::NCCL);
  auto done = comm_->create_event();
  uint64_t salt = 900;
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(600011)})
      for (bool in_place : {false, true}) {
        const size_t elt = dtype_size(dt);
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
          std::vector<uint8_t> in;
          fill_input(in, count, dt, r, ++salt);
          DeviceBuffer a = upload(in, count * elt), b = upload({}, count * elt);
          void* dst = in_place ? a.data() : b.data();
          comm_->all_reduce(a.data(), dst, count, dt, op, "ar", done.get());
          stream_->wait(*done);
          expect_close(download(dst, count * elt), reference(0, count, dt, op, n, salt), count, dt,
                       std::string("all_reduce ") + reduce_op_name(op));
        }
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
          std::vector<uint8_t> in;
          fill_input(in, count * n, dt, r, ++salt);
          DeviceBuffer a = upload(in, count * n * elt), b = upload({}, count * elt);
          void* dst = in_place ? static_cast<char*>(a.data()) + count * r * elt : b.data();
          comm_->reduce_scatter(a.data(), dst, count, dt, op, "rs", done.get());
          stream_->wait(*done);
          expect_close(download(dst, count * elt), reference(count * r, count, dt, op, n, salt), count, dt,
                       "reduce_scatter");
        }
        {
          std::vector<uint8_t> mine, want;
          fill_input(mine, count, dt, r, ++salt);
          for (int k = 0; k < n; ++k) {
            std::vector<uint8_t> t;
            fill_input(t, count, dt, k, salt);
            want.insert(want.end(), t.begin(), t.end());
          }
          DeviceBuffer recv = upload({}, count * n * elt), send = upload(mine, count * elt);
          const void* s = send.data();
          if (in_place) {
            dev_->memcpy_async(static_cast<char*>(recv.data()) + count * r * elt, mine.data(), count * elt,
                               CopyKind::HostToDevice, *stream_);
            stream_->synchronize();
            s = static_cast<char*>(recv.data()) + count * r * elt;
          }
          comm_->all_gather(s, recv.data(), count, dt, "ag", done.get());
          stream_->wait(*done);
          EXPECT_TRUE(same_bits(download(recv.data(), count * n * elt).data(), want.data(), count * n, dt));
        }
        {
          std::vector<uint8_t> mine, want;
          fill_input(mine, count, dt, r, ++salt);
          fill_input(want, count, dt, 0, salt);
          DeviceBuffer buf = upload(mine, count * elt);
          comm_->broadcast(buf.data(), count, dt, 0, "bc", done.get());
          stream_->wait(*done);
          EXPECT_TRUE(same_bits(download(buf.data(), count * elt).data(), want.data(), count, dt));
        }
      }
  comm_->barrier("end");
  comm_->synchronize();
  EXPECT_EQ(comm_->log().last_completed(), comm_->log().last_issued());
  comm_->verify_same_across_ranks(42, "nccl schedule");
}

// Groups of ranks (hpZ, qgZ): every block size dividing the world, all_gather over the block and
// all_to_all over both group kinds; groups smaller than the world run on a communicator split once
// per size and kind (ncclCommSplit), the whole world's on the parent.
TEST_F(NcclComm, GroupCollectives) {
  const int n = comm_->world_size(), r = comm_->rank();
  auto done = comm_->create_event();
  uint64_t salt = 900;
  for (int block = 1; block <= n; ++block) {
    if (n % block) continue;
    comm_->prepare_block(block);
    const int base = r - r % block;
    for (DType dt : {DType::F32, DType::BF16})
      for (size_t count : {size_t(1), size_t(1023), size_t(300007)}) {
        const size_t elt = dtype_size(dt);
        std::vector<uint8_t> mine, want;
        fill_input(mine, count, dt, r, ++salt);
        for (int k = base; k < base + block; ++k) {
          std::vector<uint8_t> t;
          fill_input(t, count, dt, k, salt);
          want.insert(want.end(), t.begin(), t.end());
        }
        DeviceBuffer recv = upload({}, count * block * elt), send = upload(mine, count * elt);
        comm_->all_gather_in_block(block, send.data(), recv.data(), count, dt, "blk", done.get());
        stream_->wait(*done);
        EXPECT_TRUE(same_bits(download(recv.data(), count * block * elt).data(), want.data(), count * block, dt))
            << "block " << block << " " << dtype_name(dt) << " count " << count;
        EXPECT_EQ(comm_->log().recent(1).front().ranks, block);
        for (RankGroup g : {RankGroup::within(block), RankGroup::spanning(block)}) {  // all_to_all
          const int m = g.size(n), me = g.index(r);
          std::vector<uint8_t> in, expect;
          fill_input(in, count * m, dt, r, ++salt);
          for (int j = 0; j < m; ++j) {
            std::vector<uint8_t> t;
            fill_input(t, count * m, dt, g.member(r, j), salt);
            expect.insert(expect.end(), t.begin() + count * me * elt, t.begin() + count * (me + 1) * elt);
          }
          DeviceBuffer a2a_in = upload(in, count * m * elt), a2a_out = upload({}, count * m * elt);
          comm_->all_to_all(a2a_in.data(), a2a_out.data(), count, dt, g, "a2a", done.get());
          stream_->wait(*done);
          EXPECT_TRUE(same_bits(download(a2a_out.data(), count * m * elt).data(), expect.data(), count * m, dt))
              << "all_to_all block " << block << (g.across ? " across" : "") << " count " << count;
        }
      }
  }
  comm_->synchronize();
  EXPECT_EQ(comm_->log().last_completed(), comm_->log().last_issued());
}

// The host-side control exchanges run after the comm stream drained, in the log (so the watchdog
// sees them) between the collectives around them, and complete in order.
TEST_F(NcclComm, ControlExchangesAreLoggedInOrder) {
  const int n = comm_->world_size(), r = comm_->rank();
  DeviceBuffer x = upload({}, 4096 * sizeof(float));
  const uint64_t before = comm_->all_reduce(x.data(), x.data(), 4096, DType::F32, ReduceOp::Sum, "before");
  const std::vector<int64_t> mx = comm_->max_over_ranks({r, 7}, "verdict");
  ASSERT_EQ(mx.size(), 2u);
  EXPECT_EQ(mx[0], n - 1);
  EXPECT_EQ(mx[1], 7);
  const std::vector<std::string> all = comm_->gather_strings("rank " + std::to_string(r), 0, "report");
  if (r == 0) {
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) EXPECT_EQ(all[k], "rank " + std::to_string(k));
  }
  const uint64_t after = comm_->barrier("after");
  comm_->synchronize();
  const CommLog& log = comm_->log();
  EXPECT_EQ(after, before + 3);
  const std::optional<CommRecord> m = log.find(before + 1), g = log.find(before + 2);
  ASSERT_TRUE(m && g);
  EXPECT_EQ(m->op, CommOp::MaxOverRanks);
  EXPECT_EQ(m->label, "verdict");
  EXPECT_EQ(g->op, CommOp::GatherStrings);
  EXPECT_EQ(g->label, "report");
  EXPECT_TRUE(m->completed() && g->completed());
  EXPECT_LE(log.find(before)->completed_s, m->started_s);  // after the collective before it
  EXPECT_EQ(log.last_completed(), log.last_issued());
}

}  // namespace
