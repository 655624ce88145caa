// activation_checkpointing.cpu_checkpointing on a GPU: the kept block inputs go to pinned host
// memory on the model's copy stream and come back one block ahead of their backward. The same
// tiny GPT trained with recompute alone and with cpu_checkpointing (world size 1, NCCL, gradient
// accumulation 2) gives bitwise equal losses, gradient norms and parameters at stages 0 and 3,
// fp32 block recompute and bf16 selective recompute; host_activations is measured == predicted
// and device activations drop by the inputs that left; --cuda-graph is refused with the reason.
// Skips without a GPU.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
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


constexpr int64_t kLayers = 4, kEmbd = 64, kCtx = 32, kMicro = 4;

struct Result {
  std::vector<double> losses, grad_norms;
  std::vector<std::vector<float>> params;
  std::vector<MemoryLine> memory;
  double ms_per_step = 0;
};

EngineOptions options(int stage, DType compute) {
  EngineOptions o = gputest::engine_options(stage, 2, 20000);
  o.compute_dtype = o.wire_dtype = compute;
  return o;
}

Result train(const EngineOptions& opt, Recompute rc, bool cpu_ckpt, int steps, bool graphs = false) {
  ModelOptions mopt;
  mopt.recompute = rc;
  mopt.cpu_checkpointing = cpu_ckpt;
  gputest::TinyGptRun run(opt, mopt, kLayers, kEmbd, kCtx, kMicro);
  Result r;
  ZeroEngine engine(*run.model, *run.dev, *run.compute, *run.comm, opt,
                    make_lr_schedule(LrScheduleSpec{}, opt.optimizer.lr, opt.optimizer.has_betas()));
  engine.init_parameters(11);
  if (graphs) engine.enable_cuda_graphs(1, nullptr);  // throws for cpu_checkpointing
  Batch batch;
  const int gas = opt.gradient_accumulation_steps;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < steps; ++k) {
    for (int j = 0; j < gas; ++j) {
      run.data->fill(k, sample_range(0, 1, j, gas, kMicro), kMicro, batch);
      engine.micro_step(batch);
    }
    const StepStats st = engine.step();
    r.losses.push_back(st.loss);
    r.grad_norms.push_back(st.grad_norm);
  }
  r.ms_per_step = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
  r.memory = engine.memory_lines();
  r.params = engine.gather_parameters(0);
  return r;
}

const MemoryLine& line(const Result& r, MemCategory c) { return gputest::memory_line(r.memory, c); }

}  // namespace

TEST(GpuCpuCheckpointing, BitwiseEqualToRecomputeAlone) {
  ZT_NEED_GPU();
  struct Case { Recompute rc; DType dt; } cases[] = {{Recompute::Block, DType::F32}, {Recompute::Selective, DType::BF16}};
  for (int stage : {0, 3}) {
    for (const Case& c : cases) {
      const EngineOptions opt = options(stage, c.dt);
      const Result ref = train(opt, c.rc, false, 3), got = train(opt, c.rc, true, 3);
      const std::string what = "stage " + std::to_string(stage) + " recompute " + recompute_name(c.rc) + " " +
                               dtype_name(c.dt);
      ASSERT_EQ(ref.losses.size(), got.losses.size()) << what;
      for (size_t k = 0; k < ref.losses.size(); ++k) {
        EXPECT_EQ(ref.losses[k], got.losses[k]) << what << " step " << k + 1;
        EXPECT_EQ(ref.grad_norms[k], got.grad_norms[k]) << what << " step " << k + 1;
      }
      ASSERT_EQ(ref.params.size(), got.params.size()) << what;
      for (size_t p = 0; p < ref.params.size(); ++p)
        EXPECT_EQ(0, std::memcmp(ref.params[p].data(), got.params[p].data(), ref.params[p].size() * sizeof(float)))
            << what << " parameter " << p;
      const int64_t input = kMicro * kCtx * kEmbd * static_cast<int64_t>(dtype_size(c.dt));
      const MemoryLine& host = line(got, MemCategory::HostActivations);
      EXPECT_EQ(host.measured, (kLayers - 1) * input) << what;
      EXPECT_EQ(host.predicted, host.measured) << what;
      EXPECT_EQ(line(got, MemCategory::Activations).measured,
                line(ref, MemCategory::Activations).measured - (kLayers - 1) * input) << what;
      std::printf("%s: losses %.6f -> %.6f, %.2f ms/step alone, %.2f ms/step with cpu_checkpointing\n", what.c_str(),
                  got.losses.front(), got.losses.back(), ref.ms_per_step, got.ms_per_step);
    }
  }
}

TEST(GpuCpuCheckpointing, CudaGraphIsRefused) {
  ZT_NEED_GPU();
  try {
    train(options(0, DType::F32), Recompute::Block, true, 1, /*graphs=*/true);
    FAIL() << "enable_cuda_graphs accepted a model with cpu_checkpointing";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu_checkpointing"), std::string::npos) << e.what();
  }
}
