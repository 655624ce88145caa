// ZeroEngine::eval_loss runs eval_program (step_program.h): a forward-only pass in the training
// activation buffers. Asserted here at every stage, with and without gradient accumulation, on
// 1-4 ranks:
//   - training with evaluations interleaved gives bitwise the weights, losses and gradient norms
//     of training without them (no gradient, optimizer or step-statistics state is touched);
//   - two evaluations of unchanged weights give equal losses, and every stage gives the same
//     losses as stage 0 for the same weights and batches;
//   - cpu_checkpointing's block-input copies stay ordered with the next step;
//   - stage 3 leaves nothing gathered: the pool's leased bytes after an evaluation equal those
//     before it, and the gathers it issued are exactly the program's Gather ops.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine_harness.h"

using namespace zt;
using namespace zt::testing;

namespace {

// small_buckets (engine_harness.h), three steps of gas micro-steps.
RunSpec eval_spec(int stage, int gas, bool overlap) {
  RunSpec s = small_buckets(stage, overlap);
  s.steps = 3;
  s.opt.gradient_accumulation_steps = gas;
  return s;
}

std::string what(int stage, int gas, bool overlap) {
  return "stage " + std::to_string(stage) + ", gas " + std::to_string(gas) + ", overlap " + (overlap ? "on" : "off");
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

class EvalLoss : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(EvalLoss, TrainingIsBitwiseUnchanged) {
  const auto [stage, gas, overlap] = GetParam();
  const std::string w = what(stage, gas, overlap);
  const RunSpec plain = eval_spec(stage, gas, overlap);
  RunSpec with_eval = plain;
  with_eval.eval_after_steps = {0, 1, 1, 2, 3};
  const RunResult a = run_engine(plain, MPI_COMM_WORLD);
  const RunResult b = run_engine(with_eval, MPI_COMM_WORLD);
  EXPECT_TRUE(bitwise_equal(a, b)) << w;
  ASSERT_EQ(a.steps.size(), b.steps.size()) << w;
  for (size_t k = 0; k < a.steps.size(); ++k) {
    EXPECT_TRUE(same_bits(a.steps[k].loss, b.steps[k].loss)) << w << " step " << k + 1;
    EXPECT_TRUE(same_bits(a.steps[k].grad_norm, b.steps[k].grad_norm)) << w << " step " << k + 1;
  }
  ASSERT_EQ(b.eval_losses.size(), 5u) << w;
  // The same batches under unchanged weights: equal losses. After a step: a different loss.
  for (size_t j = 0; j < b.eval_losses[1].size(); ++j) {
    EXPECT_TRUE(same_bits(b.eval_losses[1][j], b.eval_losses[2][j])) << w << " micro-batch " << j;
    EXPECT_NE(b.eval_losses[0][j], b.eval_losses[1][j]) << w << " micro-batch " << j;
  }
  // Nothing stays gathered; every gather is one of the program's.
  int64_t gathers = 0;
  for (const StepOp& op : eval_program(b.plan)) gathers += op.kind == OpKind::Gather;
  if (stage == 3) EXPECT_GT(gathers, 0) << w;
  for (size_t e = 0; e < b.eval_losses.size(); ++e) {
    EXPECT_EQ(b.pool_in_use_after_eval[e], b.pool_in_use_before_eval[e]) << w << " evaluation " << e;
    EXPECT_EQ(b.gathers_after_eval[e] - b.gathers_before_eval[e], gathers * gas) << w << " evaluation " << e;
  }
}

// Every stage evaluates the same weights to the same losses as stage 0 (same ranks, same batches).
TEST_P(EvalLoss, EveryStageMatchesStageZero) {
  const auto [stage, gas, overlap] = GetParam();
  if (stage == 0) GTEST_SKIP() << "the reference itself";
  RunSpec s = eval_spec(stage, gas, overlap);
  s.steps = 0;
  s.eval_after_steps = {0};
  RunSpec ref = s;
  ref.opt.stage = 0;
  const RunResult a = run_engine(s, MPI_COMM_WORLD), r = run_engine(ref, MPI_COMM_WORLD);
  ASSERT_EQ(a.eval_losses.size(), 1u);
  ASSERT_EQ(a.eval_losses[0].size(), static_cast<size_t>(gas));
  for (int j = 0; j < gas; ++j)
    EXPECT_TRUE(same_bits(a.eval_losses[0][j], r.eval_losses[0][j])) << what(stage, gas, overlap) << " micro-batch " << j;
}

INSTANTIATE_TEST_SUITE_P(Stages, EvalLoss,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(1, 2),
                                            ::testing::Values(false, true)));

// cpu_checkpointing: the evaluation's forward copies block inputs out like a training forward and
// waits for them before overwriting their slots, so the next step's forward and backward are unchanged.
TEST(EvalLossCpuCheckpointing, TrainingIsBitwiseUnchanged) {
  RunSpec plain = eval_spec(2, 2, true);
  plain.model_json = tiny_gpt_json(16, 8, 4);
  plain.recompute = Recompute::Block;
  plain.cpu_checkpointing = true;
  RunSpec with_eval = plain;
  with_eval.eval_after_steps = {0, 1, 2};
  const RunResult a = run_engine(plain, MPI_COMM_WORLD), b = run_engine(with_eval, MPI_COMM_WORLD);
  EXPECT_TRUE(bitwise_equal(a, b));
  for (size_t k = 0; k < a.steps.size(); ++k) EXPECT_TRUE(same_bits(a.steps[k].loss, b.steps[k].loss)) << k;
}

// The program itself: forward only, and at stage 3 each gathered bucket released in its unit.
TEST(EvalProgram, ForwardOnlyAndNothingLeftGathered) {
  for (int stage = 0; stage <= 3; ++stage) {
    const RunSpec s = eval_spec(stage, 1, false);
    RunSpec none = s;
    none.steps = 0;
    const RunResult r = run_engine(none, MPI_COMM_WORLD);
    const std::vector<StepOp> ops = eval_program(r.plan);
    std::vector<int> live;
    int forwards = 0;
    for (const StepOp& op : ops) {
      EXPECT_TRUE(op.kind == OpKind::Gather || op.kind == OpKind::Wait || op.kind == OpKind::Forward ||
                  op.kind == OpKind::Release || op.kind == OpKind::Loss)
          << "stage " << stage << ": " << op_text(op);
      if (op.kind == OpKind::Forward) EXPECT_EQ(op.unit, forwards++) << "stage " << stage;
      if (op.kind == OpKind::Gather) live.push_back(op.bucket);
      if (op.kind == OpKind::Release) live.erase(std::find(live.begin(), live.end(), op.bucket));
      if (op.kind == OpKind::Wait && stage < 3) EXPECT_GE(op.group, 0) << "stage " << stage;
    }
    EXPECT_EQ(forwards, r.plan.num_units()) << "stage " << stage;
    EXPECT_TRUE(live.empty()) << "stage " << stage;
    EXPECT_EQ(ops.back().kind, OpKind::Loss) << "stage " << stage;
  }
}

}  // namespace
