// plan_timeline.cpp — the step program (step_program.h) as prose, position by position: what each
// unit's forward waits for or gathers, which buckets its backward opens and closes and the
// collective each close issues, and what the step does. A filter over the program's ops: the
// single micro-step of gradient_accumulation_steps 1 (the first, which waits for the post-step
// all-gathers, and the last, which reduces) and the boundary.
#include <string>

#include "zerotrain/zero/step_program.h"

namespace zt {

namespace {

std::string elems(int64_t n) { return std::to_string(n) + " elements"; }

std::string bytes(int64_t n, DType t) { return std::to_string(n * static_cast<int64_t>(dtype_size(t))) + " B"; }

// The ops of one kind at a position, as " b1 b2" (buckets) or " 0 1" (groups).
std::string ids(const std::vector<StepOp>& ops, OpKind k) {
  std::string s;
  for (const StepOp& op : ops)
    if (op.kind == k) s += op.bucket >= 0 ? " b" + std::to_string(op.bucket) : " " + std::to_string(op.group);
  return s;
}

// What a Reduce op issues (GradSync::reduce).
std::string grad_sync_text(const ZeroPlan& plan, int b) {
  const PlanBucket& k = plan.bucket(b);
  std::string s = "close b" + std::to_string(b) + " -> ";
  if (plan.flow.all_reduce_grads) {
    s += "all-reduce b" + std::to_string(b) + " (" + elems(k.padded) + ", " + dtype_name(plan.wire) + ", " +
         bytes(k.padded, plan.wire) + ") in the full gradient buffer";
  } else {
    s += "reduce-scatter b" + std::to_string(b) + " (" + elems(k.padded) + " -> " + std::to_string(k.slice) +
         " per rank, " + dtype_name(plan.wire) + ", " + bytes(k.padded, plan.wire) + ") into slice r of " +
         (plan.flow.grads == Layout::Shard ? "the shard accumulator" : "the full gradient buffer");
  }
  if (plan.wire_slots > 0) s += " via a wire slot";
  return s;
}

// The parameter side of a position: stage 3's gathers, waits, prefetches and releases; stages
// 1-2's waits for all-gather groups.
std::string params_text(const ZeroPlan& plan, const std::vector<StepOp>& ops) {
  if (plan.flow.gather_before_use) {
    std::string s, need = ids(ops, OpKind::Wait);
    if (!ids(ops, OpKind::Gather).empty()) s += "all-gather" + ids(ops, OpKind::Gather) + "; ";
    s += "wait" + (need.empty() ? std::string(" nothing") : need);
    if (!ids(ops, OpKind::Prefetch).empty()) s += "; prefetch" + ids(ops, OpKind::Prefetch);
    if (!ids(ops, OpKind::Release).empty()) s += "; after: release" + ids(ops, OpKind::Release);
    return s;
  }
  const std::string groups = ids(ops, OpKind::Wait);
  return groups.empty() ? "params resident" : "wait all-gather group" + groups;
}

std::string backward_text(const ZeroPlan& plan, const std::vector<StepOp>& ops) {
  std::string s;
  if (plan.flow.gather_before_use) s += params_text(plan, ops) + "; ";
  if (!ids(ops, OpKind::Open).empty()) s += "open" + ids(ops, OpKind::Open) + "; ";
  s += "backward";
  bool reduced = false;
  for (const StepOp& op : ops)
    if (op.kind == OpKind::Reduce) s += "; " + grad_sync_text(plan, op.bucket), reduced = true;
  if (reduced && !reduces_now(plan.flow, false)) s += " (at the accumulation boundary)";
  return s;
}

std::string step_text(const ZeroPlan& plan, const std::vector<StepOp>& boundary) {
  std::string s = "step: squared norms of owned slices + loss -> all-gather \"step stats\"; update " +
                  elems(plan.numel_in(plan.flow.optimizer)) + " of master/moments";
  for (const StepOp& op : boundary) {
    if (op.kind != OpKind::GatherGroup) continue;
    const ElemRange r = plan.ag_groups[op.group];
    s += "\n      all-gather group " + std::to_string(op.group) + ": b" + std::to_string(r.begin) + "..b" +
         std::to_string(r.end() - 1) + " (each rank's slice of every bucket, in place)";
  }
  const std::string persistent = ids(boundary, OpKind::Regather);
  if (!persistent.empty()) s += "\n      all-gather persistent" + persistent;
  return s;
}

}  // namespace

std::string ZeroPlan::describe_timeline() const {
  const StepProgram program = step_program(*this, 1);
  std::string out = "schedule (ZeRO stage " + std::to_string(flow.stage) + ", N=" + std::to_string(world) + "):\n";
  if (ring_elems > 0)
    out += "  bucket ring: one arena of " + elems(ring_elems) + " (" + dtype_name(compute) +
           "), a fixed region per bucket\n";
  std::vector<StepOp> at;  // the ops of the current position
  auto flush = [&] {
    if (at.empty()) return;
    const std::string name = std::string(at[0].backward ? "bwd u" : "fwd u") + std::to_string(at[0].unit);
    out += "  " + name + ": " + (at[0].backward ? backward_text(*this, at) : params_text(*this, at)) + "\n";
    at.clear();
  };
  for (const StepOp& op : program.kinds.front().ops) {
    if (!at.empty() && (op.unit != at[0].unit || op.backward != at[0].backward)) flush();
    if (op.unit >= 0) at.push_back(op);
  }
  flush();
  return out + "  " + step_text(*this, program.boundary) + "\n";
}

}  // namespace zt
