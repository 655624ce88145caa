// stage3_note.cpp — see stage3_note.h.
#include "stage3_note.h"

#include <algorithm>
#include <cstdio>

#include "zerotrain/app/train_setup.h"

namespace zt {

namespace {

std::string mib(int64_t b) {
  char s[64];
  std::snprintf(s, sizeof(s), "%.2f MiB", static_cast<double>(b) / (1 << 20));
  return s;
}

std::string count(int64_t n) { return std::to_string(n); }

}  // namespace

std::string stage3_threshold_note(const DsConfig& cfg, const ModelConfig& model, int world, Recompute recompute,
                                  CommBackend backend, const ClientOptimizer& client) {
  if (cfg.zero.stage != 3) return "";
  const EngineOptions eopt = engine_options_from(cfg, client);
  const PlanOnlyModel pm = plan_only_model(cfg, model, eopt, recompute, backend, world);
  const ZeroPlan& plan = pm.plan;
  int64_t persistent = 0, largest = 0, gathered_elems = 0;
  for (const PlanParam& p : plan.params) {
    largest = std::max(largest, p.numel);
    persistent += plan.buckets[p.bucket].persistent ? 1 : 0;
  }
  for (const PlanBucket& b : plan.buckets) gathered_elems += b.persistent ? 0 : b.padded;
  const int64_t tensors = static_cast<int64_t>(plan.params.size());
  std::string what, change;
  if (persistent == tensors) {
    what = "every parameter is persistent (all " + count(tensors) + " tensors have at most " +
           "stage3_param_persistence_threshold = " + count(eopt.param_persistence_threshold) +
           " elements; the largest has " + count(largest) + ")";
    change = "set zero_optimization.stage3_param_persistence_threshold below " + count(largest) +
             " to partition the larger tensors";
  } else if (plan.peak_live_elems >= gathered_elems) {
    what = "every gathered parameter is live at once at the step's peak (" + count(tensors - persistent) + " of " +
           count(tensors) + " tensors gathered, " + count(gathered_elems) +
           " elements; stage3_prefetch_bucket_size = " + count(eopt.prefetch_bucket_size) +
           ", stage3_max_live_parameters = " + count(eopt.max_live_parameters) +
           ", stage3_max_reuse_distance = " + count(eopt.max_reuse_distance) + ")";
    change = "lower zero_optimization.stage3_max_reuse_distance and stage3_prefetch_bucket_size (or "
             "stage3_max_live_parameters) below " + count(gathered_elems) +
             " elements so parameters are released between their forward and backward";
  } else {
    return "";
  }
  std::string memory;
  const int64_t s3 = estimate_memory(cfg, model, world, recompute, backend, client).max_device_total();
  if (!cfg.zero.params_offloaded()) {
    DsConfig s2 = cfg;
    s2.zero.stage = 2;
    const int64_t b2 = estimate_memory(s2, model, world, recompute, backend, client).max_device_total();
    memory = "predicted device memory per rank " + mib(s3) + " at stage 3 vs " + mib(b2) + " at stage 2; ";
  } else {
    memory = "predicted device memory per rank " + mib(s3) + "; ";
  }
  return "stage 3: " + what + ", so the parameters stay whole on every rank; " + memory + change + "\n";
}

}  // namespace zt
