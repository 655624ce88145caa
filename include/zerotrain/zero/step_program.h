// step_program.h — one training step as an ordered list of ops, derived from the plan
// (csrc/zero/step_program.cpp). The engine runs exactly these ops, in this order
// (csrc/zero/engine_micro_step.cpp, engine_step.cpp: one switch of one-line calls into its
// parts); `zerotrain explain` prints them; the step's collectives (ZeroPlan::step_collectives),
// the schedule text (ZeroPlan::describe_timeline) and the step timer's slices are read off them.
//
// A micro-step's ops, per schedule position (forward u0..U-1, then the loss, then backward
// U-1..0):
//   gather b* (stage 3; hpZ: "(hpz)" from the secondary partition)  wait b* | wait group g
//   (stages 1-2, first micro-step only)
//   prefetch b* (stage 3)  open b* (backward)  forward u | backward u
//   reduce b* [offload b*] | close b* (backward: the buckets it completes)  release b* (stage 3)
// The accumulation boundary: finish reductions, step stats, update, loss scale, reset grads,
// then the parameter sync (hand-off, all-gather groups at stages 1-2 or re-gathers of the
// persistent buckets at stage 3). Ops marked `unless_skipped` are left out on an overflow skip.
#pragma once
#include <string>
#include <vector>

#include "zerotrain/zero/plan.h"

namespace zt {

enum class OpKind : uint8_t {
  // ---- micro-step ----
  Gather,       // stage 3: all-gather bucket into its gathered buffer
  Wait,         // compute waits for bucket's gather (stage 3) or group's all-gather (stages 1-2)
  Prefetch,     // stage 3: all-gather an upcoming bucket ahead of its use
  Forward,      // unit's forward (stage 3: its parameters bound into the gathered buffers first)
  Loss,         // the micro-step's loss / gas into the step statistics (overwritten when first)
  Open,         // bucket's first backward starts (stages 2-3: its ring region waits until free,
                //   is zeroed and receives its grads; stages 0-1: they accumulate in place)
  Backward,     // unit's backward
  Close,        // bucket's grads complete, kept for the boundary (staged grads added in place)
  Reduce,       // bucket's grads complete and reduced: all-reduce (stage 0) or reduce-scatter
  Offload,      // offload_optimizer: bucket's reduced slice down on the copy lane, added into the
                //   host gradient shard; its ring region / wire slot is free once the copy is done
  Release,      // stage 3: bucket's gathered buffer back to the pool
  // ---- accumulation boundary ----
  FinishReduce,  // compute waits for every reduction issued
  StepStats,     // owned squared norms + loss all-gathered: the verdict (norm, clip, overflow)
  Update,        // optimizer over the owned ranges (LAMB: with its "lamb norms" all-reduce)
  LossScale,     // the loss scaler sees the verdict
  ResetGrads,    // stages 0-1: the full gradient buffer zeroed
  HandOff,       // the comm stream waits for the updated parameters (compute)
  GatherGroup,   // stages 1-2: all-gather group `group` in place
  Regather,      // stage 3: re-gather persistent bucket in place
};
const char* op_kind_name(OpKind k);  // "gather", "wait", ..., "all-gather group", "re-gather"

struct StepOp {
  OpKind kind = OpKind::Forward;
  int unit = -1;          // the schedule position's unit (-1: not at a position)
  bool backward = false;  // the position is the unit's backward
  int bucket = -1;        // Gather, Wait (stage 3), Prefetch, Open, Close, Reduce, Release, Regather
  int group = -1;         // Wait (stages 1-2), GatherGroup
  bool unless_skipped = false;  // boundary: not run when the step is skipped (overflow)
  // Gather, Prefetch with hpZ (plan.hpz > 1): all-gather the bucket over the rank's hpZ block from
  // the secondary partition, which holds this step's parameters: an earlier gather of the bucket
  // in this step came from the world and refreshed it. The first gather of each bucket in the
  // first micro-step (and every gather of an evaluation) comes from the world.
  bool secondary = false;
  bool operator==(const StepOp& o) const {
    return kind == o.kind && unit == o.unit && backward == o.backward && bucket == o.bucket && group == o.group &&
           unless_skipped == o.unless_skipped && secondary == o.secondary;
  }
};
// "gather b4", "gather b4 (hpz)", "wait group 1", "forward u2", "reduce b3", "step stats", ...
std::string op_text(const StepOp& op);

// One kind of micro-step: the first of the accumulation window, a middle one, the last one
// (gradient_accumulation_steps 1: a single kind, first and last).
struct MicroStep {
  bool first = false, last = false;
  std::vector<StepOp> ops;
};

struct StepProgram {
  int gas = 1;
  std::vector<MicroStep> kinds;  // first, [middle], [last], in that order
  std::vector<StepOp> boundary;  // after the last micro-step (ZeroEngine::step)
  const MicroStep& micro(int j) const;  // the kind micro-step j (0-based) runs
  // Every op one step runs without an overflow skip, in order (micro-steps, then the boundary).
  template <typename F>
  void for_each(F&& f) const {
    for (int j = 0; j < gas; ++j)
      for (const StepOp& op : micro(j).ops) f(j, op);
    for (const StepOp& op : boundary) f(-1, op);
  }
};

StepProgram step_program(const ZeroPlan& plan, int gradient_accumulation_steps);
// One forward-only evaluation of a micro-batch (ZeroEngine::eval_loss), run at an accumulation
// boundary. Per unit, in forward order: stages 1-2 the all-gather group waits of a step's first
// micro-step (the parameters are current after a step); stage 3 gather b and wait b for every
// non-persistent bucket the unit reads, then forward u, then release b for each of them (nothing
// prefetched, nothing left gathered: only the persistent buckets stay, as between steps); then the
// loss. No Open, Backward, Close, Reduce or Offload: no gradient buffer is touched.
std::vector<StepOp> eval_program(const ZeroPlan& plan);
// The collectives op issues, in order (empty for most ops); micro is left -1.
std::vector<PlannedCollective> op_collectives(const ZeroPlan& plan, const StepOp& op);
// The program as text: one line per op (op_text), a section per micro-step kind and the boundary.
std::string describe_program(const StepProgram& program);

}  // namespace zt
