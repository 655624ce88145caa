// plan_collectives.cpp — the schedule as data: every collective one optimizer step issues, in
// issue order, with the label, count, bytes and dtype the engine passes to the communicator
// (GradSync::issue, Stage3Gatherer::gather, GroupedAllGather::start, StepExchange::exchange,
// LambNorms::ratios).
// `zerotrain explain` prints it; tests/zero/test_step_timing.cpp checks it against the comm log.
// Also: which rank owns which slice of which parameter.
#include <algorithm>

#include "zerotrain/zero/plan.h"

namespace zt {

namespace {

struct Emitter {
  const ZeroPlan& plan;
  std::vector<PlannedCollective>& out;
  int micro = -1;
  std::string phase;

  void add(CommOp op, const std::string& label, int64_t count, int64_t full_elems, DType t) {
    out.push_back({micro, phase, op, label, static_cast<size_t>(count),
                   static_cast<size_t>(full_elems) * dtype_size(t), t});
  }
  // Stage 3: one parameter bucket all-gathered into its gathered buffer (compute dtype).
  void gather(int b) {
    const PlanBucket& k = plan.bucket(b);
    add(CommOp::AllGather, "gather b" + std::to_string(b), k.slice, k.padded, plan.compute);
  }
  void stage3_position(int pos) {
    if (!plan.flow.gather_before_use) return;
    const GatherStep& g = plan.gather_steps[pos];
    for (int b : g.gather) gather(b);
    for (int b : g.prefetch) gather(b);
  }
  // start_grad_sync for bucket b: all-reduce (stage 0) or reduce-scatter, in the wire dtype.
  void grad_sync(int b) {
    const PlanBucket& k = plan.bucket(b);
    const std::string label = "b" + std::to_string(b);
    if (plan.flow.all_reduce_grads) add(CommOp::AllReduce, label, k.padded, k.padded, plan.wire);
    else add(CommOp::ReduceScatter, label, k.slice, k.padded, plan.wire);
  }
};

}  // namespace

std::vector<PlannedCollective> ZeroPlan::step_collectives(int gradient_accumulation_steps) const {
  std::vector<PlannedCollective> out;
  Emitter e{*this, out, -1, {}};
  const int U = num_units(), gas = std::max(1, gradient_accumulation_steps);
  for (int j = 0; j < gas; ++j) {
    e.micro = j;
    for (int u = 0; u < U; ++u) {
      e.phase = "fwd u" + std::to_string(u);
      e.stage3_position(u);
    }
    for (int u = U - 1; u >= 0; --u) {
      e.phase = "bwd u" + std::to_string(u);
      e.stage3_position(2 * U - 1 - u);
      if (flow.reduce_every_micro_step || j == gas - 1)
        for (int b : closes_at[u]) e.grad_sync(b);
    }
  }
  e.micro = -1;
  e.phase = "step";
  // StepExchange: [nb] doubles + the loss in one more double, as 2·(nb+1) fp32 words per rank.
  const int64_t words = 2 * (static_cast<int64_t>(buckets.size()) + 1);
  e.add(CommOp::AllGather, "step stats", words, words * world, DType::F32);
  if (param_norms_all_reduce) {  // LambNorms: ||p||², ||u||² per parameter
    const int64_t n = 2 * static_cast<int64_t>(params.size());
    e.add(CommOp::AllReduce, "lamb norms", n, n, DType::F32);
  }
  e.phase = "after step";
  if (flow.gather_after_step) {
    for (size_t g = 0; g < ag_groups.size(); ++g)
      for (int b = static_cast<int>(ag_groups[g].begin); b < ag_groups[g].end(); ++b)
        e.add(CommOp::AllGather, "ag" + std::to_string(g) + ".b" + std::to_string(b), bucket(b).slice, bucket(b).padded,
              compute);
  } else if (flow.gather_before_use) {
    for (const PlanBucket& b : buckets)
      if (b.persistent) e.gather(b.id);
  }
  return out;
}

std::string ZeroPlan::describe_ownership(const std::vector<std::string>& param_names) const {
  std::string out = "ownership (rank r owns slice r of every bucket; elements of each parameter, [begin, end)):\n";
  std::vector<std::vector<std::pair<int, PlanPiece>>> owners(params.size());  // per parameter: (rank, piece)
  for (int r = 0; r < world; ++r)
    for (const PlanPiece& pc : pieces(r)) owners[static_cast<size_t>(pc.param)].push_back({r, pc});
  for (const PlanParam& p : params) {
    const PlanBucket& b = bucket(p.bucket);
    const std::string name = static_cast<size_t>(p.index) < param_names.size() ? param_names[p.index] : "";
    std::string line = "  param " + std::to_string(p.index) + (name.empty() ? "" : " " + name) + " (b" + std::to_string(b.id) + ", " +
                       std::to_string(p.numel) + " elements):";
    bool any = false;
    for (const auto& [r, pc] : owners[static_cast<size_t>(p.index)]) {
      line += (any ? ", r" : " r") + std::to_string(r) + " [" + std::to_string(pc.begin) + ", " +
              std::to_string(pc.begin + pc.count) + ")";
      any = true;
    }
    out += line + (flow.optimizer == Layout::Full ? " (stage 0: every rank updates all of it)" : "") + "\n";
  }
  return out;
}

}  // namespace zt
