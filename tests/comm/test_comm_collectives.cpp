// Every collective × dtype × in-place/out-of-place × size (0, 1, odd, > 1 MiB), checked bit for
// bit on every rank against a rank-order fp32 reference computed locally from every rank's input.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "comm_test_util.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"

using namespace zt;
using namespace zt::testing_comm;

namespace {

struct Variant {
  const char* name;
  size_t chunk_bytes;
  size_t small_all_reduce_bytes;
  size_t small_broadcast_bytes;
};
// default settings; tiny chunks (many pipelined chunks, uneven chunk counts per block) with the
// chunked (fused reduce-scatter + all-gather) all_reduce and the scatter + all-gather broadcast
// forced even for one element (empty blocks).
const Variant kVariants[] = {
    {"default", CommOptions{}.chunk_bytes, CommOptions{}.small_all_reduce_bytes, CommOptions{}.small_broadcast_bytes},
    {"tiny_chunks", 4096 + 6, 0, 0}};
const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16};
// 0, 1, odd, a few KiB, and > 1 MiB in every dtype.
const size_t kCounts[] = {0, 1, 7, 1023, 600011};

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    dev_ = make_cpu_device();
    CommOptions o;
    o.chunk_bytes = kVariants[GetParam()].chunk_bytes;
    o.small_all_reduce_bytes = kVariants[GetParam()].small_all_reduce_bytes;
    o.small_broadcast_bytes = kVariants[GetParam()].small_broadcast_bytes;
    o.timeout_s = 120;
    comm_ = make_communicator(*dev_, MPI_COMM_WORLD, o);
    done_ = comm_->create_event();
  }
  void TearDown() override {
    done_.reset();
    comm_.reset();
  }
  // Alternate between waiting on the done event and synchronising the communicator.
  void finish(int i) {
    if (i % 2) done_->synchronize();
    else comm_->synchronize();
  }
  std::unique_ptr<Device> dev_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Event> done_;
};

TEST_P(Collectives, AllReduce) {
  const int n = comm_->world_size(), r = comm_->rank();
  uint64_t salt = 100;
  int i = 0;
  for (DType dt : kDTypes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          ++salt;
          std::vector<uint8_t> in, out(count * dtype_size(dt) + 1, 0xAB);
          fill_input(in, count, dt, r, salt);
          std::vector<uint8_t> want = reference(0, count, dt, op, n, salt);
          uint8_t* dst = in_place ? in.data() : out.data();
          comm_->all_reduce(in.data(), dst, count, dt, op, "ar", done_.get());
          finish(++i);
          EXPECT_TRUE(same_bits(dst, want.data(), count, dt))
              << dtype_name(dt) << " " << reduce_op_name(op) << " count " << count << (in_place ? " in place" : "");
          if (!in_place) {
            EXPECT_EQ(out.back(), 0xAB) << "wrote past the end";
          }
        }
}

TEST_P(Collectives, ReduceScatter) {
  const int n = comm_->world_size(), r = comm_->rank();
  uint64_t salt = 200;
  int i = 0;
  for (DType dt : kDTypes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg})
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          ++salt;
          const size_t elt = dtype_size(dt), total = count * n;
          std::vector<uint8_t> in, out(count * elt + 1, 0xAB);
          fill_input(in, total, dt, r, salt);
          std::vector<uint8_t> before = in;
          std::vector<uint8_t> want = reference(count * r, count, dt, op, n, salt);
          uint8_t* dst = in_place ? in.data() + count * r * elt : out.data();
          comm_->reduce_scatter(in.data(), dst, count, dt, op, "rs", done_.get());
          finish(++i);
          EXPECT_TRUE(same_bits(dst, want.data(), count, dt))
              << dtype_name(dt) << " " << reduce_op_name(op) << " count " << count << (in_place ? " in place" : "");
          // Other ranks' blocks of the send buffer are never written.
          for (int k = 0; k < n; ++k) {
            if (in_place && k == r) continue;
            EXPECT_TRUE(same_bits(in.data() + count * k * elt, before.data() + count * k * elt, count, dt))
                << "send block " << k << " modified";
          }
          if (!in_place) {
            EXPECT_EQ(out.back(), 0xAB) << "wrote past the end";
          }
        }
}

TEST_P(Collectives, AllGather) {
  const int n = comm_->world_size(), r = comm_->rank();
  uint64_t salt = 300;
  int i = 0;
  for (DType dt : kDTypes)
    for (size_t count : kCounts)
      for (bool in_place : {false, true}) {
        ++salt;
        const size_t elt = dtype_size(dt);
        std::vector<uint8_t> mine, recv(count * n * elt + 1, 0xAB), want;
        fill_input(mine, count, dt, r, salt);
        for (int k = 0; k < n; ++k) {
          std::vector<uint8_t> theirs;
          fill_input(theirs, count, dt, k, salt);
          want.insert(want.end(), theirs.begin(), theirs.end());
        }
        const void* send = mine.data();
        if (in_place) {
          std::memcpy(recv.data() + count * r * elt, mine.data(), count * elt);
          send = recv.data() + count * r * elt;
        }
        comm_->all_gather(send, recv.data(), count, dt, "ag", done_.get());
        finish(++i);
        EXPECT_TRUE(same_bits(recv.data(), want.data(), count * n, dt))
            << dtype_name(dt) << " count " << count << (in_place ? " in place" : "");
        EXPECT_EQ(recv.back(), 0xAB) << "wrote past the end";
      }
}

// Over blocks of consecutive ranks: every block size that divides the world, in and out of place,
// interleaved with world all-gathers of the same count (their messages must not mix).
TEST_P(Collectives, AllGatherInBlock) {
  const int n = comm_->world_size(), r = comm_->rank();
  uint64_t salt = 700;
  int i = 0;
  for (int block = 1; block <= n; ++block) {
    if (n % block) continue;
    comm_->prepare_block(block);
    const int base = r - r % block;
    for (DType dt : kDTypes)
      for (size_t count : kCounts)
        for (bool in_place : {false, true}) {
          ++salt;
          const size_t elt = dtype_size(dt);
          std::vector<uint8_t> mine, recv(count * block * elt + 1, 0xAB), world(count * n * elt), want;
          fill_input(mine, count, dt, r, salt);
          for (int k = base; k < base + block; ++k) {
            std::vector<uint8_t> theirs;
            fill_input(theirs, count, dt, k, salt);
            want.insert(want.end(), theirs.begin(), theirs.end());
          }
          const void* send = mine.data();
          if (in_place) {
            std::memcpy(recv.data() + count * (r % block) * elt, mine.data(), count * elt);
            send = recv.data() + count * (r % block) * elt;
          }
          comm_->all_gather_in_block(block, send, recv.data(), count, dt, "blk");
          comm_->all_gather(mine.data(), world.data(), count, dt, "ag", done_.get());
          finish(++i);
          EXPECT_TRUE(same_bits(recv.data(), want.data(), count * block, dt))
              << "block " << block << " " << dtype_name(dt) << " count " << count << (in_place ? " in place" : "");
          EXPECT_EQ(recv.back(), 0xAB) << "wrote past the end";
          const CommRecord rec = comm_->log().recent(2).front();
          EXPECT_EQ(rec.ranks, block);
          EXPECT_EQ(rec.bytes, count * block * elt);
        }
  }
  EXPECT_TRUE(comm_->block_prepared(n));
}

// all_to_all over the world and over both kinds of group of every block size that divides it.
TEST_P(Collectives, AllToAll) {
  const int n = comm_->world_size(), r = comm_->rank();
  uint64_t salt = 800;
  int i = 0;
  std::vector<RankGroup> groups{RankGroup::world()};
  for (int block = 1; block <= n; ++block)
    if (n % block == 0) {
      comm_->prepare_block(block);
      groups.push_back(RankGroup::within(block));
      groups.push_back(RankGroup::spanning(block));
    }
  for (const RankGroup& g : groups)
    for (DType dt : kDTypes)
      for (size_t count : kCounts) {
        ++salt;
        const int m = g.size(n), me = g.index(r);
        const size_t elt = dtype_size(dt);
        std::vector<uint8_t> mine, recv(count * m * elt + 1, 0xAB), want;
        fill_input(mine, count * m, dt, r, salt);  // block j for member j
        for (int j = 0; j < m; ++j) {               // block me of member j's input
          std::vector<uint8_t> theirs;
          fill_input(theirs, count * m, dt, g.member(r, j), salt);
          want.insert(want.end(), theirs.begin() + count * me * elt, theirs.begin() + count * (me + 1) * elt);
        }
        comm_->all_to_all(mine.data(), recv.data(), count, dt, g, "a2a", done_.get());
        finish(++i);
        EXPECT_TRUE(same_bits(recv.data(), want.data(), count * m, dt))
            << "group block " << g.block << (g.across ? " across" : "") << " " << dtype_name(dt) << " count " << count;
        EXPECT_EQ(recv.back(), 0xAB) << "wrote past the end";
        const CommRecord rec = comm_->log().recent(1).front();
        EXPECT_EQ(rec.op, CommOp::AllToAll);
        EXPECT_EQ(rec.ranks, g.block ? m : 0);
        EXPECT_EQ(rec.across, g.across);
        EXPECT_EQ(rec.bytes, count * m * elt);
      }
}

// What leaves a node, per group kind (4 ranks on 2 nodes of 2, blocked): a node's block sends
// nothing out; one rank of each block sends everything but its own share; the world as before.
TEST(GroupNodeSendBytes, FollowTheGroupsMembers) {
  const CommOptions o;
  for (CommBackend b : {CommBackend::MPI, CommBackend::NCCL}) {
    EXPECT_EQ(group_node_send_bytes(b, o, CommOp::AllGather, 1000, 4, 2, RankGroup::within(2)), 0.0);
    EXPECT_EQ(group_node_send_bytes(b, o, CommOp::AllToAll, 1000, 4, 2, RankGroup::within(2)), 0.0);
    // each of the node's 2 ranks sends its other member 1000/2
    EXPECT_EQ(group_node_send_bytes(b, o, CommOp::AllToAll, 1000, 4, 2, RankGroup::spanning(2)), 1000.0);
    EXPECT_EQ(group_node_send_bytes(b, o, CommOp::AllGather, 1000, 4, 2, RankGroup::spanning(2)), 1000.0);
    for (CommOp op : {CommOp::AllGather, CommOp::ReduceScatter, CommOp::AllReduce})
      EXPECT_EQ(group_node_send_bytes(b, o, op, 1 << 20, 4, 2, RankGroup::world()), node_send_bytes(b, o, op, 1 << 20, 4, 2));
  }
  EXPECT_EQ(group_node_send_bytes(CommBackend::NCCL, o, CommOp::AllToAll, 1000, 4, 2, RankGroup::world()), 1000.0);
  // a block of 4 on nodes of 2 spans both: MPI 2 ranks x 2 off-node members x 1000/4; NCCL one ring link x 3/4
  EXPECT_EQ(group_node_send_bytes(CommBackend::MPI, o, CommOp::AllGather, 1000, 8, 2, RankGroup::within(4)), 1000.0);
  EXPECT_EQ(group_node_send_bytes(CommBackend::NCCL, o, CommOp::AllGather, 1000, 8, 2, RankGroup::within(4)), 750.0);
}

TEST_P(Collectives, Broadcast) {
  const int n = comm_->world_size(), r = comm_->rank();
  uint64_t salt = 400;
  int i = 0;
  for (DType dt : kDTypes)
    for (size_t count : kCounts)
      for (int root = 0; root < n; ++root) {
        ++salt;
        std::vector<uint8_t> buf, want;
        fill_input(buf, count, dt, r, salt);
        fill_input(want, count, dt, root, salt);
        comm_->broadcast(buf.data(), count, dt, root, "bc", done_.get());
        finish(++i);
        EXPECT_TRUE(same_bits(buf.data(), want.data(), count, dt)) << dtype_name(dt) << " count " << count << " root " << root;
      }
}

TEST_P(Collectives, BarrierAndLog) {
  const int n = comm_->world_size();
  comm_->barrier("b0");
  std::vector<float> x(10, 1.0f), y(10 * n);
  comm_->all_gather(x.data(), y.data(), 10, DType::F32, "g1");
  comm_->all_reduce(x.data(), x.data(), 10, DType::F32, ReduceOp::Sum, "a2", done_.get());
  done_->synchronize();
  for (float v : x) EXPECT_EQ(v, static_cast<float>(n));
  const CommLog& log = comm_->log();
  EXPECT_EQ(log.last_issued(), 3u);
  EXPECT_EQ(log.last_completed(), 3u);
  std::vector<CommRecord> recs = log.recent(10);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].op, CommOp::Barrier);
  EXPECT_EQ(recs[1].op, CommOp::AllGather);
  EXPECT_EQ(recs[1].label, "g1");
  EXPECT_EQ(recs[1].bytes, 10u * 4u * n);  // full gathered size
  EXPECT_EQ(recs[2].op, CommOp::AllReduce);
  EXPECT_EQ(recs[2].bytes, 40u);
  for (size_t k = 0; k < recs.size(); ++k) {
    EXPECT_EQ(recs[k].seq, k + 1);
    EXPECT_TRUE(recs[k].completed());
    EXPECT_LE(recs[k].issued_s, recs[k].started_s);
    EXPECT_LE(recs[k].started_s, recs[k].completed_s);
  }
  EXPECT_EQ(log.stats(CommOp::AllGather).calls, 1u);
  EXPECT_EQ(log.stats(CommOp::AllGather).completed, 1u);
  EXPECT_EQ(log.stats(CommOp::AllReduce).bytes, 40u);
  EXPECT_FALSE(log.oldest_incomplete().has_value());
}

TEST_P(Collectives, NodeLocalRanks) {
  // mpirun on one machine: every rank is local.
  EXPECT_EQ(comm_->local_size(), comm_->world_size());
  EXPECT_EQ(comm_->local_rank(), comm_->rank());
  EXPECT_EQ(comm_->node().node, 0);
  EXPECT_EQ(comm_->node().nodes, 1);
  EXPECT_TRUE(comm_->node().blocked);
  EXPECT_EQ(comm_->backend(), CommBackend::MPI);
  // One node: nothing leaves it, and the log records 0 for every collective.
  float x = 1.0f;
  comm_->all_reduce(&x, &x, 1, DType::F32, ReduceOp::Sum, "node");
  comm_->synchronize();
  EXPECT_EQ(comm_->log().stats(CommOp::AllReduce).node_send_bytes, 0.0);
}

// The bytes each node sends to the others (communicator.h): 8 ranks on 2 nodes of 4, 1 MiB buffers.
TEST(NodeSendBytes, DirectExchangeAndRings) {
  const CommOptions o;
  const double B = 1 << 20;
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::ReduceScatter, B, 8, 4), 4.0 * 4 / 8 * B);
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::AllGather, B, 8, 4), 2.0 * B);
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::AllReduce, B, 8, 4), 4.0 * B);
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::AllReduce, 1024, 8, 4), 4.0 * 4 * 1024);  // small: whole buffers
  EXPECT_EQ(node_send_bytes(CommBackend::NCCL, o, CommOp::ReduceScatter, B, 8, 4), 7.0 / 8 * B);
  EXPECT_EQ(node_send_bytes(CommBackend::NCCL, o, CommOp::AllReduce, B, 8, 4), 2 * 7.0 / 8 * B);
  EXPECT_EQ(node_send_bytes(CommBackend::NCCL, o, CommOp::Broadcast, B, 8, 4), B);
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::Broadcast, 1024, 8, 4), 1024.0);  // one MPI_Bcast
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::Broadcast, B, 8, 4), 2.0 * B);   // scatter + all-gather
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::GatherStrings, B, 8, 4), 0.0);
  EXPECT_EQ(node_send_bytes(CommBackend::MPI, o, CommOp::AllGather, B, 8, 8), 0.0);  // one node
}

INSTANTIATE_TEST_SUITE_P(Comm, Collectives, ::testing::Range(0, 2),
                         [](const ::testing::TestParamInfo<int>& p) { return std::string(kVariants[p.param].name); });

}  // namespace
