// plan.cpp — the bucket layout: flat space, buckets, padding, slices; hash and description.
// (plan_schedule.cpp adds the per-stage schedule on top of this layout.)
#include "zerotrain/zero/plan.h"

#include <algorithm>
#include <cstdio>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

// Parameters of unit u, split into regular and (stage 3) persistent ones, in layout order.
void unit_members(const std::vector<ParamSpec>& params, int u, int64_t persistence_threshold,
                  std::vector<int>& regular, std::vector<int>& persistent) {
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    const ParamSpec& p = params[i];
    if (p.unit != u) continue;
    const bool small = persistence_threshold >= 0 && p.numel <= persistence_threshold;
    (small ? persistent : regular).push_back(i);
  }
}

int open_bucket(ZeroPlan& plan, int unit, bool persistent) {
  PlanBucket b;
  b.id = static_cast<int>(plan.buckets.size());
  b.unit = unit;
  b.persistent = persistent;
  plan.buckets.push_back(b);
  plan.unit_buckets[unit].push_back(b.id);
  return b.id;
}

void add_to_bucket(ZeroPlan& plan, int b, int param, int64_t numel) {
  plan.buckets[b].params.push_back(param);
  plan.buckets[b].numel += numel;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Places each bucket's parameters at multiples of A, pads the span to a multiple of A·N and
// assigns flat / shard offsets (the invariant in plan.h). flat and shard stay multiples of A.
void place_buckets(ZeroPlan& plan, const std::vector<ParamSpec>& params) {
  const int64_t A = kFlatAlignElems;
  int64_t flat = 0, shard = 0;
  for (PlanBucket& b : plan.buckets) {
    b.flat_begin = flat;
    b.shard_begin = shard;
    int64_t offset = 0;  // inside the bucket
    for (int i : b.params) {
      PlanParam& p = plan.params[i];
      offset = round_up(offset, A);
      p = {i, b.id, flat + offset, params[i].numel};
      offset += p.numel;
    }
    b.span = offset;
    b.padded = round_up(b.span, A * plan.world);
    b.slice = b.padded / plan.world;
    flat += b.padded;
    shard += b.slice;
    plan.numel += b.numel;
  }
  plan.padded_numel = flat;
  plan.shard_numel = shard;
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) { h ^= p[i]; h *= 1099511628211ull; }
  return h;
}
template <typename T> uint64_t mix(uint64_t h, const T& v) { return fnv1a(h, &v, sizeof(v)); }
uint64_t mix_list(uint64_t h, const std::vector<int>& v) {
  h = mix(h, v.size());
  for (int x : v) h = mix(h, x);
  return h;
}

}  // namespace

ZeroPlan make_zero_plan(const std::vector<ParamSpec>& params, int num_units, int world, int64_t reduce_bucket_size,
                        int64_t persistence_threshold) {
  ZT_CHECK(world >= 1, "world size must be >= 1");
  for (const ParamSpec& p : params)
    ZT_CHECK(p.unit >= 0 && p.unit < num_units, "parameter " + p.name + " has unit " + std::to_string(p.unit));
  ZeroPlan plan;
  plan.world = world;
  plan.reduce_bucket_size = reduce_bucket_size;
  plan.persistence_threshold = persistence_threshold;
  plan.params.resize(params.size());
  plan.unit_buckets.assign(num_units, {});
  for (int u = 0; u < num_units; ++u) {
    std::vector<int> regular, persistent;
    unit_members(params, u, persistence_threshold, regular, persistent);
    int current = -1;
    for (int i : regular) {
      const int64_t n = params[i].numel;
      const PlanBucket* cur = current < 0 ? nullptr : &plan.bucket(current);
      if (!cur || (cur->numel > 0 && cur->numel + n > reduce_bucket_size)) current = open_bucket(plan, u, false);
      add_to_bucket(plan, current, i, n);
    }
    if (persistent.empty()) continue;
    const int b = open_bucket(plan, u, true);
    for (int i : persistent) add_to_bucket(plan, b, i, params[i].numel);
  }
  place_buckets(plan, params);
  return plan;
}

ElemRange ZeroPlan::real_slice(int b, int rank, Layout l) const {
  const PlanBucket& k = bucket(b);
  // Parameters (and the gaps between them) occupy [0, span) of the bucket; rank owns
  // [rank*slice, (rank+1)*slice).
  const int64_t lo = rank * k.slice;
  const int64_t real = std::max<int64_t>(0, std::min(lo + k.slice, k.span) - lo);
  return slice(b, rank, l).sub(0, real);
}

std::vector<PlanPiece> ZeroPlan::pieces(int rank, PieceScope scope) const {
  std::vector<PlanPiece> out;
  for (const PlanBucket& b : buckets) {
    const ElemRange region = scope == PieceScope::Owned ? slice(b.id, rank, Layout::Full) : updated(b.id, rank, Layout::Full);
    const ElemRange full = updated(b.id, rank, Layout::Full), shard = updated(b.id, rank, Layout::Shard);
    for (int p : b.params) {
      const ElemRange pr = param_range(p), mine = intersect(pr, region);
      if (mine.count > 0)
        out.push_back({p, b.id, mine.begin - pr.begin, mine.count, mine.begin, shard.begin + (mine.begin - full.begin)});
    }
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> ZeroPlan::real_shard_runs(int rank) const {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const PlanBucket& b : buckets) {
    const ElemRange r = real_slice(b.id, rank, Layout::Shard);
    if (r.count > 0) runs.emplace_back(r.begin, r.count);
  }
  return runs;
}

DType ZeroPlan::reduced_dtype() const {
  if (flow.grads == Layout::Full) return grad_dtype;
  return wire_slots > 0 ? wire : compute;
}

int64_t ZeroPlan::max_slice() const {
  int64_t m = 0;
  for (const PlanBucket& b : buckets) m = std::max(m, b.slice);
  return m;
}

uint64_t ZeroPlan::hash() const {
  uint64_t h = 1469598103934665603ull;
  for (auto v : {int64_t(flow.stage), int64_t(world), reduce_bucket_size, persistence_threshold, int64_t(compute),
                 int64_t(grad_dtype), int64_t(wire), int64_t(staged_grads), int64_t(fp32_backward_grads),
                 int64_t(param_norms_all_reduce), ring_elems,
                 int64_t(wire_slots), wire_slot_elems, quantized_weights_block, int64_t(hpz), secondary_numel,
                 quantized_grads_block, int64_t(qgz_local)})
    h = mix(h, v);
  for (const PlanBucket& b : buckets) {
    for (auto v : {int64_t(b.unit), int64_t(b.persistent), b.flat_begin, b.numel, b.span, b.padded, int64_t(b.opens_at),
                   int64_t(b.closes_at), int64_t(b.ag_group)})
      h = mix(h, v);
    h = mix_list(h, b.params);
  }
  for (int64_t o : ring_offset) h = mix(h, o);
  for (const PlanParam& p : params) h = mix(mix(h, p.flat_begin), p.numel);
  for (const std::vector<int>& u : unit_params) h = mix_list(h, u);
  for (const GatherStep& g : gather_steps)
    h = mix_list(mix_list(mix_list(h, g.gather), g.prefetch), g.release);
  return h;
}

std::string ZeroPlan::describe() const {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof(line), "bucket plan: %zu buckets, %lld parameter elements, %lld padded, %lld per rank shard (N=%d)\n",
                buckets.size(), static_cast<long long>(numel), static_cast<long long>(padded_numel),
                static_cast<long long>(shard_numel), world);
  out += line;
  std::snprintf(line, sizeof(line), "  %6s %5s %4s %12s %10s %12s %8s\n", "bucket", "unit", "pers", "elements",
                "padding", "slice/rank", "params");
  out += line;
  for (const PlanBucket& b : buckets) {
    std::snprintf(line, sizeof(line), "  %6d %5d %4s %12lld %10lld %12lld %8zu\n", b.id, b.unit, b.persistent ? "yes" : "",
                  static_cast<long long>(b.numel), static_cast<long long>(b.padded - b.numel),
                  static_cast<long long>(b.slice), b.params.size());
    out += line;
  }
  return out;
}

}  // namespace zt
