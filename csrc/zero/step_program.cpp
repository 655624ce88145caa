// step_program.cpp — the planner rules that turn the plan's lists into a step's ordered ops
// (step_program.h), and the ops as text. One rule per op kind; the engine runs the result.
#include "zerotrain/zero/step_program.h"

#include <algorithm>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

class Planner {
 public:
  explicit Planner(const ZeroPlan& plan) : plan_(plan) {}

  MicroStep micro_step(bool first, bool last) {
    MicroStep m{first, last, {}};
    out_ = &m.ops;
    // hpZ: every bucket's secondary part is current after the first micro-step's first gather of it.
    fresh_.assign(plan_.buckets.size(), !first);
    std::vector<bool> waited(plan_.ag_groups.size(), false);
    for (int u = 0; u < plan_.num_units(); ++u) {
      if (first) group_waits(u, waited);
      gathers(u, false);
      add({OpKind::Forward, u, false});
      releases(u, false);
    }
    add({OpKind::Loss});
    for (int u = plan_.num_units() - 1; u >= 0; --u) {
      gathers(u, true);
      for (int b : plan_.opens_at[u]) add({OpKind::Open, u, true, b});
      add({OpKind::Backward, u, true});
      const bool reduce = reduces_now(plan_.flow, last);
      for (int b : plan_.closes_at[u]) {
        add({reduce ? OpKind::Reduce : OpKind::Close, u, true, b});
        if (reduce && plan_.host_grads) add({OpKind::Offload, u, true, b});
      }
      releases(u, true);
    }
    return m;
  }

  std::vector<StepOp> eval() {
    std::vector<StepOp> ops;
    out_ = &ops;
    fresh_.assign(plan_.buckets.size(), false);  // run after an update: the secondary parts are stale
    std::vector<bool> waited(plan_.ag_groups.size(), false);
    for (int u = 0; u < plan_.num_units(); ++u) {
      group_waits(u, waited);
      const std::vector<int> buckets = gathered_buckets(u);
      for (int b : buckets) add(gather_op(OpKind::Gather, u, false, b));
      for (int b : buckets) add({OpKind::Wait, u, false, b});
      add({OpKind::Forward, u, false});
      for (int b : buckets) add({OpKind::Release, u, false, b});
    }
    add({OpKind::Loss});
    return ops;
  }

  std::vector<StepOp> boundary() {
    std::vector<StepOp> ops;
    out_ = &ops;
    add({OpKind::FinishReduce});
    add({OpKind::StepStats});
    add(skippable({OpKind::Update}));
    add({OpKind::LossScale});
    add({OpKind::ResetGrads});
    if (plan_.flow.gather_after_step) {
      add(skippable({OpKind::HandOff}));
      for (int g = 0; g < static_cast<int>(plan_.ag_groups.size()); ++g)
        add(skippable({OpKind::GatherGroup, -1, false, -1, g}));
    } else if (plan_.flow.gather_before_use) {
      add(skippable({OpKind::HandOff}));
      for (const PlanBucket& b : plan_.buckets)
        if (b.persistent) add(skippable({OpKind::Regather, -1, false, b.id}));
    }
    return ops;
  }

 private:
  void add(const StepOp& op) { out_->push_back(op); }
  static StepOp skippable(StepOp op) {
    op.unless_skipped = true;
    return op;
  }
  // Stages 1-2, first micro-step after a step: the unit's forward waits for the all-gather groups
  // holding its parameters (in parameter order), each group once.
  void group_waits(int u, std::vector<bool>& waited) {
    if (!plan_.flow.gather_after_step) return;
    for (int p : plan_.unit_params[u]) {
      const int g = plan_.bucket(plan_.param(p).bucket).ag_group;
      if (waited[g]) continue;
      waited[g] = true;
      add({OpKind::Wait, u, false, -1, g});
    }
  }
  // Stage 3, before the position's compute: the plan's gather / wait / prefetch lists.
  void gathers(int u, bool backward) {
    if (!plan_.flow.gather_before_use) return;
    const GatherStep& g = plan_.gather_steps[plan_.position_of(u, backward)];
    for (int b : g.gather) add(gather_op(OpKind::Gather, u, backward, b));
    for (int b : g.need) add({OpKind::Wait, u, backward, b});
    for (int b : g.prefetch) add(gather_op(OpKind::Prefetch, u, backward, b));
  }
  // A Gather or Prefetch of bucket b: from the hpZ secondary partition once it is current.
  StepOp gather_op(OpKind kind, int u, bool backward, int b) {
    StepOp op{kind, u, backward, b};
    op.secondary = plan_.hpz > 1 && fresh_[b];
    fresh_[b] = true;
    return op;
  }
  // Stage 3: the non-persistent buckets holding the unit's parameters, in parameter order, once each.
  std::vector<int> gathered_buckets(int u) const {
    std::vector<int> out;
    if (!plan_.flow.gather_before_use) return out;
    for (int p : plan_.unit_params[u]) {
      const int b = plan_.param(p).bucket;
      if (!plan_.bucket(b).persistent && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
    }
    return out;
  }
  void releases(int u, bool backward) {
    if (!plan_.flow.gather_before_use) return;
    for (int b : plan_.gather_steps[plan_.position_of(u, backward)].release) add({OpKind::Release, u, backward, b});
  }

  const ZeroPlan& plan_;
  std::vector<StepOp>* out_ = nullptr;
  std::vector<bool> fresh_;  // per bucket: its hpZ secondary part holds this step's parameters
};

std::string position_name(const StepOp& op) {
  return std::string(op.backward ? "bwd u" : "fwd u") + std::to_string(op.unit);
}

std::string phase_of(const StepOp& op) {
  if (op.unit >= 0) return position_name(op);
  return op.kind == OpKind::StepStats || op.kind == OpKind::Update ? "step" : "after step";
}

}  // namespace

const char* op_kind_name(OpKind k) {
  static const char* const kNames[] = {"gather", "wait", "prefetch", "forward", "loss", "open", "backward", "close",
                                       "reduce", "offload", "release", "finish reductions", "step stats", "update", "loss scale",
                                       "reset grads", "hand-off", "all-gather group", "re-gather"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(OpKind::Regather) + 1, "one name per op kind");
  return kNames[static_cast<size_t>(k)];
}

std::string op_text(const StepOp& op) {
  std::string s = op_kind_name(op.kind);
  if (op.kind == OpKind::Forward || op.kind == OpKind::Backward) return s + " u" + std::to_string(op.unit);
  if (op.bucket >= 0) return s + " b" + std::to_string(op.bucket) + (op.secondary ? " (hpz)" : "");
  if (op.group >= 0) return s + (op.kind == OpKind::Wait ? " group " : " ") + std::to_string(op.group);
  return s;
}

const MicroStep& StepProgram::micro(int j) const {
  ZT_CHECK(j >= 0 && j < gas, "micro-step " + std::to_string(j) + " of " + std::to_string(gas));
  if (j == 0) return kinds.front();
  return j == gas - 1 ? kinds.back() : kinds[1];
}

StepProgram step_program(const ZeroPlan& plan, int gradient_accumulation_steps) {
  StepProgram p;
  p.gas = std::max(1, gradient_accumulation_steps);
  Planner planner(plan);
  p.kinds.push_back(planner.micro_step(true, p.gas == 1));
  if (p.gas > 2) p.kinds.push_back(planner.micro_step(false, false));
  if (p.gas > 1) p.kinds.push_back(planner.micro_step(false, true));
  p.boundary = planner.boundary();
  return p;
}

std::vector<StepOp> eval_program(const ZeroPlan& plan) { return Planner(plan).eval(); }

namespace {

// op_collectives' builder: one PlannedCollective of `op`, count as passed and the full buffer's bytes.
struct Collectives {
  const StepOp& op;
  std::vector<PlannedCollective> out;
  void add(CommOp c, CollectiveLabel what, int64_t count, int64_t full_elems, DType t, RankGroup g = {}) {
    out.push_back({-1, phase_of(op), c, what, what.to_string(), static_cast<size_t>(count),
                   static_cast<size_t>(full_elems) * dtype_size(t), t, g});
  }
};
using K = CollectiveLabel::Kind;

// One parameter bucket into its gathered buffer: the compute dtype, qwZ's words, or hpZ's block gather.
void add_gather(Collectives& c, const ZeroPlan& plan, int b, bool secondary) {
  const PlanBucket& k = plan.bucket(b);
  if (secondary) {
    c.add(CommOp::AllGather, {K::SecondaryGather, b}, plan.secondary_slice(b), k.padded, plan.compute,
          RankGroup::within(plan.hpz));
  } else if (plan.quantized_weights_block > 0) {
    const int64_t words = plan.quantized_gather_words(k.slice);
    c.add(CommOp::AllGather, {K::QuantizedGather, b}, words, words * plan.world, DType::F32);
  } else {
    c.add(CommOp::AllGather, {K::Gather, b}, k.slice, k.padded, plan.compute);
  }
}

// A bucket's gradients: all-reduce (stage 0) or reduce-scatter in the wire dtype; qgZ: its hops.
void add_reduce(Collectives& c, const ZeroPlan& plan, int b) {
  const PlanBucket& k = plan.bucket(b);
  if (plan.flow.all_reduce_grads) {
    c.add(CommOp::AllReduce, {K::Grads, b}, k.padded, k.padded, plan.wire);
  } else if (plan.quantized_grads_block > 0) {
    const int64_t w = plan.quantized_grad_words(k.slice), local = plan.qgz_local, nodes = plan.qgz_nodes();
    if (local > 1)
      c.add(CommOp::AllToAll, {K::QuantizedGradsIntra, b}, nodes * w, local * nodes * w, DType::F32,
            RankGroup::within(plan.qgz_local));
    if (nodes > 1)
      c.add(CommOp::AllToAll, {K::QuantizedGradsInter, b}, w, nodes * w, DType::F32, RankGroup::spanning(plan.qgz_local));
  } else {
    c.add(CommOp::ReduceScatter, {K::Grads, b}, k.slice, k.padded, plan.wire);
  }
}

}  // namespace

std::vector<PlannedCollective> op_collectives(const ZeroPlan& plan, const StepOp& op) {
  Collectives c{op, {}};
  switch (op.kind) {
    case OpKind::Gather:
    case OpKind::Prefetch:
    case OpKind::Regather: add_gather(c, plan, op.bucket, op.secondary); break;
    case OpKind::Reduce: add_reduce(c, plan, op.bucket); break;
    case OpKind::StepStats: {
      const int64_t words = plan.step_stats().words();
      c.add(CommOp::AllGather, {K::StepStats}, words, words * plan.world, DType::F32);
      break;
    }
    case OpKind::Update:  // LambNorms: ||p||², ||u||² per parameter
      if (plan.param_norms_all_reduce) {
        const int64_t n = 2 * static_cast<int64_t>(plan.params.size());
        c.add(CommOp::AllReduce, {K::LambNorms}, n, n, DType::F32);
      }
      break;
    case OpKind::GatherGroup:
      for (int b = static_cast<int>(plan.ag_groups[op.group].begin); b < plan.ag_groups[op.group].end(); ++b)
        c.add(CommOp::AllGather, {K::GroupGather, b, op.group}, plan.bucket(b).slice, plan.bucket(b).padded, plan.compute);
      break;
    default: break;
  }
  return c.out;
}

std::vector<PlannedCollective> ZeroPlan::step_collectives(int gradient_accumulation_steps) const {
  std::vector<PlannedCollective> out;
  step_program(*this, gradient_accumulation_steps).for_each([&](int micro, const StepOp& op) {
    for (PlannedCollective& c : op_collectives(*this, op)) {
      c.micro = micro;
      out.push_back(std::move(c));
    }
  });
  return out;
}

namespace {

// One line per schedule position (its ops joined by "; "), one per op outside a position.
std::string op_lines(const std::vector<StepOp>& ops) {
  std::string out;
  for (size_t i = 0; i < ops.size(); ++i) {
    const StepOp& op = ops[i];
    const std::string text = op_text(op) + (op.unless_skipped ? " *" : "");
    const bool same_position = i > 0 && op.unit >= 0 && ops[i - 1].unit == op.unit && ops[i - 1].backward == op.backward;
    if (same_position) out += "; " + text;
    else out += (i > 0 ? "\n    " : "    ") + (op.unit >= 0 ? position_name(op) + ": " : "") + text;
  }
  return out + "\n";
}

// "micro-step 0 (first)", "micro-steps 1..2 (middle, each)", "micro-step 3 (last)".
std::string micro_title(const MicroStep& m, int gas) {
  const int from = m.first ? 0 : m.last ? gas - 1 : 1;
  const int to = m.first || m.last ? from : gas - 2;
  const std::string which = m.first && m.last ? "first and last" : m.first ? "first" : m.last ? "last" : "middle, each";
  const std::string steps = to > from ? "s " + std::to_string(from) + ".." : " ";
  return "micro-step" + steps + std::to_string(to) + " (" + which + ")";
}

}  // namespace

std::string describe_program(const StepProgram& program) {
  std::string out = "step program (gradient_accumulation_steps " + std::to_string(program.gas) +
                    "; the engine runs these ops in this order):\n";
  for (const MicroStep& m : program.kinds) out += "  " + micro_title(m, program.gas) + ":\n" + op_lines(m.ops);
  return out + "  boundary (step(); * = not on an overflow skip):\n" + op_lines(program.boundary);
}

}  // namespace zt
