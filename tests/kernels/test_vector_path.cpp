// vector_path.h: the host-side choice between the CUDA kernels' 128-bit path and their scalar
// path, and the multi-tensor AdamW's chunk list. Pure functions of addresses and sizes, so they
// are checked here, on the CPU, with fabricated addresses (nothing is dereferenced).
#include <gtest/gtest.h>

#include "zerotrain/kernels/vector_path.h"

using namespace zt;

namespace {
const void* addr(uintptr_t a) { return reinterpret_cast<const void*>(a); }
}  // namespace

TEST(VectorPath, AlignedOperandsVectoriseFromElementZero) {
  const VecOperand ops[3] = {{addr(0x1000), 2}, {addr(0x2000), 2}, {addr(0x3000), 2}};
  VecSplit s = vector_split(100, ops, 3);
  EXPECT_EQ(s.head, 0);
  EXPECT_EQ(s.groups, 12);          // 96 elements as 12 groups of 8
  EXPECT_EQ(s.tail_begin(), 96);    // 4-element scalar tail
  s = vector_split(7, ops, 3);      // shorter than a group: all scalar, as the tail
  EXPECT_EQ(s.head, 0);
  EXPECT_EQ(s.groups, 0);
  EXPECT_EQ(s.tail_begin(), 0);
}

TEST(VectorPath, SameMisalignmentPeelsAHead) {
  // bf16 views offset by 1 element (2 bytes): 7 scalar elements reach the next 16-byte boundary.
  const VecOperand ops[2] = {{addr(0x1002), 2}, {addr(0x5002), 2}};
  VecSplit s = vector_split(64, ops, 2);
  EXPECT_EQ(s.head, 7);
  EXPECT_EQ(s.groups, (64 - 7) / 8);
  EXPECT_EQ(s.tail_begin(), 7 + 7 * 8);
  // fp32 offset by one element: head 3.
  const VecOperand f[2] = {{addr(0x1004), 4}, {addr(0x2004), 4}};
  EXPECT_EQ(vector_split(64, f, 2).head, 3);
  // n smaller than the head: everything scalar.
  VecSplit tiny = vector_split(5, ops, 2);
  EXPECT_EQ(tiny.head, 5);
  EXPECT_EQ(tiny.groups, 0);
}

TEST(VectorPath, DifferentMisalignmentsRunScalar) {
  const VecOperand ops[2] = {{addr(0x1000), 2}, {addr(0x2002), 2}};  // aligned and off by one
  VecSplit s = vector_split(1000, ops, 2);
  EXPECT_EQ(s.head, 1000);
  EXPECT_EQ(s.groups, 0);
  // Mixed element sizes (a cast fp32 -> bf16): fp32 at +4 B and bf16 at +10 B both align at h = 3.
  const VecOperand mixed[2] = {{addr(0x1004), 4}, {addr(0x200A), 2}};
  EXPECT_EQ(vector_split(1000, mixed, 2).head, 3);
  const VecOperand clash[2] = {{addr(0x1004), 4}, {addr(0x2002), 2}};  // h = 3 (mod 4) and 7 (mod 8)
  EXPECT_EQ(vector_split(1000, clash, 2).head, 7);
  const VecOperand never[2] = {{addr(0x1004), 4}, {addr(0x2004), 2}};  // 3 (mod 4) vs 6 (mod 8)
  EXPECT_EQ(vector_split(1000, never, 2).groups, 0);
}

TEST(VectorPath, NullOperandsAreIgnored) {
  const VecOperand ops[3] = {{addr(0x1000), 4}, {nullptr, 4}, {nullptr, 4}};
  EXPECT_EQ(vector_split(16, ops, 3).groups, 2);
}

TEST(VectorPath, LayerNormRowRule) {
  const void* ok[4] = {addr(0x1000), addr(0x2000), addr(0x3000), addr(0x4000)};
  EXPECT_EQ(layernorm_groups_per_lane(768, ok, 4, kLnFwdMaxGroupsPerLane), 3);   // 96 groups / 32 lanes
  EXPECT_EQ(layernorm_groups_per_lane(8, ok, 4, kLnFwdMaxGroupsPerLane), 1);
  EXPECT_EQ(layernorm_groups_per_lane(1600, ok, 4, kLnFwdMaxGroupsPerLane), 7);  // 200 groups
  EXPECT_EQ(layernorm_groups_per_lane(1600, ok, 4, kLnBwdMaxGroupsPerLane), 0);  // too wide: scalar
  EXPECT_EQ(layernorm_groups_per_lane(1024, ok, 4, kLnBwdMaxGroupsPerLane), 4);
  EXPECT_EQ(layernorm_groups_per_lane(2048, ok, 4, kLnFwdMaxGroupsPerLane), 8);
  EXPECT_EQ(layernorm_groups_per_lane(2056, ok, 4, kLnFwdMaxGroupsPerLane), 0);
  for (int64_t C : {1, 7, 13, 770}) EXPECT_EQ(layernorm_groups_per_lane(C, ok, 4, 8), 0) << C;  // C % 8 != 0
  const void* off[4] = {addr(0x1000), addr(0x2002), addr(0x3000), addr(0x4000)};          // one view off by 1
  EXPECT_EQ(layernorm_groups_per_lane(768, off, 4, kLnFwdMaxGroupsPerLane), 0);
}

TEST(AdamChunks, CoalesceMergesOnlyRunsContiguousInAllThreeSpaces) {
  // Stage-3-like: every space is the shard, chunks back to back -> one chunk.
  std::vector<AdamChunk> shard = {{0, 0, 0, 16}, {16, 16, 16, 8}, {24, 24, 24, 5}};
  auto one = coalesce_adam_chunks(shard);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].n, 29);
  // Stage-1-like: master contiguous, grads/params at flat offsets with gaps -> kept apart.
  std::vector<AdamChunk> s1 = {{0, 16, 16, 16}, {16, 64, 64, 8}};
  EXPECT_EQ(coalesce_adam_chunks(s1).size(), 2u);
  // Contiguous in p and g but not out: kept apart; empty chunks dropped.
  std::vector<AdamChunk> mix = {{0, 0, 0, 8}, {8, 8, 9, 8}, {16, 16, 17, 0}};
  auto m = coalesce_adam_chunks(mix);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].out, 9);
  EXPECT_TRUE(coalesce_adam_chunks({}).empty());
}

TEST(AdamChunks, LaunchesCoverEveryChunkOnce) {
  for (int64_t n : {0, 1, 47, 48, 49, 200}) {
    auto l = chunk_launches(n, 48);
    int64_t next = 0;
    for (const ChunkLaunch& c : l) {
      EXPECT_EQ(c.first, next);
      EXPECT_GE(c.count, 1);
      EXPECT_LE(c.count, 48);
      next += c.count;
    }
    EXPECT_EQ(next, n);
    EXPECT_EQ(static_cast<int64_t>(l.size()), (n + 47) / 48);
  }
}
