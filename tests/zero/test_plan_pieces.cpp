// ZeroPlan::pieces: every parameter ∩ each rank's slice (Owned) or updated range (Updated), with
// its place in both layouts, against element-by-element ownership computed from the buckets'
// fields; and the ownership table prints exactly those pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zerotrain/zero/plan.h"

using namespace zt;

namespace {

std::vector<ParamSpec> specs(const std::vector<int64_t>& numels, const std::vector<int>& unit_of) {
  std::vector<ParamSpec> out;
  for (size_t i = 0; i < numels.size(); ++i) {
    ParamSpec p;
    p.name = "p" + std::to_string(i);
    p.numel = numels[i];
    p.shape = {p.numel};
    p.unit = unit_of[i];
    out.push_back(p);
  }
  return out;
}

PlanOptions options(int stage, int world, int64_t bucket) {
  PlanOptions o;  // the schedule's budgets do not move the layout
  o.stage = stage;
  o.world = world;
  o.reduce_bucket_size = o.allgather_bucket_size = bucket;
  o.param_persistence_threshold = stage == 3 ? 4 : -1;
  return o;
}

struct Case {
  ZeroPlan plan;
  std::string what;
};

std::vector<Case> cases() {
  const auto ps = specs({7, 13, 1, 64, 3, 1, 129, 8, 9}, {0, 0, 0, 1, 1, 1, 2, 2, 2});
  const std::vector<std::vector<int>> units = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  std::vector<Case> out;
  for (int world : {1, 2, 3, 5, 8})
    for (int stage = 0; stage <= 3; ++stage)
      for (int64_t bucket : {int64_t(1), int64_t(20), int64_t(1000)})
        out.push_back({make_engine_plan(ps, units, options(stage, world, bucket)),
                       "N=" + std::to_string(world) + " stage " + std::to_string(stage) + " bucket " +
                           std::to_string(bucket)});
  return out;
}

}  // namespace

TEST(PlanPieces, OwnedPiecesPartitionEveryParameterByTheRanksSlices) {
  for (const Case& c : cases()) {
    const ZeroPlan& plan = c.plan;
    std::vector<std::vector<int>> owner(plan.params.size());  // per parameter element: the owning rank
    for (const PlanParam& p : plan.params) owner[p.index].assign(static_cast<size_t>(p.numel), -1);
    for (int r = 0; r < plan.world; ++r) {
      int last_bucket = -1;
      for (const PlanPiece& pc : plan.pieces(r)) {
        const PlanParam& p = plan.param(pc.param);
        ASSERT_EQ(pc.bucket, p.bucket) << c.what;
        EXPECT_GE(pc.bucket, last_bucket) << c.what << ": bucket order";
        last_bucket = pc.bucket;
        ASSERT_GT(pc.count, 0) << c.what;
        EXPECT_EQ(pc.flat, p.flat_begin + pc.begin) << c.what;
        const ElemRange full = plan.slice(pc.bucket, r, Layout::Full);
        EXPECT_GE(pc.flat, full.begin) << c.what;
        EXPECT_LE(pc.flat + pc.count, full.end()) << c.what;
        EXPECT_EQ(pc.at(Layout::Full).begin, pc.flat) << c.what;
        EXPECT_EQ(pc.at(Layout::Full).count, pc.count) << c.what;
        // The shard place is what the engine's buffers of that layout use (updated()).
        const ElemRange upd = plan.updated(pc.bucket, r, Layout::Full);
        EXPECT_EQ(pc.at(Layout::Shard).begin, plan.updated(pc.bucket, r, Layout::Shard).begin + (pc.flat - upd.begin))
            << c.what;
        if (plan.flow.stage >= 1) {
          const ElemRange sh = plan.slice(pc.bucket, r, Layout::Shard);
          EXPECT_GE(pc.shard, sh.begin) << c.what;
          EXPECT_LE(pc.shard + pc.count, sh.end()) << c.what;
        }
        for (int64_t i = pc.begin; i < pc.begin + pc.count; ++i) {
          EXPECT_EQ(owner[pc.param][i], -1) << c.what << ": element " << i << " of p" << pc.param << " owned twice";
          owner[pc.param][i] = r;
        }
      }
    }
    for (const PlanParam& p : plan.params) {
      const PlanBucket& b = plan.bucket(p.bucket);
      for (int64_t i = 0; i < p.numel; ++i)  // rank r owns [r·slice, (r+1)·slice) of the bucket
        EXPECT_EQ(owner[p.index][i], (p.flat_begin + i - b.flat_begin) / b.slice) << c.what << " p" << p.index;
    }
  }
}

TEST(PlanPieces, UpdatedPiecesAreWholeParametersAtStage0AndTheOwnedOnesOtherwise) {
  for (const Case& c : cases()) {
    const ZeroPlan& plan = c.plan;
    for (int r = 0; r < plan.world; ++r) {
      const std::vector<PlanPiece> owned = plan.pieces(r, PieceScope::Owned);
      const std::vector<PlanPiece> updated = plan.pieces(r, PieceScope::Updated);
      if (plan.flow.stage == 0) {
        ASSERT_EQ(updated.size(), plan.params.size()) << c.what;
        for (const PlanPiece& pc : updated) {
          EXPECT_EQ(pc.begin, 0) << c.what;
          EXPECT_EQ(pc.count, plan.param(pc.param).numel) << c.what;
          EXPECT_EQ(pc.shard, pc.flat) << c.what << ": nothing is sharded at stage 0";
        }
        continue;
      }
      ASSERT_EQ(updated.size(), owned.size()) << c.what;
      for (size_t i = 0; i < owned.size(); ++i) {
        EXPECT_EQ(updated[i].param, owned[i].param) << c.what;
        EXPECT_EQ(updated[i].begin, owned[i].begin) << c.what;
        EXPECT_EQ(updated[i].count, owned[i].count) << c.what;
        EXPECT_EQ(updated[i].flat, owned[i].flat) << c.what;
        EXPECT_EQ(updated[i].shard, owned[i].shard) << c.what;
      }
    }
  }
}

TEST(PlanPieces, OwnershipTablePrintsThePieces) {
  const auto ps = specs({10, 7, 20}, {0, 0, 1});
  const ZeroPlan plan = make_engine_plan(ps, {{0, 1}, {2}}, options(2, 3, 100));
  const std::string table = plan.describe_ownership({"wte", "wpe", "ln"});
  for (const PlanParam& p : plan.params) {
    std::string expected;
    for (int r = 0; r < plan.world; ++r)
      for (const PlanPiece& pc : plan.pieces(r))
        if (pc.param == p.index)
          expected += (expected.empty() ? " r" : ", r") + std::to_string(r) + " [" + std::to_string(pc.begin) + ", " +
                      std::to_string(pc.begin + pc.count) + ")";
    ASSERT_FALSE(expected.empty());
    EXPECT_NE(table.find(" elements):" + expected + "\n"), std::string::npos) << table << "\nmissing:" << expected;
  }
  // Bucket 0 holds p0 [0, 10) and p1 at [16, 23): padded 24, slices of 8.
  EXPECT_NE(table.find("param 0 wte (b0, 10 elements): r0 [0, 8), r1 [8, 10)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("param 1 wpe (b0, 7 elements): r2 [0, 7)\n"), std::string::npos) << table;
}
