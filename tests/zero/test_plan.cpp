#include <gtest/gtest.h>

#include "zerotrain/zero/engine_testing.h"
#include "zerotrain/zero/plan.h"
#include "zerotrain/zero/step_program.h"

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
  // Parameters start at multiples of A = 8; spans are padded to multiples of A·N = 24.
  EXPECT_EQ(plan.buckets[0].numel, 17);
  EXPECT_EQ(plan.buckets[0].span, 23);  // p0 [0,10), gap [10,16), p1 [16,23)
  EXPECT_EQ(plan.buckets[0].padded, 24);
  EXPECT_EQ(plan.buckets[0].slice, 8);
  EXPECT_EQ(plan.buckets[1].padded, 24);
  EXPECT_EQ(plan.buckets[3].padded, 120);
  EXPECT_EQ(plan.buckets[4].padded, 24);
  EXPECT_EQ(plan.numel, 126);
  EXPECT_EQ(plan.padded_numel, 24 + 24 + 24 + 120 + 24);
  EXPECT_EQ(plan.shard_numel * 3, plan.padded_numel);
  EXPECT_EQ(plan.params[1].flat_begin, 16);
  EXPECT_EQ(plan.params[2].flat_begin, 24);
  EXPECT_EQ(plan.buckets[2].shard_begin, 8 + 8);
  EXPECT_EQ(plan.unit_buckets[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(plan.owned_flat_begin(0, 2), 16);
}

TEST(ZeroPlan, TinyBucketGivesOneBucketPerParam) {
  auto ps = specs({{10, 0}, {7, 0}, {5, 1}});
  ZeroPlan plan = make_zero_plan(ps, 2, 4, 1, -1);
  ASSERT_EQ(plan.buckets.size(), 3u);
  for (auto& b : plan.buckets) EXPECT_EQ(b.params.size(), 1u);
}

TEST(ZeroPlan, RealShardRunsExcludePadding) {
  auto ps = specs({{10, 0}});
  ZeroPlan plan = make_zero_plan(ps, 1, 4, 100, -1);  // padded 32, slice 8: rank 1 owns [8,16) -> 2 real
  int64_t total = 0;
  for (int r = 0; r < 4; ++r)
    for (auto& run : plan.real_shard_runs(r)) total += run.second;
  EXPECT_EQ(total, 10);
  auto second = plan.real_shard_runs(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].second, 2);
  EXPECT_TRUE(plan.real_shard_runs(3).empty());  // all padding
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

namespace {
PlanOptions engine_opts(int stage, int world, int64_t bucket) {
  PlanOptions o;
  o.stage = stage;
  o.world = world;
  o.reduce_bucket_size = bucket;
  o.allgather_bucket_size = 1000;
  o.param_persistence_threshold = 4;
  o.prefetch_bucket_size = 40;
  o.max_live_parameters = 1000;
  o.max_reuse_distance = 0;
  return o;
}
}  // namespace

// Unit 0 and unit 2 share a (tied) parameter: its bucket opens at unit 2's backward and closes
// at unit 0's; the ring holds every bucket open at once plus one.
TEST(EnginePlan, BackwardSpansAndRingFollowTiedParameters) {
  auto ps = specs({{10, 0}, {20, 1}, {30, 2}});
  std::vector<std::vector<int>> units = {{0}, {1}, {2, 0}};
  ZeroPlan plan = make_engine_plan(ps, units, engine_opts(2, 2, 100));
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.bucket(0).opens_at, 2);
  EXPECT_EQ(plan.bucket(0).closes_at, 0);
  EXPECT_EQ(plan.opens_at[2], (std::vector<int>{0, 2}));
  EXPECT_EQ(plan.closes_at[0], (std::vector<int>{0}));
  // Buckets padded to multiples of A·N = 16: b0 16, b1 32, b2 32. Ring arena, first fit in
  // backward order: u2 opens b0 [0,16) and b2 [16,48); b2 is held one position past its close
  // (u2), so b1 (opened at u1, b0 still open) goes to [48,80). 80 elements, where a ring of
  // (max open + 1) slots of the largest bucket held 3 x 32 = 96.
  EXPECT_EQ(plan.ring_offset, (std::vector<int64_t>{0, 48, 16}));
  EXPECT_EQ(plan.ring_elems, 80);
  EXPECT_EQ(plan.ring_overlaps[0], (std::vector<int>{0}));
  EXPECT_EQ(plan.wire_slots, 0);
  EXPECT_TRUE(plan.ag_groups.size() == 1 && plan.ag_groups[0].count == 3);
  EXPECT_NE(plan.describe_timeline().find("bwd u2: open b0 b2; backward; close b2 -> reduce-scatter b2"),
            std::string::npos)
      << plan.describe_timeline();
}

TEST(EnginePlan, StageFlowLayouts) {
  for (int s = 0; s <= 3; ++s) {
    StageFlow f = stage_flow(s);
    EXPECT_EQ(f.optimizer == Layout::Shard, s >= 1);
    EXPECT_EQ(f.grads == Layout::Shard, s >= 2);
    EXPECT_EQ(f.params == Layout::Shard, s == 3);
    EXPECT_EQ(f.all_reduce_grads, s == 0);
  }
  auto ps = specs({{10, 0}, {7, 0}});
  // one bucket: p0 [0,10), p1 [16,23): span 23 -> padded 24, slice 8
  ZeroPlan plan = make_engine_plan(ps, {{0, 1}}, engine_opts(1, 3, 100));
  EXPECT_EQ(plan.updated(0, 2, Layout::Full).begin, 16);
  EXPECT_EQ(plan.updated(0, 2, Layout::Shard).begin, 0);
  EXPECT_EQ(plan.real_slice(0, 2, Layout::Full).count, 7);
  ZeroPlan s0 = make_engine_plan(ps, {{0, 1}}, engine_opts(0, 3, 100));
  EXPECT_EQ(s0.updated(0, 2, Layout::Full).count, 24);  // stage 0 updates the whole bucket
}

// Stage 3: needs per position, prefetch within the budget, release unless reused within the
// distance, persistent buckets never listed; every micro-step ends with nothing gathered.
TEST(EnginePlan, Stage3GatherSchedule) {
  auto ps = specs({{20, 0}, {2, 0}, {20, 1}, {20, 2}});
  std::vector<std::vector<int>> units = {{0, 1}, {2}, {3}};
  ZeroPlan plan = make_engine_plan(ps, units, engine_opts(3, 2, 100));
  // buckets: b0 = p0 (unit 0), b1 = p1 persistent (unit 0), b2 = p2, b3 = p3
  ASSERT_EQ(plan.buckets.size(), 4u);
  EXPECT_TRUE(plan.bucket(1).persistent);
  ASSERT_EQ(plan.gather_steps.size(), 6u);
  EXPECT_EQ(plan.gather_steps[0].gather, (std::vector<int>{0}));
  EXPECT_EQ(plan.gather_steps[0].need, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.gather_steps[0].prefetch, (std::vector<int>{2}));  // padded 32 <= 40; b3 would exceed it
  EXPECT_EQ(plan.gather_steps[1].gather, (std::vector<int>{}));
  EXPECT_EQ(plan.gather_steps[1].prefetch, (std::vector<int>{3}));
  // fwd u2 then bwd u2: reused at distance 0, which is not < stage3_max_reuse_distance 0
  EXPECT_EQ(plan.gather_steps[2].release, (std::vector<int>{3}));
  PlanOptions keep = engine_opts(3, 2, 100);
  keep.max_reuse_distance = 1;
  EXPECT_EQ(make_engine_plan(ps, units, keep).gather_steps[2].release, (std::vector<int>{}));
  EXPECT_EQ(plan.gather_steps[2].current, 32);  // b3's 20 elements padded to A·N = 16
  int64_t gathered = 0, released = 0;
  for (const GatherStep& g : plan.gather_steps) {
    gathered += static_cast<int64_t>(g.gather.size() + g.prefetch.size());
    released += static_cast<int64_t>(g.release.size());
  }
  EXPECT_EQ(gathered, released);
  EXPECT_NE(plan.hash(), make_engine_plan(ps, units, engine_opts(2, 2, 100)).hash());
}

// The alignment invariant (plan.h): odd parameter sizes, world sizes 1..8, every stage and a
// persistent bucket. Every parameter, bucket and slice boundary is a multiple of A in both
// layouts; parameters do not overlap and lie inside their bucket's span; the slices tile every
// bucket; real_slice covers exactly the spans; membership follows real element counts.
TEST(EnginePlan, EveryOffsetIsAlignedForOddSizesAndWorlds) {
  const int64_t A = kFlatAlignElems;
  auto ps = specs({{7, 0}, {13, 0}, {1, 0}, {64, 1}, {3, 1}, {1, 1}, {129, 2}, {8, 2}, {9, 2}});
  std::vector<std::vector<int>> units = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  for (int world = 1; world <= 8; ++world) {
    for (int stage = 0; stage <= 3; ++stage) {
      for (int64_t bucket : {int64_t(1), int64_t(20), int64_t(1000)}) {
        const std::string what = "N=" + std::to_string(world) + " stage " + std::to_string(stage) +
                                 " bucket " + std::to_string(bucket);
        PlanOptions o = engine_opts(stage, world, bucket);
        o.param_persistence_threshold = stage == 3 ? 4 : -1;
        const ZeroPlan plan = make_engine_plan(ps, units, o);
        int64_t flat = 0, shard = 0, numel = 0, spans = 0;
        for (const PlanBucket& b : plan.buckets) {
          EXPECT_EQ(b.flat_begin, flat) << what;
          EXPECT_EQ(b.shard_begin, shard) << what;
          EXPECT_EQ(b.flat_begin % A, 0) << what;
          EXPECT_EQ(b.padded % (A * world), 0) << what;
          EXPECT_EQ(b.slice * world, b.padded) << what;
          EXPECT_EQ(b.slice % A, 0) << what;
          EXPECT_GE(b.span, b.numel) << what;
          EXPECT_GE(b.padded, b.span) << what;
          EXPECT_LT(b.padded - b.span, A * world) << what;  // no more tail than the rounding needs
          int64_t end = b.flat_begin, real = 0;
          for (int p : b.params) {
            const PlanParam& pp = plan.param(p);
            EXPECT_EQ(pp.bucket, b.id) << what;
            EXPECT_EQ(pp.flat_begin % A, 0) << what << " param " << p;
            EXPECT_GE(pp.flat_begin, end) << what;           // no overlap, layout order
            EXPECT_LT(pp.flat_begin - end, A) << what;       // the gap is the alignment only
            EXPECT_EQ(plan.param_in_bucket(p).begin % A, 0) << what;
            end = pp.flat_begin + pp.numel;
            real += pp.numel;
          }
          EXPECT_EQ(end - b.flat_begin, b.span) << what;
          EXPECT_EQ(real, b.numel) << what;
          if (bucket == 1 && !b.persistent) {  // membership counts real elements only
            EXPECT_EQ(b.params.size(), 1u) << what;
          }
          int64_t covered = 0;
          for (int r = 0; r < world; ++r) {
            const ElemRange f = plan.slice(b.id, r, Layout::Full), s = plan.slice(b.id, r, Layout::Shard);
            EXPECT_EQ(f.begin % A, 0) << what;
            EXPECT_EQ(s.begin % A, 0) << what;
            EXPECT_EQ(f.begin, b.flat_begin + r * b.slice) << what;
            covered += plan.real_slice(b.id, r, Layout::Full).count;
          }
          EXPECT_EQ(covered, b.span) << what;
          if (!plan.ring_offset.empty()) {
            EXPECT_EQ(plan.ring_offset[static_cast<size_t>(b.id)] % A, 0) << what;
          }
          flat += b.padded;
          shard += b.slice;
          numel += b.numel;
          spans += b.span;
        }
        EXPECT_EQ(plan.numel, 7 + 13 + 1 + 64 + 3 + 1 + 129 + 8 + 9) << what;
        EXPECT_EQ(numel, plan.numel) << what;
        EXPECT_EQ(plan.padded_numel, flat) << what;
        EXPECT_EQ(plan.shard_numel * world, plan.padded_numel) << what;
        EXPECT_EQ(plan.shard_numel % A, 0) << what;
        int64_t runs = 0;
        for (int r = 0; r < world; ++r)
          for (const auto& run : plan.real_shard_runs(r)) {
            EXPECT_GE(run.first, 0) << what;
            EXPECT_LE(run.first + run.second, plan.shard_numel) << what;
            runs += run.second;
          }
        EXPECT_EQ(runs, spans) << what;
      }
    }
  }
}

// A parameter after one of 7 elements starts at 8; the gap is padding, not parameter elements.
TEST(ZeroPlan, GapAfterOddParameterIsPadding) {
  auto ps = specs({{7, 0}, {13, 0}, {1, 0}});
  ZeroPlan plan = make_zero_plan(ps, 1, 1, 100, -1);
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_EQ(plan.params[0].flat_begin, 0);
  EXPECT_EQ(plan.params[1].flat_begin, 8);
  EXPECT_EQ(plan.params[2].flat_begin, 24);
  EXPECT_EQ(plan.buckets[0].numel, 21);
  EXPECT_EQ(plan.buckets[0].span, 25);
  EXPECT_EQ(plan.buckets[0].padded, 32);
  EXPECT_NE(plan.describe().find("21"), std::string::npos);
  // 7 + 13 = 20 real elements fit a 20-element bucket although the span is 21.
  ZeroPlan cut = make_zero_plan(ps, 1, 1, 20, -1);
  ASSERT_EQ(cut.buckets.size(), 2u);
  EXPECT_EQ(cut.buckets[0].params, (std::vector<int>{0, 1}));
  EXPECT_EQ(cut.buckets[1].flat_begin, 24);  // span 21 -> padded 24 (A·N = 8)
}

// The AdamW step's chunk list (optimizer_adam_chunks -> ops::adam_step_multi): it covers exactly
// each bucket's updated range, every chunk starts on a multiple of A in all three buffers (so
// the CUDA kernel's vector path applies to every chunk of an aligned buffer), and coalescing
// gives one launch chunk where every buffer is in one layout (stage 0: Full; stage 3: Shard).
TEST(EnginePlan, AdamChunksCoverTheUpdatedRangesAligned) {
  const int64_t A = kFlatAlignElems;
  auto ps = specs({{7, 0}, {13, 0}, {64, 1}, {129, 2}, {9, 2}});
  std::vector<std::vector<int>> units = {{0, 1}, {2}, {3, 4}};
  for (int world = 1; world <= 4; ++world) {
    for (int stage = 0; stage <= 3; ++stage) {
      PlanOptions o = engine_opts(stage, world, 100);
      o.param_persistence_threshold = -1;
      const ZeroPlan plan = make_engine_plan(ps, units, o);
      for (int rank = 0; rank < world; ++rank) {
        const std::string what = "N=" + std::to_string(world) + " stage " + std::to_string(stage) + " rank " +
                                 std::to_string(rank);
        const std::vector<AdamChunk> chunks = optimizer_adam_chunks(plan, rank, 1 << 20);
        ASSERT_EQ(chunks.size(), plan.buckets.size()) << what;  // one per bucket at this sub_group_size
        int64_t total = 0;
        for (size_t b = 0; b < chunks.size(); ++b) {
          const AdamChunk& c = chunks[b];
          EXPECT_EQ(c.p, plan.updated(static_cast<int>(b), rank, plan.flow.optimizer).begin) << what;
          EXPECT_EQ(c.g, plan.updated(static_cast<int>(b), rank, plan.flow.grads).begin) << what;
          EXPECT_EQ(c.out, plan.updated(static_cast<int>(b), rank, plan.flow.params).begin) << what;
          EXPECT_EQ(c.p % A, 0) << what;
          EXPECT_EQ(c.g % A, 0) << what;
          EXPECT_EQ(c.out % A, 0) << what;
          total += c.n;
        }
        EXPECT_EQ(total, plan.numel_in(plan.flow.optimizer)) << what;
        const size_t merged = coalesce_adam_chunks(chunks).size();
        if (stage == 0 || stage == 3 || world == 1) {
          EXPECT_EQ(merged, 1u) << what;
        } else {
          EXPECT_EQ(merged, plan.buckets.size()) << what;  // grads (stage 1) or params (1-2) are Full
        }
      }
      // sub_group_size cuts each bucket's range into pieces that coalesce back.
      const std::vector<AdamChunk> small = optimizer_adam_chunks(plan, 0, 5);
      EXPECT_GT(small.size(), plan.buckets.size());
      EXPECT_EQ(coalesce_adam_chunks(small).size(), coalesce_adam_chunks(optimizer_adam_chunks(plan, 0, 1 << 20)).size());
    }
  }
}

// The schedule vocabulary: positions, the reduce rule, labels, the step statistics layout.
TEST(EnginePlan, ScheduleVocabulary) {
  auto ps = specs({{10, 0}, {20, 1}, {30, 2}});
  ZeroPlan plan = make_engine_plan(ps, {{0}, {1}, {2}}, engine_opts(2, 2, 100));
  ASSERT_EQ(plan.num_units(), 3);
  EXPECT_EQ(plan.position_of(0, false), 0);
  EXPECT_EQ(plan.position_of(2, true), 3);  // the first backward
  EXPECT_EQ(plan.position_of(0, true), 5);
  for (int pos = 0; pos < 6; ++pos) EXPECT_EQ(plan.position_of(plan.unit_of(pos), pos >= 3), pos);
  EXPECT_TRUE(reduces_now(stage_flow(2), false));
  EXPECT_FALSE(reduces_now(stage_flow(1), false));
  EXPECT_TRUE(reduces_now(stage_flow(0), true));
  using K = CollectiveLabel::Kind;
  EXPECT_EQ((CollectiveLabel{K::Grads, 4}.to_string()), "b4");
  EXPECT_EQ((CollectiveLabel{K::Gather, 4}.to_string()), "gather b4");
  EXPECT_EQ((CollectiveLabel{K::GroupGather, 4, 1}.to_string()), "ag1.b4");
  EXPECT_EQ((CollectiveLabel{K::StepStats}.to_string()), "step stats");
  EXPECT_EQ((CollectiveLabel{K::LambNorms}.to_string()), "lamb norms");
  EXPECT_EQ(plan.step_stats().slots, static_cast<int64_t>(plan.buckets.size()) + 1);
  EXPECT_EQ(plan.step_stats().loss_slot(), static_cast<int64_t>(plan.buckets.size()));
  EXPECT_EQ(plan.step_stats().words(), 2 * plan.step_stats().slots);
  EXPECT_EQ(intersect({0, 10}, {5, 10}).begin, 5);
  EXPECT_EQ(intersect({0, 10}, {5, 10}).count, 5);
  EXPECT_EQ(intersect({0, 10}, {10, 5}).count, 0);
}

// Micro-step kinds: one for gas 1 (first and last), first + last for 2, first + middle + last
// beyond; only the last reduces at stages 0-1, and only the first waits for all-gather groups.
TEST(EnginePlan, StepProgramKinds) {
  auto ps = specs({{10, 0}, {20, 1}, {30, 2}});
  const ZeroPlan plan = make_engine_plan(ps, {{0}, {1}, {2}}, engine_opts(1, 2, 100));
  auto count = [](const MicroStep& m, OpKind k) {
    int n = 0;
    for (const StepOp& op : m.ops) n += op.kind == k ? 1 : 0;
    return n;
  };
  EXPECT_EQ(step_program(plan, 1).kinds.size(), 1u);
  EXPECT_EQ(step_program(plan, 2).kinds.size(), 2u);
  const StepProgram p = step_program(plan, 5);
  ASSERT_EQ(p.kinds.size(), 3u);
  EXPECT_EQ(&p.micro(0), &p.kinds[0]);
  EXPECT_EQ(&p.micro(3), &p.kinds[1]);
  EXPECT_EQ(&p.micro(4), &p.kinds[2]);
  EXPECT_EQ(count(p.kinds[0], OpKind::Reduce), 0);
  EXPECT_EQ(count(p.kinds[0], OpKind::Close), static_cast<int>(plan.buckets.size()));
  EXPECT_EQ(count(p.kinds[2], OpKind::Reduce), static_cast<int>(plan.buckets.size()));
  EXPECT_EQ(count(p.kinds[0], OpKind::Wait), 1);  // one all-gather group, waited before its first use
  EXPECT_EQ(count(p.kinds[1], OpKind::Wait), 0);
  const std::string text = describe_program(p);
  EXPECT_NE(text.find("micro-steps 1..3 (middle, each):"), std::string::npos) << text;
  EXPECT_NE(text.find("micro-step 4 (last):"), std::string::npos) << text;
  EXPECT_NE(text.find("    bwd u2: open b2; backward u2; close b2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    all-gather group 0 *\n"), std::string::npos) << text;
}
