// plan_timeline.cpp — the schedule as text, position by position: what each unit's forward
// waits for or gathers, which buckets its backward opens and closes and the collective each
// close issues, and what the step does. The engine executes exactly these lists.
#include <string>

#include "zerotrain/zero/plan.h"

namespace zt {

namespace {

std::string elems(int64_t n) { return std::to_string(n) + " elements"; }

std::string bucket_list(const std::vector<int>& bs) {
  std::string s;
  for (int b : bs) s += (s.empty() ? "b" : " b") + std::to_string(b);
  return s;
}

std::string bytes(int64_t n, DType t) { return std::to_string(n * static_cast<int64_t>(dtype_size(t))) + " B"; }

// What closing bucket b issues (start_grad_sync).
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

std::string forward_text(const ZeroPlan& plan, int pos) {
  if (plan.flow.gather_before_use) {
    const GatherStep& g = plan.gather_steps[pos];
    std::string s;
    if (!g.gather.empty()) s += "all-gather " + bucket_list(g.gather) + "; ";
    s += "wait " + (g.need.empty() ? std::string("nothing") : bucket_list(g.need));
    if (!g.prefetch.empty()) s += "; prefetch " + bucket_list(g.prefetch);
    if (!g.release.empty()) s += "; after: release " + bucket_list(g.release);
    return s;
  }
  if (!plan.flow.gather_after_step || pos >= plan.num_units()) return "params resident";
  std::vector<int> groups;
  for (int p : plan.unit_params[pos]) {
    const int g = plan.bucket(plan.param(p).bucket).ag_group;
    if (groups.empty() || groups.back() != g) groups.push_back(g);
  }
  std::string s = "wait all-gather group";
  for (int g : groups) s += " " + std::to_string(g);
  return s;
}

std::string step_text(const ZeroPlan& plan) {
  std::string s = "step: squared norms of owned slices + loss -> all-gather \"step stats\"; update " +
                  elems(plan.numel_in(plan.flow.optimizer)) + " of master/moments";
  if (plan.flow.gather_after_step) {
    for (size_t g = 0; g < plan.ag_groups.size(); ++g) {
      const ElemRange r = plan.ag_groups[g];
      s += "\n      all-gather group " + std::to_string(g) + ": b" + std::to_string(r.begin) + "..b" +
           std::to_string(r.end() - 1) + " (each rank's slice of every bucket, in place)";
    }
  } else if (plan.flow.gather_before_use) {
    std::vector<int> persistent;
    for (const PlanBucket& b : plan.buckets)
      if (b.persistent) persistent.push_back(b.id);
    if (!persistent.empty()) s += "\n      all-gather persistent " + bucket_list(persistent);
  }
  return s;
}

}  // namespace

std::string ZeroPlan::describe_timeline() const {
  const int U = num_units();
  std::string out = "schedule (ZeRO stage " + std::to_string(flow.stage) + ", N=" + std::to_string(world) + "):\n";
  if (ring_elems > 0)
    out += "  bucket ring: one arena of " + elems(ring_elems) + " (" + dtype_name(compute) +
           "), a fixed region per bucket\n";
  for (int u = 0; u < U; ++u) out += "  fwd u" + std::to_string(u) + ": " + forward_text(*this, u) + "\n";
  for (int u = U - 1; u >= 0; --u) {
    const int pos = 2 * U - 1 - u;
    std::string line = "  bwd u" + std::to_string(u) + ": ";
    if (flow.gather_before_use) line += forward_text(*this, pos) + "; ";
    if (!opens_at[u].empty()) line += "open " + bucket_list(opens_at[u]) + "; ";
    line += "backward";
    for (int b : closes_at[u]) line += "; " + grad_sync_text(*this, b);
    if (!flow.reduce_every_micro_step && !closes_at[u].empty()) line += " (at the accumulation boundary)";
    out += line + "\n";
  }
  return out + "  " + step_text(*this) + "\n";
}

}  // namespace zt
