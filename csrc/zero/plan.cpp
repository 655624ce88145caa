#include "zerotrain/zero/plan.h"

#include <cstdio>

#include "zerotrain/core/check.h"

namespace zt {

namespace {
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) { h ^= p[i]; h *= 1099511628211ull; }
  return h;
}
template <typename T> uint64_t mix(uint64_t h, const T& v) { return fnv1a(h, &v, sizeof(v)); }
}  // namespace

ZeroPlan make_zero_plan(const std::vector<ParamSpec>& params, int num_units, int world, int64_t bucket_elems,
                        int64_t persistence_threshold) {
  ZT_CHECK(world >= 1, "world size must be >= 1");
  ZeroPlan plan;
  plan.world = world;
  plan.bucket_elems = bucket_elems;
  plan.persistence_threshold = persistence_threshold;
  plan.params.resize(params.size());
  plan.unit_buckets.assign(static_cast<size_t>(num_units), {});

  auto open_bucket = [&](int unit, bool persistent) {
    PlanBucket b;
    b.id = static_cast<int>(plan.buckets.size());
    b.unit = unit;
    b.persistent = persistent;
    plan.buckets.push_back(b);
    plan.unit_buckets[static_cast<size_t>(unit)].push_back(b.id);
    return b.id;
  };
  for (int u = 0; u < num_units; ++u) {
    std::vector<int> regular, persistent;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].unit != u) continue;
      bool small = persistence_threshold >= 0 && params[i].numel <= persistence_threshold;
      (small ? persistent : regular).push_back(static_cast<int>(i));
    }
    int current = -1;
    for (int i : regular) {
      int64_t n = params[static_cast<size_t>(i)].numel;
      if (current < 0 || (plan.buckets[current].numel > 0 && plan.buckets[current].numel + n > bucket_elems))
        current = open_bucket(u, false);
      plan.buckets[current].params.push_back(i);
      plan.buckets[current].numel += n;
    }
    if (!persistent.empty()) {
      int b = open_bucket(u, true);
      for (int i : persistent) {
        plan.buckets[b].params.push_back(i);
        plan.buckets[b].numel += params[static_cast<size_t>(i)].numel;
      }
    }
  }
  for (size_t i = 0; i < params.size(); ++i)
    ZT_CHECK(params[i].unit >= 0 && params[i].unit < num_units,
             "parameter " + params[i].name + " has unit " + std::to_string(params[i].unit));

  int64_t flat = 0, shard = 0;
  for (PlanBucket& b : plan.buckets) {
    b.padded = (b.numel + world - 1) / world * world;
    b.slice = b.padded / world;
    b.flat_begin = flat;
    b.shard_begin = shard;
    int64_t off = flat;
    for (int i : b.params) {
      PlanParam& p = plan.params[static_cast<size_t>(i)];
      p.index = i;
      p.bucket = b.id;
      p.flat_begin = off;
      p.numel = params[static_cast<size_t>(i)].numel;
      off += p.numel;
    }
    flat += b.padded;
    shard += b.slice;
    plan.numel += b.numel;
  }
  plan.padded_numel = flat;
  plan.shard_numel = shard;
  return plan;
}

std::vector<std::pair<int64_t, int64_t>> ZeroPlan::real_shard_runs(int rank) const {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const PlanBucket& b : buckets) {
    // Real elements of the bucket occupy [0, numel) of its padded range; rank owns [r*slice, (r+1)*slice).
    int64_t lo = rank * b.slice, hi = lo + b.slice;
    int64_t real_hi = hi < b.numel ? hi : b.numel;
    if (real_hi > lo) runs.emplace_back(b.shard_begin, real_hi - lo);
  }
  return runs;
}

uint64_t ZeroPlan::hash() const {
  uint64_t h = 1469598103934665603ull;
  h = mix(h, world);
  h = mix(h, bucket_elems);
  h = mix(h, persistence_threshold);
  for (const PlanBucket& b : buckets) {
    h = mix(h, b.unit);
    h = mix(h, b.persistent);
    h = mix(h, b.flat_begin);
    h = mix(h, b.numel);
    for (int i : b.params) h = mix(h, i);
  }
  for (const PlanParam& p : params) h = mix(mix(h, p.flat_begin), p.numel);
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
