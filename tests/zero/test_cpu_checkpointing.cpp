// activation_checkpointing.cpu_checkpointing under mpirun (CPU backend): with block or selective
// recompute, the kept block inputs live in host memory between forward and backward.
//  * losses and final weights bitwise equal to the same recompute without it, stages 0-3, with
//    gradient accumulation (the host buffers and the two device slots are reused per micro-step);
//  * from the memory report: host_activations measured == predicted == the L-1 kept inputs
//    (written out here, not taken from gpt_buffer_plan), and device activations lower than the
//    recompute alone by exactly the L-1 residual-stream buffers that left the device;
//  * with recompute none it changes nothing (no host bytes, same activations, same results).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>

#include "engine_harness.h"

using namespace zt;
using namespace zt::testing;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }

const MemoryLine& line(const RunResult& r, MemCategory c) {
  for (const MemoryLine& l : r.memory)
    if (l.category == c) return l;
  ADD_FAILURE() << "no memory line " << mem_category_name(c);
  return r.memory.front();
}

void expect_bitwise_equal(const RunResult& a, const RunResult& b, const std::string& what) {
  if (world_rank() != 0) return;  // RunResult::params is rank 0's
  ASSERT_EQ(a.steps.size(), b.steps.size()) << what;
  for (size_t k = 0; k < a.steps.size(); ++k) {
    EXPECT_EQ(a.steps[k].loss, b.steps[k].loss) << what << " step " << k;
    EXPECT_EQ(a.steps[k].grad_norm, b.steps[k].grad_norm) << what << " step " << k;
  }
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (size_t p = 0; p < a.params.size(); ++p)
    EXPECT_EQ(0, std::memcmp(a.params[p].data(), b.params[p].data(), a.params[p].size() * sizeof(float)))
        << what << " " << a.names[p];
}

TEST(CpuCheckpointing, BitwiseEqualToRecomputeWithTheBlockInputsOnTheHost) {
  const int64_t V = 16, T = 8, L = 4, H = 2, C = 16, B = 2, e = 4;  // fp32 compute
  const int64_t input_bytes = B * T * C * e;                        // one residual-stream buffer
  for (int stage = 0; stage <= 3; ++stage) {
    for (Recompute rc : {Recompute::Block, Recompute::Selective}) {
      RunSpec base;
      base.model_json = tiny_gpt_json(V, T, L, H, C);
      base.opt = adamw_options(stage);
      base.opt.reduce_bucket_size = 300;
      base.opt.gradient_accumulation_steps = 2;
      base.steps = 3;
      base.micro_batch = B;
      base.recompute = rc;
      const RunResult ref = run_engine(base, MPI_COMM_WORLD);
      RunSpec s = base;
      s.cpu_checkpointing = true;
      const RunResult r = run_engine(s, MPI_COMM_WORLD);
      const std::string what = "stage " + std::to_string(stage) + " recompute " + recompute_name(rc);
      expect_bitwise_equal(r, ref, what);

      const MemoryLine& host = line(r, MemCategory::HostActivations);
      EXPECT_EQ(host.measured, (L - 1) * input_bytes) << what;
      EXPECT_EQ(host.predicted, host.measured) << what;
      EXPECT_EQ(line(ref, MemCategory::HostActivations).measured, 0) << what;
      EXPECT_EQ(line(ref, MemCategory::HostActivations).predicted, 0) << what;
      // Device: L+1 residual buffers become two slots.
      const MemoryLine& act = line(r, MemCategory::Activations);
      const MemoryLine& act_ref = line(ref, MemCategory::Activations);
      EXPECT_LT(act.peak, act_ref.peak) << what;
      EXPECT_EQ(act.peak, act_ref.peak - (L - 1) * input_bytes) << what;
      EXPECT_EQ(act.predicted, act.peak) << what;
      EXPECT_EQ(line(r, MemCategory::Workspace).measured, line(ref, MemCategory::Workspace).measured) << what;
    }
  }
}

TEST(CpuCheckpointing, NoEffectWithoutRecompute) {
  RunSpec base;
  base.model_json = tiny_gpt_json(16, 8, 3, 2, 16);
  base.opt = adamw_options(2);
  base.steps = 2;
  const RunResult ref = run_engine(base, MPI_COMM_WORLD);
  RunSpec s = base;
  s.cpu_checkpointing = true;
  const RunResult r = run_engine(s, MPI_COMM_WORLD);
  expect_bitwise_equal(r, ref, "recompute none");
  EXPECT_EQ(line(r, MemCategory::HostActivations).measured, 0);
  EXPECT_EQ(line(r, MemCategory::HostActivations).predicted, 0);
  EXPECT_EQ(line(r, MemCategory::Activations).peak, line(ref, MemCategory::Activations).peak);
}

// One layer: the block input and the head's input are the two slots, nothing leaves the device.
TEST(CpuCheckpointing, OneLayerKeepsEverythingOnTheDevice) {
  RunSpec base;
  base.model_json = tiny_gpt_json(16, 8, 1, 2, 16);
  base.opt = adamw_options(1);
  base.steps = 2;
  base.recompute = Recompute::Block;
  const RunResult ref = run_engine(base, MPI_COMM_WORLD);
  RunSpec s = base;
  s.cpu_checkpointing = true;
  const RunResult r = run_engine(s, MPI_COMM_WORLD);
  expect_bitwise_equal(r, ref, "one layer");
  EXPECT_EQ(line(r, MemCategory::HostActivations).measured, 0);
  EXPECT_EQ(line(r, MemCategory::Activations).peak, line(ref, MemCategory::Activations).peak);
}

}  // namespace
