#include <gtest/gtest.h>

#include "zerotrain/zero/plan.h"

using namespace zt;

namespace {
std::vector<ParamSpec> specs(std::vector<std::pair<int64_t, int>> numel_unit) {
  std::vector<ParamSpec> out;
  for (size_t i = 0; i < numel_unit.size(); ++i) {
    ParamSpec p;
    p.name = "p" + std::to_string(i);
    p.numel = numel_unit[i].first;
    p.shape = {p.numel};
    p.unit = numel_unit[i].second;
    out.push_back(p);
  }
  return out;
}
}  // namespace

TEST(ZeroPlan, BucketsRespectUnitsSizeAndPadding) {
  auto ps = specs({{10, 0}, {7, 0}, {5, 0}, {3, 1}, {100, 1}, {1, 2}});
  ZeroPlan plan = make_zero_plan(ps, 3, 3, 20, -1);
  // unit 0: [10,7] (17) then [5]; unit 1: [3] then [100] (3+100 > 20); unit 2: [1]
  ASSERT_EQ(plan.buckets.size(), 5u);
  EXPECT_EQ(plan.buckets[0].params, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.buckets[1].params, (std::vector<int>{2}));
  EXPECT_EQ(plan.buckets[3].params, (std::vector<int>{4}));
  EXPECT_EQ(plan.buckets[0].padded, 18);
  EXPECT_EQ(plan.buckets[0].slice, 6);
  EXPECT_EQ(plan.buckets[1].padded, 6);
  EXPECT_EQ(plan.buckets[3].padded, 102);
  EXPECT_EQ(plan.buckets[4].padded, 3);
  EXPECT_EQ(plan.numel, 126);
  EXPECT_EQ(plan.padded_numel, 18 + 6 + 3 + 102 + 3);
  EXPECT_EQ(plan.shard_numel * 3, plan.padded_numel);
  EXPECT_EQ(plan.params[1].flat_begin, 10);
  EXPECT_EQ(plan.params[2].flat_begin, 18);
  EXPECT_EQ(plan.buckets[2].shard_begin, 6 + 2);
  EXPECT_EQ(plan.unit_buckets[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(plan.owned_flat_begin(0, 2), 12);
}

TEST(ZeroPlan, TinyBucketGivesOneBucketPerParam) {
  auto ps = specs({{10, 0}, {7, 0}, {5, 1}});
  ZeroPlan plan = make_zero_plan(ps, 2, 4, 1, -1);
  ASSERT_EQ(plan.buckets.size(), 3u);
  for (auto& b : plan.buckets) EXPECT_EQ(b.params.size(), 1u);
}

TEST(ZeroPlan, RealShardRunsExcludePadding) {
  auto ps = specs({{10, 0}});
  ZeroPlan plan = make_zero_plan(ps, 1, 4, 100, -1);  // padded 12, slice 3: rank 3 owns [9,12) -> 1 real
  int64_t total = 0;
  for (int r = 0; r < 4; ++r)
    for (auto& run : plan.real_shard_runs(r)) total += run.second;
  EXPECT_EQ(total, 10);
  auto last = plan.real_shard_runs(3);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].second, 1);
}

TEST(ZeroPlan, PersistentParamsGetTheirOwnBucket) {
  auto ps = specs({{4, 0}, {1000, 0}, {8, 0}, {500, 0}});
  ZeroPlan plan = make_zero_plan(ps, 1, 2, 5000, 10);
  ASSERT_EQ(plan.buckets.size(), 2u);
  EXPECT_FALSE(plan.buckets[0].persistent);
  EXPECT_EQ(plan.buckets[0].params, (std::vector<int>{1, 3}));
  EXPECT_TRUE(plan.buckets[1].persistent);
  EXPECT_EQ(plan.buckets[1].params, (std::vector<int>{0, 2}));
}

TEST(ZeroPlan, HashDependsOnLayoutAndWorld) {
  auto ps = specs({{10, 0}, {7, 1}});
  uint64_t a = make_zero_plan(ps, 2, 2, 100, -1).hash();
  EXPECT_EQ(a, make_zero_plan(ps, 2, 2, 100, -1).hash());
  EXPECT_NE(a, make_zero_plan(ps, 2, 3, 100, -1).hash());
  EXPECT_NE(a, make_zero_plan(ps, 2, 2, 5, -1).hash());
  EXPECT_FALSE(make_zero_plan(ps, 2, 2, 100, -1).describe().empty());
}
