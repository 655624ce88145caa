// The step program is the schedule (step_program.h): at every stage, with and without gradient
// accumulation and overlap_comm, the ops the engine ran == step_program(plan, gas) == what
// `zerotrain explain` prints (describe_program), and the comm log's collectives are exactly the
// collectives of the ops that ran, in order. An op the executor skipped, added or reordered
// fails the first comparison; a collective it issued outside the program fails the last.
#include <gtest/gtest.h>
#include <mpi.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine_harness.h"

using namespace zt;
using namespace zt::testing;

namespace {

// small_buckets (engine_harness.h) with gradient_accumulation_steps gas, two steps.
RunSpec program_spec(int stage, bool overlap, int gas) {
  RunSpec s = small_buckets(stage, overlap);
  s.opt.gradient_accumulation_steps = gas;
  s.steps = 2;
  return s;
}

// An op as explain prints it: its position (if any), op_text, " *" when an overflow skips it.
std::string key(const StepOp& op) {
  std::string pos;
  if (op.unit >= 0) pos = std::string(op.backward ? "bwd u" : "fwd u") + std::to_string(op.unit) + ": ";
  return pos + op_text(op) + (op.unless_skipped ? " *" : "");
}

std::vector<std::string> keys(const std::vector<StepOp>& ops) {
  std::vector<std::string> out;
  for (const StepOp& op : ops) out.push_back(key(op));
  return out;
}

// describe_program's text back into keys, one list per section (micro-step kinds, then the
// boundary): "    fwd u1: gather b2; wait b2; forward u1" -> "fwd u1: gather b2", ...
std::vector<std::vector<std::string>> parse_program(const std::string& text) {
  std::vector<std::vector<std::string>> sections;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // "step program (...):"
  while (std::getline(in, line)) {
    if (line.rfind("    ", 0) != 0) {  // a section title
      sections.emplace_back();
      continue;
    }
    line = line.substr(4);
    std::string prefix;
    const size_t colon = line.find(": ");
    if ((line.rfind("fwd u", 0) == 0 || line.rfind("bwd u", 0) == 0) && colon != std::string::npos) {
      prefix = line.substr(0, colon + 2);
      line = line.substr(colon + 2);
    }
    for (size_t at = 0;;) {
      const size_t end = line.find("; ", at);
      sections.back().push_back(prefix + line.substr(at, end - at));
      if (end == std::string::npos) break;
      at = end + 2;
    }
  }
  return sections;
}

std::string collective_key(CommOp op, const std::string& label, size_t count, size_t bytes, DType t) {
  return std::string(comm_op_name(op)) + " " + label + " count=" + std::to_string(count) +
         " bytes=" + std::to_string(bytes) + " " + dtype_name(t);
}

std::vector<std::string> logged_collectives(const RunResult& r) {
  std::vector<std::string> out;
  for (const CommRecord& c : r.records)
    if (c.seq >= r.first_step_seq && c.seq <= r.last_step_seq)
      out.push_back(collective_key(c.op, c.label, c.count, c.bytes, c.dtype));
  return out;
}

std::vector<std::string> collectives_of(const ZeroPlan& plan, const std::vector<StepOp>& ops) {
  std::vector<std::string> out;
  for (const StepOp& op : ops)
    for (const PlannedCollective& c : op_collectives(plan, op)) {
      EXPECT_EQ(c.label, c.what.to_string());
      out.push_back(collective_key(c.op, c.label, c.count, c.bytes, c.dtype));
    }
  return out;
}

}  // namespace

TEST(StepProgram, ExecutedEqualsPlannedEqualsExplainedEqualsLogged) {
  for (int stage = 0; stage <= 3; ++stage)
    for (int gas : {1, 3})
      for (bool overlap : {false, true})
        for (bool offload : {false, true}) {
          if (offload && stage == 0) continue;  // offload_optimizer needs a sharded optimizer
          const std::string what = "stage " + std::to_string(stage) + " gas " + std::to_string(gas) + " overlap " +
                                   (overlap ? "on" : "off") + (offload ? " offload_optimizer" : "");
          RunSpec spec = program_spec(stage, overlap, gas);
          spec.opt.offload.optimizer = offload;
          const RunResult r = run_engine(spec, MPI_COMM_WORLD);
          const StepProgram program = step_program(r.plan, gas);
          ASSERT_EQ(program.kinds.size(), gas == 1 ? 1u : 3u) << what;
          // With offload_optimizer every reduce is followed by the offload of the same bucket.
          for (const MicroStep& m : program.kinds)
            for (size_t i = 0; i < m.ops.size(); ++i) {
              if (m.ops[i].kind != OpKind::Reduce) continue;
              const bool next_offloads = i + 1 < m.ops.size() && m.ops[i + 1].kind == OpKind::Offload &&
                                         m.ops[i + 1].bucket == m.ops[i].bucket;
              EXPECT_EQ(next_offloads, offload) << what << " " << op_text(m.ops[i]);
            }

          // The engine ran the program, op for op, every step.
          std::vector<StepOp> planned;
          for (int k = 0; k < spec.steps; ++k) program.for_each([&](int, const StepOp& op) { planned.push_back(op); });
          EXPECT_EQ(keys(r.ops), keys(planned)) << what;
          EXPECT_TRUE(r.ops == planned) << what;

          // explain prints the same ops, section by section.
          const std::vector<std::vector<std::string>> shown = parse_program(describe_program(program));
          ASSERT_EQ(shown.size(), program.kinds.size() + 1) << what;
          for (size_t i = 0; i < program.kinds.size(); ++i) EXPECT_EQ(shown[i], keys(program.kinds[i].ops)) << what;
          EXPECT_EQ(shown.back(), keys(program.boundary)) << what;

          // The comm log holds exactly the collectives of the ops that ran, in order, and the
          // plan's collective list is the program's.
          EXPECT_EQ(logged_collectives(r), collectives_of(r.plan, r.ops)) << what;
          std::vector<std::string> one_step;
          for (const PlannedCollective& c : r.plan.step_collectives(gas))
            one_step.push_back(collective_key(c.op, c.label, c.count, c.bytes, c.dtype));
          std::vector<StepOp> first_step(planned.begin(), planned.begin() + static_cast<std::ptrdiff_t>(planned.size() / 2));
          EXPECT_EQ(one_step, collectives_of(r.plan, first_step)) << what;
        }
}

// A skipped step (overflow) runs the boundary without the ops marked unless_skipped: no update,
// no parameter sync; the next step runs the whole program again.
TEST(StepProgram, OverflowSkipLeavesOutTheUpdateAndParameterSync) {
  for (int stage = 0; stage <= 3; ++stage) {
    RunSpec spec = program_spec(stage, true, 1);
    spec.opt.compute_dtype = DType::F16;
    spec.opt.check_overflow = true;
    spec.opt.loss_scaler.flavor = stage == 0 ? LossScalerFlavor::NonZero : LossScalerFlavor::Zero;
    spec.opt.loss_scaler.initial_scale_power = 8;
    spec.inject_overflow_at_steps = {1};
    const RunResult r = run_engine(spec, MPI_COMM_WORLD);
    ASSERT_TRUE(r.steps[0].skipped) << "stage " << stage;
    ASSERT_FALSE(r.steps[1].skipped) << "stage " << stage;
    const StepProgram program = step_program(r.plan, 1);
    std::vector<StepOp> expected = program.kinds[0].ops;
    int skippable = 0;
    for (const StepOp& op : program.boundary) {
      if (op.unless_skipped) ++skippable;
      else expected.push_back(op);
    }
    EXPECT_GE(skippable, 1) << "stage " << stage << ": the update is left out";
    program.for_each([&](int, const StepOp& op) { expected.push_back(op); });
    EXPECT_EQ(keys(r.ops), keys(expected)) << "stage " << stage;
    EXPECT_EQ(logged_collectives(r), collectives_of(r.plan, r.ops)) << "stage " << stage;
  }
}

// Stages 0, 1 and 2 send and receive the same bytes per rank per step (fp32 throughout, one
// micro-step): an all-reduce of the gradients moves 2(N-1)/N of them, a reduce-scatter of the
// gradients plus an all-gather of the parameters (N-1)/N each.
TEST(StepProgram, RingTrafficIsEqualAtStagesZeroToTwo) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 2) GTEST_SKIP() << "one rank sends nothing";
  std::vector<double> traffic;
  for (int stage = 0; stage <= 2; ++stage) {
    const RunSpec spec = small_buckets(stage, true);
    const RunResult r = run_engine(spec, MPI_COMM_WORLD);
    double moved = 0;
    for (const PlannedCollective& c : r.plan.step_collectives(1))
      if (c.what.kind != CollectiveLabel::Kind::StepStats) moved += ring_bytes_per_rank(c.op, c.bytes, world);
    traffic.push_back(moved);
    EXPECT_GT(moved, 0) << "stage " << stage;
  }
  EXPECT_DOUBLE_EQ(traffic[0], traffic[1]);
  EXPECT_DOUBLE_EQ(traffic[1], traffic[2]);
  EXPECT_DOUBLE_EQ(ring_bytes_per_rank(CommOp::AllReduce, 1200, 3), 1600.0);
  EXPECT_DOUBLE_EQ(ring_bytes_per_rank(CommOp::ReduceScatter, 1200, 3), 800.0);
  EXPECT_DOUBLE_EQ(ring_bytes_per_rank(CommOp::AllGather, 1200, 1), 0.0);
}

// hpZ (zero_hpz_partition_size): the first gather of each bucket in a step's first micro-step comes
// from the world and refreshes the rank's secondary part; every later gather of the step is over
// the rank's hpZ block, from those parts. Weights bitwise equal to plain stage 3 (the gathered
// values are the same copies); the engine ran exactly the program; the comm log's block gathers say
// their block; the secondary buffer is in the memory prediction, which equals the measured peak.
TEST(StepProgram, HpzGathersFromTheSecondaryPartitionAfterTheFirst) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int hpz = 2; hpz <= world; ++hpz) {
    if (world % hpz) continue;
    for (int gas : {1, 3}) {
      const std::string what = "hpz " + std::to_string(hpz) + " gas " + std::to_string(gas);
      RunSpec spec = program_spec(3, true, gas);
      spec.opt.max_reuse_distance = 0;  // backward re-gathers what forward released
      const RunResult plain = run_engine(spec, MPI_COMM_WORLD);
      spec.opt.hpz_partition_size = hpz;
      const RunResult r = run_engine(spec, MPI_COMM_WORLD);
      EXPECT_TRUE(bitwise_equal(r, plain)) << what;
      ASSERT_EQ(r.plan.hpz, hpz) << what;

      const StepProgram program = step_program(r.plan, gas);
      int secondary = 0, from_world = 0;
      for (const MicroStep& m : program.kinds) {
        std::vector<bool> seen(r.plan.buckets.size(), !m.first);
        for (const StepOp& op : m.ops) {
          if (op.kind != OpKind::Gather && op.kind != OpKind::Prefetch) continue;
          EXPECT_EQ(op.secondary, static_cast<bool>(seen[op.bucket])) << what << " " << op_text(op);
          seen[op.bucket] = true;
          (op.secondary ? secondary : from_world) += 1;
        }
      }
      EXPECT_GT(secondary, 0) << what;
      EXPECT_GT(from_world, 0) << what;
      std::vector<StepOp> planned;
      for (int k = 0; k < spec.steps; ++k) program.for_each([&](int, const StepOp& op) { planned.push_back(op); });
      EXPECT_TRUE(r.ops == planned) << what;
      EXPECT_EQ(logged_collectives(r), collectives_of(r.plan, r.ops)) << what;
      int block_records = 0;
      for (const CommRecord& c : r.records) {
        const bool hpz_label = c.label.size() > 4 && c.label.compare(c.label.size() - 4, 4, " hpz") == 0;
        EXPECT_EQ(c.ranks, hpz_label ? hpz : 0) << what << " " << c.label;
        block_records += hpz_label ? 1 : 0;
      }
      EXPECT_EQ(block_records, secondary * spec.steps) << what;

      int64_t secondary_elems = 0;
      for (const PlanBucket& b : r.plan.buckets) secondary_elems += b.persistent ? 0 : b.padded / hpz;
      EXPECT_EQ(r.plan.secondary_numel, secondary_elems) << what;
      int64_t gather_plain = -1, gather_hpz = -1;
      for (const MemoryLine& l : plain.memory)
        if (l.category == MemCategory::Gather) gather_plain = l.peak;
      for (const MemoryLine& l : r.memory)
        if (l.category == MemCategory::Gather) {
          EXPECT_EQ(l.peak, l.predicted) << what;
          gather_hpz = l.peak;
        }
      EXPECT_EQ(gather_hpz - gather_plain, secondary_elems * 4) << what << ": the fp32 secondary partition";
    }
  }
}

// qgZ (zero_quantized_gradients): every Reduce is the two-hop int4 reduce-scatter — here one node,
// so the one all_to_all among its ranks. The engine ran the program, the comm log holds exactly
// its collectives (no plain reduce-scatter of a bucket is left), the staging is predicted, the
// first step's loss is plain stage 3's (its forward precedes any quantised gradient) and the
// gradient norm stays within a few percent of it.
TEST(StepProgram, QgzReducesEachBucketInQuantisedHops) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int gas : {1, 3}) {
    const std::string what = "gas " + std::to_string(gas);
    RunSpec spec = program_spec(3, true, gas);
    const RunResult plain = run_engine(spec, MPI_COMM_WORLD);
    spec.opt.quantized_grads_block = 64;
    const RunResult r = run_engine(spec, MPI_COMM_WORLD);
    EXPECT_EQ(r.plan.quantized_grads_block, world > 1 ? 64 : 0) << what;
    const StepProgram program = step_program(r.plan, gas);
    std::vector<StepOp> planned;
    for (int k = 0; k < spec.steps; ++k) program.for_each([&](int, const StepOp& op) { planned.push_back(op); });
    EXPECT_TRUE(r.ops == planned) << what;
    EXPECT_EQ(logged_collectives(r), collectives_of(r.plan, r.ops)) << what;
    int hops = 0;
    for (const CommRecord& c : r.records) {
      if (world > 1 && c.op == CommOp::ReduceScatter) ADD_FAILURE() << what << ": plain reduce-scatter " << c.label;
      if (c.op == CommOp::AllToAll) {
        ++hops;
        EXPECT_EQ(c.ranks, world) << what << " " << c.label;
      }
    }
    EXPECT_EQ(hops, world > 1 ? static_cast<int>(r.plan.buckets.size()) * gas * spec.steps : 0) << what;
    for (const MemoryLine& l : r.memory)
      if (l.category == MemCategory::Buckets) EXPECT_EQ(l.measured, l.predicted) << what;
    EXPECT_EQ(r.steps[0].loss, plain.steps[0].loss) << what;
    for (size_t k = 0; k < r.steps.size(); ++k)
      EXPECT_NEAR(r.steps[k].grad_norm, plain.steps[k].grad_norm, 0.05 * plain.steps[k].grad_norm) << what << " step " << k;
  }
}
