// ZeRO-Offload's gradient path on a GPU: each bucket's reduced slice goes down on the copy stream
// into pinned staging while backward goes on, a host lane adds it into the host fp32 shard, and
// the ring region it came from is reused only after its copy (the copy stream's event order).
// The same tiny GPT (world size 1 over NCCL, gradient accumulation 2, 2000-element buckets so the
// ring regions are reused many times a step) with the device optimizer and with offload_optimizer
// at stages 1-3: losses within 1e-3 relative (the CPU AdamW has no FMA contraction, the CUDA one
// does), gradient norms within 1e-5 relative (the host sums in another order), no device `grads`
// at stages 2-3, host_grads measured == predicted, one copy and one host addition per bucket
// reduction, and the copy lane busy during the step. Skips without a GPU.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/zero/engine.h"
#include "gpu_engine_util.h"

using namespace zt;

namespace {


constexpr int64_t kMicro = 4, kCtx = 32;
constexpr int kGas = 2, kSteps = 4;

struct Result {
  std::vector<StepStats> steps;
  std::vector<MemoryLine> memory;
  OffloadStats offload;
  ZeroPlan plan;
};

EngineOptions options(int stage, bool offload) {
  EngineOptions o = gputest::engine_options(stage, kGas, 2000);
  o.compute_dtype = o.wire_dtype = DType::BF16;
  o.offload.optimizer = offload;
  o.offload.pin_memory = true;
  return o;
}

Result train(const EngineOptions& opt) {
  gputest::TinyGptRun run(opt, ModelOptions{}, 4, 64, kCtx, kMicro);
  ZeroEngine engine(*run.model, *run.dev, *run.compute, *run.comm, opt,
                    make_lr_schedule(LrScheduleSpec{}, opt.optimizer.lr, opt.optimizer.has_betas()));
  engine.init_parameters(11);
  engine.set_timing(TimingLevel::Breakdown);
  Result r;
  Batch batch;
  for (int k = 0; k < kSteps; ++k) {
    for (int j = 0; j < kGas; ++j) {
      run.data->fill(k, sample_range(0, 1, j, kGas, kMicro), kMicro, batch);
      engine.micro_step(batch);
    }
    r.steps.push_back(engine.step());
  }
  r.memory = engine.memory_lines();
  r.offload = engine.offload_stats();
  r.plan = engine.plan();
  return r;
}

const MemoryLine& line(const Result& r, MemCategory c) { return gputest::memory_line(r.memory, c); }

}  // namespace

TEST(GpuGradOffload, HostShardMatchesTheDeviceAccumulator) {
  ZT_NEED_GPU();
  for (int stage = 1; stage <= 3; ++stage) {
    const std::string what = "stage " + std::to_string(stage);
    const Result ref = train(options(stage, false)), got = train(options(stage, true));
    ASSERT_EQ(ref.steps.size(), got.steps.size()) << what;
    double busy = 0, exposed = 0;
    for (size_t k = 0; k < ref.steps.size(); ++k) {
      EXPECT_NEAR(got.steps[k].loss, ref.steps[k].loss, 1e-3 * std::fabs(ref.steps[k].loss)) << what << " step " << k + 1;
      EXPECT_NEAR(got.steps[k].grad_norm, ref.steps[k].grad_norm, 1e-5 * ref.steps[k].grad_norm) << what << " step " << k + 1;
      ASSERT_TRUE(got.steps[k].breakdown.has_value()) << what;
      EXPECT_GT(got.steps[k].breakdown->copy_busy_ms, 0.0) << what << " step " << k + 1;
      busy += got.steps[k].breakdown->copy_busy_ms;
      exposed += got.steps[k].breakdown->copy_exposed_ms;
    }
    const int64_t reductions = stage == 1 ? 1 : kGas;
    const int64_t expected = static_cast<int64_t>(got.plan.buckets.size()) * reductions * kSteps;
    EXPECT_EQ(got.offload.d2h_copies, expected) << what;
    EXPECT_EQ(got.offload.accumulations, expected) << what;
    EXPECT_EQ(line(got, MemCategory::Grads).measured > 0, stage == 1) << what;
    EXPECT_EQ(line(got, MemCategory::Grads).measured, line(got, MemCategory::Grads).predicted) << what;
    EXPECT_GT(line(got, MemCategory::HostGrads).measured, 0) << what;
    EXPECT_EQ(line(got, MemCategory::HostGrads).measured, line(got, MemCategory::HostGrads).predicted) << what;
    std::printf("%s: losses %.6f -> %.6f; copy lane busy %.3f ms, exposed %.3f ms over %d steps; %lld slices down\n",
                what.c_str(), got.steps.front().loss, got.steps.back().loss, busy, exposed, kSteps,
                static_cast<long long>(got.offload.d2h_copies));
  }
}
