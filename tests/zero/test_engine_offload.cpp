// ZeRO-Offload on the CPU backend: the same engine with master weights, moments and the
// accumulated gradient shard (and, at stage 3, the parameter shard) in host memory: each bucket's
// reduced slice goes down on a copy stream during backward and is added into the host shard, the
// host optimizer reads it, and the parameters go up on the copy stream. On the CPU backend the host optimizer's
// arithmetic equals the device optimizer's, so every result must be BITWISE the non-offloaded one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>

#include "engine_harness.h"

using namespace zt;
using namespace zt::testing;

namespace {

void expect_bitwise(const RunResult& got, const RunResult& ref, const std::string& what) {
  ASSERT_EQ(got.params.size(), ref.params.size()) << what;
  for (size_t p = 0; p < ref.params.size(); ++p) {
    ASSERT_EQ(got.params[p].size(), ref.params[p].size()) << what;
    EXPECT_EQ(std::memcmp(got.params[p].data(), ref.params[p].data(), ref.params[p].size() * sizeof(float)), 0)
        << what << " parameter " << ref.names[p];
  }
  ASSERT_EQ(got.steps.size(), ref.steps.size()) << what;
  for (size_t k = 0; k < ref.steps.size(); ++k) {
    EXPECT_EQ(got.steps[k].loss, ref.steps[k].loss) << what << " step " << k + 1;
    EXPECT_EQ(got.steps[k].grad_norm, ref.steps[k].grad_norm) << what << " step " << k + 1;
    EXPECT_EQ(got.steps[k].skipped, ref.steps[k].skipped) << what << " step " << k + 1;
  }
}

int64_t measured(const RunResult& r, MemCategory c) {
  for (const MemoryLine& l : r.memory)
    if (l.category == c) return l.measured;
  return -1;
}

// Device master/moments are empty, and at stages 2-3 so is the device gradient accumulator (stage
// 1 keeps its unpartitioned backward buffer); every host category is what the plan predicts.
void expect_offload_memory(const RunResult& r, bool params_offloaded, const std::string& what) {
  const bool device_grads = r.plan.flow.stage == 1;
  for (const MemoryLine& l : r.memory) {
    const std::string cat = std::string(mem_category_name(l.category)) + " " + what;
    switch (l.category) {
      case MemCategory::Master: case MemCategory::OptimMoments:
        EXPECT_EQ(l.measured, 0) << cat;
        EXPECT_EQ(l.predicted, 0) << cat;
        break;
      case MemCategory::Grads:
        EXPECT_EQ(l.measured, l.predicted) << cat;
        EXPECT_EQ(l.measured > 0, device_grads) << cat;
        break;
      case MemCategory::HostMaster: case MemCategory::HostMoments: case MemCategory::HostStaging:
      case MemCategory::HostGrads:
        EXPECT_GT(l.measured, 0) << cat;
        EXPECT_EQ(l.measured, l.predicted) << cat;
        break;
      case MemCategory::Params: case MemCategory::HostParams: case MemCategory::Buckets:
        EXPECT_EQ(l.measured, l.predicted) << cat;
        break;
      default: break;
    }
  }
  EXPECT_EQ(measured(r, MemCategory::HostParams) > 0, params_offloaded) << what;
  EXPECT_EQ(measured(r, MemCategory::HostMaster), r.plan.shard_numel * 4) << what;  // fp32 master shard
  EXPECT_EQ(measured(r, MemCategory::HostGrads), r.plan.shard_numel * 4) << what;   // fp32 gradient shard
}

// One copy down and one host accumulation per bucket reduction: every micro-step at stages 2-3,
// the last one at stage 1.
void expect_grads_offloaded(const RunResult& r, int steps, int gas, const std::string& what) {
  const int64_t reductions = r.plan.flow.reduce_every_micro_step ? gas : 1;
  const int64_t per_step = static_cast<int64_t>(r.plan.buckets.size()) * reductions;
  EXPECT_EQ(r.offload.d2h_copies, per_step * steps) << what;
  EXPECT_EQ(r.offload.accumulations, r.offload.d2h_copies) << what;
  int64_t slice_bytes = 0;
  for (const PlanBucket& b : r.plan.buckets) slice_bytes += b.slice * static_cast<int64_t>(dtype_size(r.plan.reduced_dtype()));
  EXPECT_EQ(r.offload.d2h_bytes, slice_bytes * reductions * steps) << what;
}

RunSpec spec_for(int stage, DType compute, bool overlap, int64_t sub_group) {
  RunSpec s;
  s.model_json = tiny_gpt_json();
  s.opt = adamw_options(stage);
  s.opt.compute_dtype = compute;
  s.opt.overlap_comm = overlap;
  s.opt.reduce_bucket_size = 2000;
  s.opt.sub_group_size = sub_group;
  s.opt.param_persistence_threshold = 64;  // stage 3: the biases persist, the matrices are gathered
  s.steps = 4;
  return s;
}

// Stage 3 reuses released gather buffers: every non-persistent gather after a bucket's first
// one goes into a buffer released earlier (no allocation in the steady state).
void expect_gather_buffers_reused(const RunResult& r, int steps, const std::string& what) {
  int64_t persistent = 0, gathered = 0;
  for (const PlanBucket& b : r.plan.buckets) (b.persistent ? persistent : gathered) += 1;
  const int64_t non_persistent_gathers = r.gather.gathers - persistent * (steps + 1);
  ASSERT_GT(gathered, 0) << what;
  EXPECT_GT(r.gather.reused, 0) << what;
  EXPECT_GE(r.gather.reused, non_persistent_gathers - gathered) << what;
}

RunSpec offloaded(RunSpec s, bool params) {
  s.opt.offload.optimizer = true;
  s.opt.offload.buffer_count = 3;
  s.opt.offload.host_threads = 2;
  s.opt.offload.params = params;
  return s;
}

}  // namespace

// Stages 1-3 x fp32/bf16 x overlap x sub_group_size (1 element, odd, larger than any shard):
// bitwise the non-offloaded run; offload_param at stage 3 likewise.
TEST(EngineOffload, BitwiseEqualToDeviceOptimizer) {
  for (int stage = 1; stage <= 3; ++stage)
    for (DType ct : {DType::F32, DType::BF16})
      for (bool overlap : {false, true})
        for (int64_t sub : {int64_t(1), int64_t(77), int64_t(1) << 40}) {
          if (sub == 1 && (ct != DType::BF16 || overlap)) continue;  // 1-element chunks: one case is enough
          const std::string what = "stage " + std::to_string(stage) + " " + dtype_name(ct) + " overlap " +
                                   std::to_string(overlap) + " sub_group " + std::to_string(sub);
          RunSpec s = spec_for(stage, ct, overlap, sub);
          RunResult ref = run_engine(s, MPI_COMM_WORLD);
          for (bool params : {false, true}) {
            if (params && stage != 3) continue;
            RunResult got = run_engine(offloaded(s, params), MPI_COMM_WORLD);
            expect_bitwise(got, ref, what + (params ? " +offload_param" : ""));
            expect_offload_memory(got, params, what);
            expect_grads_offloaded(got, s.steps, 1, what);
            if (params) {
              EXPECT_GT(got.offload.param_stagings, 0) << what;
            }
            if (stage == 3) expect_gather_buffers_reused(got, s.steps, what);
          }
        }
}

// The gradient path at every precision and accumulation depth: stages 1-3 x fp32/bf16/fp16 x
// gradient_accumulation_steps 1 and 4 x overlap on/off, bitwise the non-offloaded run, with the
// device accumulator gone (stages 2-3) and the host shard predicted == measured.
TEST(EngineOffload, GradientsAccumulateOnTheHost) {
  for (int stage = 1; stage <= 3; ++stage)
    for (DType ct : {DType::F32, DType::BF16, DType::F16})
      for (int gas : {1, 4})
        for (bool overlap : {false, true}) {
          const std::string what = "stage " + std::to_string(stage) + " " + dtype_name(ct) + " gas " +
                                   std::to_string(gas) + " overlap " + std::to_string(overlap);
          RunSpec s = spec_for(stage, ct, overlap, 300);
          s.steps = 3;
          s.opt.gradient_accumulation_steps = gas;
          if (ct == DType::F16) {
            s.opt.check_overflow = true;
            s.opt.loss_scaler.flavor = LossScalerFlavor::Zero;
            s.opt.loss_scaler.initial_scale_power = 8;
          }
          RunResult ref = run_engine(s, MPI_COMM_WORLD);
          RunResult got = run_engine(offloaded(s, false), MPI_COMM_WORLD);
          expect_bitwise(got, ref, what);
          expect_offload_memory(got, false, what);
          expect_grads_offloaded(got, s.steps, gas, what);
        }
}

// bf16 master weights and bf16 optimizer states live on the host in bf16 (round-to-nearest-even
// on the host, as on the device); SGD with momentum offloads too.
TEST(EngineOffload, Bf16StatesAndSgd) {
  for (int stage : {1, 3}) {
    RunSpec s = spec_for(stage, DType::BF16, true, 300);
    s.opt.master_dtype = s.opt.moments_dtype = DType::BF16;
    RunResult ref = run_engine(s, MPI_COMM_WORLD);
    RunResult got = run_engine(offloaded(s, false), MPI_COMM_WORLD);
    expect_bitwise(got, ref, "bf16 states stage " + std::to_string(stage));
    EXPECT_EQ(measured(got, MemCategory::HostMaster), got.plan.shard_numel * 2);
    RunSpec sgd = spec_for(stage, DType::F32, false, 1 << 20);
    sgd.opt.optimizer.kind = OptimizerKind::SGD;
    sgd.opt.optimizer.lr = 0.05;
    sgd.opt.optimizer.momentum = 0.9;
    expect_bitwise(run_engine(offloaded(sgd, false), MPI_COMM_WORLD), run_engine(sgd, MPI_COMM_WORLD),
                   "sgd stage " + std::to_string(stage));
  }
}

// sub_group_size changes how many chunks go over the copy stream, never the numbers.
TEST(EngineOffload, SubGroupSizeChangesChunksNotNumbers) {
  RunSpec s = spec_for(2, DType::F32, true, int64_t(1) << 40);
  RunResult whole = run_engine(offloaded(s, false), MPI_COMM_WORLD);
  s.opt.sub_group_size = 100;
  RunResult small = run_engine(offloaded(s, false), MPI_COMM_WORLD);
  expect_bitwise(small, whole, "sub_group_size 100 vs 2^40");
  // Each step: one chunk per bucket (2^40) vs ceil(slice / 100) per bucket.
  int64_t per_step_whole = 0, per_step_small = 0;
  for (const PlanBucket& b : whole.plan.buckets) {
    per_step_whole += b.slice > 0 ? 1 : 0;
    per_step_small += (b.slice + 99) / 100;
  }
  EXPECT_EQ(whole.offload.chunks, per_step_whole * s.steps);
  EXPECT_EQ(small.offload.chunks, per_step_small * s.steps);
  EXPECT_GT(small.offload.chunks, whole.offload.chunks);
  EXPECT_EQ(small.offload.d2h_bytes, whole.offload.d2h_bytes);  // the same gradient bytes, cut finer
}

// fp16 with dynamic loss scaling and an overflow on one rank: the step is skipped on the host
// state too (no chunk is updated or copied on a skipped step), and the scale follows the scaler.
TEST(EngineOffload, Fp16OverflowSkipsHostUpdate) {
  RunSpec s = spec_for(2, DType::F16, false, int64_t(1) << 40);
  s.opt.check_overflow = true;
  s.opt.loss_scaler.flavor = LossScalerFlavor::Zero;
  s.opt.loss_scaler.initial_scale_power = 8;
  s.opt.loss_scaler.loss_scale_window = 2;
  s.inject_overflow_at_steps = {2};
  RunResult ref = run_engine(s, MPI_COMM_WORLD);
  RunResult got = run_engine(offloaded(s, false), MPI_COMM_WORLD);
  expect_bitwise(got, ref, "fp16 overflow");
  ASSERT_TRUE(got.steps[1].skipped);
  int64_t chunks_per_step = 0;
  for (const PlanBucket& b : got.plan.buckets) chunks_per_step += b.slice > 0 ? 1 : 0;
  EXPECT_EQ(got.offload.chunks, chunks_per_step * (s.steps - 1));  // the skipped step updated nothing
  for (const auto& w : got.params)
    for (float x : w) ASSERT_TRUE(std::isfinite(x));
}

// wall_clock_breakdown with offload: the copy lane reports how long the copy stream copied
// (copy_busy_ms > 0, timed on the stream) and how long compute waited on it; timing on changes
// no number.
TEST(EngineOffload, BreakdownReportsTheCopyLane) {
  RunSpec s = offloaded(spec_for(2, DType::F32, true, 500), false);
  RunResult plain = run_engine(s, MPI_COMM_WORLD);
  s.timing = TimingLevel::Breakdown;
  RunResult timed = run_engine(s, MPI_COMM_WORLD);
  expect_bitwise(timed, plain, "breakdown on vs off");
  for (const StepStats& st : timed.steps) {
    ASSERT_TRUE(st.breakdown.has_value());
    EXPECT_TRUE(st.breakdown->has_copy_lane);
    EXPECT_GT(st.breakdown->copy_busy_ms, 0.0) << "step " << st.step;
    EXPECT_GE(st.breakdown->copy_exposed_ms, 0.0) << "step " << st.step;
  }
}

// --trace with offload: the copy lane holds every copy of every step, in time order — each
// bucket's gradients down once per reduction, each optimizer chunk's parameters up once.
TEST(EngineOffload, TraceShowsGradientsDownAndParametersUp) {
  RunSpec s = offloaded(spec_for(2, DType::F32, true, 500), false);
  s.opt.gradient_accumulation_steps = 2;
  s.timing = TimingLevel::Trace;
  const RunResult r = run_engine(s, MPI_COMM_WORLD);
  ASSERT_EQ(r.timelines.size(), static_cast<size_t>(s.steps));
  const int64_t chunks_per_step = r.offload.chunks / s.steps;
  for (const StepTimeline& tl : r.timelines) {
    int64_t down = 0, up = 0, down_bytes = 0;
    double last_end = 0;
    for (const TimelineSlice& sl : tl.slices) {
      if (sl.lane != Lane::Copy) continue;
      EXPECT_GE(sl.begin_s, last_end) << "step " << tl.step << " " << sl.name;  // one copy stream
      EXPECT_GE(sl.end_s, sl.begin_s) << sl.name;
      last_end = sl.end_s;
      if (sl.op == "d2h") {
        ++down;
        down_bytes += static_cast<int64_t>(sl.bytes);
        EXPECT_EQ(sl.name.rfind("grads b", 0), 0u) << sl.name;
      } else {
        EXPECT_EQ(sl.op, "h2d") << sl.name;
        EXPECT_EQ(sl.name.rfind("params c", 0), 0u) << sl.name;
        ++up;
      }
    }
    EXPECT_EQ(down, static_cast<int64_t>(r.plan.buckets.size()) * 2) << "step " << tl.step;
    EXPECT_EQ(down_bytes * s.steps, r.offload.d2h_bytes) << "step " << tl.step;
    EXPECT_EQ(up, chunks_per_step) << "step " << tl.step;
  }
}
