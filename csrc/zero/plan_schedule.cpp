// plan_schedule.cpp — the static schedule on top of the bucket layout: which backward opens
// and closes each bucket, ring and wire slot sizing, post-step all-gather groups, and the
// stage-3 gather / prefetch / release lists. Everything here is a pure function of the layout
// and the options, so every rank derives the same schedule (and the same hash).
#include <algorithm>

#include "zerotrain/core/check.h"
#include "zerotrain/zero/plan.h"

namespace zt {

StageFlow stage_flow(int stage) {
  ZT_CHECK(stage >= 0 && stage <= 3, "ZeRO stage " + std::to_string(stage));
  StageFlow f;
  f.stage = stage;
  f.optimizer = stage >= 1 ? Layout::Shard : Layout::Full;
  f.grads = stage >= 2 ? Layout::Shard : Layout::Full;
  f.params = stage == 3 ? Layout::Shard : Layout::Full;
  f.reduce_every_micro_step = stage >= 2;
  f.all_reduce_grads = stage == 0;
  f.gather_after_step = stage == 1 || stage == 2;
  f.gather_before_use = stage == 3;
  return f;
}

namespace {

int64_t max_padded(const ZeroPlan& plan) {
  int64_t m = 0;
  for (const PlanBucket& b : plan.buckets) m = std::max(m, b.padded);
  return m;
}

// A bucket opens at the backward of the highest unit that writes its gradients and is complete
// after the backward of the lowest one (units run backward from U-1 to 0).
void backward_spans(ZeroPlan& plan) {
  const int U = plan.num_units();
  for (int u = 0; u < U; ++u) {
    for (int p : plan.unit_params[u]) {
      PlanBucket& b = plan.buckets[plan.param(p).bucket];
      b.opens_at = std::max(b.opens_at, u);
      b.closes_at = b.closes_at < 0 ? u : std::min(b.closes_at, u);
    }
  }
  plan.opens_at.assign(U, {});
  plan.closes_at.assign(U, {});
  for (const PlanBucket& b : plan.buckets) {
    ZT_CHECK(b.opens_at >= 0, "bucket " + std::to_string(b.id) + " is read by no unit");
    plan.opens_at[b.opens_at].push_back(b.id);
    plan.closes_at[b.closes_at].push_back(b.id);
  }
}

// Stages 2-3: each bucket gets a fixed region of one ring arena, first fit in backward order.
// A bucket holds its region from the backward that opens it until one backward after the one
// that closes it (its reduce-scatter is issued after the closing backward; the extra position
// means a new bucket never waits on the reduction of the one just closed, as a spare slot did).
// The arena is therefore about the largest sum of buckets live at once — within a small multiple
// of reduce_bucket_size plus the largest bucket open at once — not (open + 1) x the largest bucket.
void size_ring(ZeroPlan& plan) {
  if (plan.flow.grads != Layout::Shard) return;
  const int U = plan.num_units();
  const size_t nb = plan.buckets.size();
  struct Held { int64_t begin, end; int last_pos; };  // region and the last backward position holding it
  std::vector<Held> held;
  plan.ring_offset.assign(nb, 0);
  for (int pos = U; pos < 2 * U; ++pos) {  // the backward positions
    const int u = plan.unit_of(pos);
    held.erase(std::remove_if(held.begin(), held.end(), [&](const Held& h) { return h.last_pos < pos; }), held.end());
    for (int b : plan.opens_at[u]) {
      const int64_t n = plan.bucket(b).padded;
      std::sort(held.begin(), held.end(), [](const Held& x, const Held& y) { return x.begin < y.begin; });
      int64_t at = 0;
      for (const Held& h : held) {
        if (at + n <= h.begin) break;
        at = std::max(at, h.end);
      }
      plan.ring_offset[b] = at;
      held.push_back({at, at + n, plan.position_of(plan.bucket(b).closes_at, true) + 1});
      plan.ring_elems = std::max(plan.ring_elems, at + n);
    }
  }
  plan.ring_overlaps.assign(nb, {});
  for (size_t b = 0; b < nb; ++b)
    for (size_t j = 0; j < nb; ++j) {
      const int64_t b0 = plan.ring_offset[b], b1 = b0 + plan.buckets[b].padded;
      const int64_t j0 = plan.ring_offset[j], j1 = j0 + plan.buckets[j].padded;
      if (b0 < j1 && j0 < b1) plan.ring_overlaps[b].push_back(static_cast<int>(j));
    }
}

// Stages 1-2: consecutive buckets grouped up to allgather_bucket_size.
void group_all_gathers(ZeroPlan& plan, int64_t group_elems) {
  if (!plan.flow.gather_after_step) return;
  int64_t in_group = 0;
  for (PlanBucket& b : plan.buckets) {
    if (plan.ag_groups.empty() || (in_group > 0 && in_group + b.padded > group_elems)) {
      plan.ag_groups.push_back({b.id, 0});
      in_group = 0;
    }
    in_group += b.padded;
    plan.ag_groups.back().count += 1;
    b.ag_group = static_cast<int>(plan.ag_groups.size()) - 1;
  }
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Stage 3: replays one micro-step of gathering. At its start every non-persistent bucket is
// released (the previous micro-step released them all) and persistent ones are live.
class GatherSimulation {
 public:
  GatherSimulation(ZeroPlan& plan, const PlanOptions& o) : plan_(plan), o_(o), live_(plan.buckets.size(), false) {
    for (const PlanBucket& b : plan.buckets) live_[b.id] = b.persistent;
  }
  void run() {
    const int positions = 2 * plan_.num_units();
    plan_.gather_steps.resize(positions);
    for (int pos = 0; pos < positions; ++pos) plan_.gather_steps[pos].need = needs(pos);
    for (int pos = 0; pos < positions; ++pos) {
      GatherStep& g = plan_.gather_steps[pos];
      for (int b : g.need)
        if (!live_[b]) g.gather.push_back(gather(b));
      for (int b : g.need) g.current += plan_.bucket(b).persistent ? 0 : plan_.bucket(b).padded;
      prefetch(pos, g);
      g.live = live_elems_;
      plan_.peak_live_elems = std::max(plan_.peak_live_elems, g.live);
      plan_.peak_live_beyond_current = std::max(plan_.peak_live_beyond_current, g.live - g.current);
      for (int b : g.need)
        if (!plan_.bucket(b).persistent && !reused_soon(b, pos)) g.release.push_back(release(b));
    }
  }

 private:
  std::vector<int> needs(int pos) const {
    std::vector<int> n;
    for (int p : plan_.unit_params[plan_.unit_of(pos)]) n.push_back(plan_.param(p).bucket);
    std::sort(n.begin(), n.end());
    n.erase(std::unique(n.begin(), n.end()), n.end());
    return n;
  }
  int gather(int b) {
    if (!plan_.bucket(b).persistent) live_elems_ += plan_.bucket(b).padded;
    live_[b] = true;
    return b;
  }
  int release(int b) {
    live_[b] = false;
    live_elems_ -= plan_.bucket(b).padded;
    return b;
  }
  // Upcoming buckets in schedule order until stage3_prefetch_bucket_size or
  // stage3_max_live_parameters (not counting this position's own buckets) would be exceeded.
  void prefetch(int pos, GatherStep& g) {
    int64_t taken = 0;
    for (int j = pos + 1; j < static_cast<int>(plan_.gather_steps.size()); ++j) {
      for (int b : plan_.gather_steps[j].need) {
        const PlanBucket& k = plan_.bucket(b);
        if (k.persistent || live_[b]) continue;
        if (taken + k.padded > o_.prefetch_bucket_size || live_elems_ - g.current + k.padded > o_.max_live_parameters) return;
        g.prefetch.push_back(gather(b));
        taken += k.padded;
      }
    }
  }
  // Needed again later in this micro-step, with fewer than stage3_max_reuse_distance elements
  // of other needs in between.
  bool reused_soon(int b, int pos) const {
    int64_t distance = 0;
    for (int j = pos + 1; j < static_cast<int>(plan_.gather_steps.size()); ++j) {
      const std::vector<int>& n = plan_.gather_steps[j].need;
      if (contains(n, b)) return distance < o_.max_reuse_distance;
      for (int x : n) distance += plan_.bucket(x).padded;
    }
    return false;
  }

  ZeroPlan& plan_;
  const PlanOptions& o_;
  std::vector<bool> live_;  // per bucket
  int64_t live_elems_ = 0;  // Σ padded of live non-persistent buckets
};

// Stage 3's ZeRO++ options: qwZ's block; hpZ's secondary buffer, every non-persistent bucket's
// part in bucket order; qgZ's block and the ranks of its first hop.
void apply_zeropp(ZeroPlan& plan, const PlanOptions& o) {
  plan.quantized_weights_block = o.quantized_weights_block;
  if (o.hpz > 1) {
    ZT_CHECK(plan.world % o.hpz == 0, "hpZ partition of " + std::to_string(o.hpz) +
                                          " ranks does not divide the world of " + std::to_string(plan.world));
    plan.hpz = o.hpz;
    for (const PlanBucket& b : plan.buckets) {
      plan.secondary_offset.push_back(b.persistent ? -1 : plan.secondary_numel);
      if (!b.persistent) plan.secondary_numel += plan.secondary_slice(b.id);
    }
  }
  if (o.quantized_grads_block > 0 && plan.world > 1) {
    ZT_CHECK(o.nodes >= 1 && plan.world % o.nodes == 0,
             "qgZ: " + std::to_string(plan.world) + " ranks on " + std::to_string(o.nodes) + " nodes");
    plan.quantized_grads_block = o.quantized_grads_block;
    plan.qgz_local = plan.world / o.nodes;
  }
}

}  // namespace

ZeroPlan make_engine_plan(const std::vector<ParamSpec>& params, const std::vector<std::vector<int>>& unit_params,
                          const PlanOptions& o) {
  const StageFlow flow = stage_flow(o.stage);
  ZT_CHECK(o.reduce_bucket_size >= 1 && o.allgather_bucket_size >= 1, "bucket sizes must be >= 1 element");
  ZeroPlan plan = make_zero_plan(params, static_cast<int>(unit_params.size()), o.world, o.reduce_bucket_size,
                                 flow.gather_before_use ? o.param_persistence_threshold : -1);
  plan.flow = flow;
  plan.unit_params = unit_params;
  plan.compute = o.compute;
  plan.grad_dtype = o.grad_accum;
  plan.wire = o.wire;
  if (flow.gather_before_use) apply_zeropp(plan, o);
  // Backward writes its grads in the compute dtype, or in fp32 straight into the full buffer
  // (stages 0-1, bf16 compute, fp32 accumulation). They are staged per parameter when they cannot
  // go straight into the buffer that is reduced (contiguous_gradients off, or stages 0-1
  // accumulating in another dtype that backward does not write: fp16 compute keeps its 16-bit
  // gradients, so its overflow check sees what fp16 backward produced).
  plan.fp32_backward_grads = o.contiguous_gradients && flow.grads == Layout::Full && o.compute == DType::BF16 &&
                             o.grad_accum == DType::F32;
  plan.staged_grads = !o.contiguous_gradients ||
                      (flow.grads == Layout::Full && o.grad_accum != o.compute && !plan.fp32_backward_grads);
  plan.param_norms_all_reduce = o.param_norms && flow.optimizer == Layout::Shard;
  plan.host_grads = o.host_grads && flow.optimizer == Layout::Shard;
  backward_spans(plan);
  size_ring(plan);
  // The reduced buffer: the full gradient buffer (stages 0-1) or a ring slot (compute dtype).
  const DType reduced = flow.grads == Layout::Full ? plan.grad_dtype : plan.compute;
  if (o.wire != reduced) {
    plan.wire_slots = 2;  // double buffered
    plan.wire_slot_elems = max_padded(plan);
  }
  group_all_gathers(plan, o.allgather_bucket_size);
  if (flow.gather_before_use) GatherSimulation(plan, o).run();
  return plan;
}

}  // namespace zt
