// tune.cpp — the search behind `zerotrain tune` (tune.h).
#include "tune.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "estimate.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/check.h"
#include "zerotrain/sim/cost_model.h"
#include "zerotrain/zero/memory_predict.h"
#include "zerotrain/zero/step_program.h"

namespace zt {

namespace {

// Bucket sizes tried (elements; reduce and all-gather take the same value): DeepSpeed's default
// 5e8 and three smaller steps. Sizes that give the same buckets collapse into one candidate.
constexpr int64_t kBucketSizes[] = {10000000, 50000000, 200000000, 500000000};
// Stage 3: prefetch sizes around DeepSpeed's default 5e7, persistence thresholds around its 1e5.
constexpr int64_t kPrefetchSizes[] = {10000000, 50000000, 200000000};
constexpr int64_t kPersistence[] = {10000, 100000, 1000000};
constexpr int64_t kMaxMicroBatches = 6;  // micro-batch sizes tried: the largest divisors

ConfigOptions config_options(const TuneInputs& in) {
  ConfigOptions o;
  o.world_size = in.world;
  o.world_size_origin = "--world-size";
  o.hidden_size = model_hidden_size(in.model);
  return o;
}

// Divisors of the per-rank batch, the largest first, at most kMaxMicroBatches of them.
std::vector<int64_t> micro_batches(int64_t per_rank) {
  std::vector<int64_t> d;
  for (int64_t m = per_rank; m >= 1 && static_cast<int64_t>(d.size()) < kMaxMicroBatches; --m)
    if (per_rank % m == 0) d.push_back(m);
  return d;
}

std::string number(int64_t x) {
  char b[32];
  std::snprintf(b, sizeof(b), "%g", static_cast<double>(x));
  return b;
}

// The plan as the engine would run it: the step program, the bucket sizes and, at stage 3, the
// gather schedule's persistent buckets; two settings with equal signatures run identically.
std::string plan_signature(const ZeroPlan& plan, const TuneSetting& s, const std::string& program) {
  std::string sig = std::to_string(s.micro_batch) + "x" + std::to_string(s.gas) + (s.overlap ? " overlap " : " serial ") +
                    s.recompute + (s.offload ? " offload|" : "|");
  for (const PlanBucket& b : plan.buckets)
    sig += std::to_string(b.numel) + (b.persistent ? "p" : "") + "/" + std::to_string(b.ag_group) + ",";
  return sig + "|" + program;
}

void set_zero_knobs(Json& z, const TuneSetting& s) {
  z["stage"] = s.stage;
  z["overlap_comm"] = s.overlap;
  z["reduce_bucket_size"] = s.reduce_bucket;
  z["allgather_bucket_size"] = s.allgather_bucket;
  if (s.stage == 3) {
    z["stage3_prefetch_bucket_size"] = s.prefetch;
    z["stage3_param_persistence_threshold"] = s.persistence;
    z["stage3_max_live_parameters"] = s.max_live;
  }
  if (s.offload) z["offload_optimizer"] = Json{{"device", "cpu"}, {"pin_memory", true}};
  else z.erase("offload_optimizer");
}

}  // namespace

std::string TuneSetting::describe() const {
  std::string d = "stage " + std::to_string(stage) + ", micro-batch " + std::to_string(micro_batch) + " x " +
                  std::to_string(gas) + " accumulation, buckets " + number(reduce_bucket) + " elements, overlap_comm " +
                  (overlap ? "on" : "off") + ", recompute " + recompute;
  if (stage == 3) d += ", prefetch " + number(prefetch) + ", persistence " + number(persistence);
  return d + (offload ? ", offload_optimizer cpu" : "");
}

Json tune_config(const Json& base, const TuneSetting& s) {
  Json doc = base;
  doc.erase("train_batch_size");
  doc["train_micro_batch_size_per_gpu"] = s.micro_batch;
  doc["gradient_accumulation_steps"] = s.gas;
  Json& z = doc["zero_optimization"];
  if (!z.is_object()) z = Json::object();
  set_zero_knobs(z, s);
  Json& ac = doc["activation_checkpointing"];
  if (!ac.is_object()) ac = Json::object();
  ac.erase("number_checkpoints");
  ac["zerotrain_recompute"] = s.recompute;
  return doc;
}

std::vector<TuneSetting> tune_space(const TuneInputs& in) {
  const DsConfig cfg = resolve_ds_config(in.base, in.source, config_options(in));
  const int64_t per_rank = cfg.train_batch_size / in.world;
  const std::vector<std::string> recomputes = in.model.is_token_model() ? std::vector<std::string>{"none", "selective", "block"}
                                                  : std::vector<std::string>{"none"};
  std::vector<TuneSetting> out;
  for (int stage = 0; stage <= 3; ++stage)
    for (int64_t mbs : micro_batches(per_rank))
      for (int64_t bucket : kBucketSizes)
        for (bool overlap : {true, false})
          for (const std::string& rc : recomputes)
            for (bool offload : {false, true}) {
              if (offload && stage == 0) continue;  // ZeRO-Offload shards the optimizer: stages 1-3
              TuneSetting s;
              s.stage = stage;
              s.micro_batch = mbs;
              s.gas = per_rank / mbs;
              s.reduce_bucket = s.allgather_bucket = bucket;
              s.overlap = overlap;
              s.recompute = rc;
              s.offload = offload;
              s.max_live = cfg.zero.stage3_max_live_parameters;
              if (stage < 3) {
                out.push_back(s);
                continue;
              }
              for (int64_t prefetch : kPrefetchSizes)
                for (int64_t persistence : kPersistence) {
                  s.prefetch = prefetch;
                  s.persistence = persistence;
                  out.push_back(s);
                }
            }
  return out;
}

TuneOutcome tune_evaluate(const TuneInputs& in, const TuneSetting& s) {
  TuneOutcome o;
  o.setting = s;
  o.config = tune_config(in.base, s);
  try {
    const DsConfig cfg = resolve_ds_config(o.config, in.source + " (tuned)", config_options(in));
    const EngineOptions eopt = engine_options_from(cfg, in.client);
    const Recompute rc = recompute_of(cfg, "");
    const PlanOnlyModel pm = plan_only_model(cfg, in.model, eopt, rc, CommBackend::NCCL, in.world, in.nodes);
    const ZeroPlan& plan = pm.plan;
    o.signature = plan_signature(plan, s, describe_program(step_program(plan, eopt.gradient_accumulation_steps)));
    o.buckets = static_cast<int>(plan.buckets.size());
    const std::vector<BufferSpec> buffers = pm.model->buffer_plan();
    const std::vector<CommBufferSpec> comm = comm_buffer_plan(CommBackend::NCCL, in.world, CommOptions{});
    // Ranks differ only in the offloaded optimizer's host staging: the first and last bound it.
    for (int r : {0, in.world - 1}) {
      const MemoryPrediction m = predict_memory(plan, eopt, r, buffers, comm);
      o.device_bytes = std::max(o.device_bytes, m.device_total());
      o.host_bytes = std::max(o.host_bytes, m.host_total() * (in.world / in.nodes));
    }
    if (in.device_memory > 0 && o.device_bytes > in.device_memory) o.rejected = "device memory";
    else if (in.host_memory > 0 && o.host_bytes > in.host_memory) o.rejected = "host memory";
    o.fits = o.rejected.empty();
    const CostModel cost(in.hw, in.world, in.nodes, eopt.compute_dtype);
    const SimResult r = simulate_step(plan, eopt, make_workload(in.model, plan, s.micro_batch, rc, eopt.compute_dtype), cost);
    o.step_s = r.step_s;
    o.comm_exposed_s = r.comm_exposed_s;
    o.comm_busy_s = r.comm_busy_s;
    o.tokens_per_s = r.tokens_per_s;
    o.mfu = r.mfu;
  } catch (const InputError& e) {
    o.rejected = e.what();
    o.fits = false;
  }
  return o;
}

std::vector<TuneOutcome> tune_search(const TuneInputs& in) {
  std::vector<TuneOutcome> out;
  std::map<std::string, size_t> seen;  // signature -> index in out
  for (const TuneSetting& s : tune_space(in)) {
    TuneOutcome o = tune_evaluate(in, s);
    if (!o.signature.empty()) {
      auto [it, fresh] = seen.emplace(o.signature, out.size());
      if (!fresh) {
        ++out[it->second].duplicates;
        continue;
      }
    }
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(), [](const TuneOutcome& a, const TuneOutcome& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.step_s < b.step_s;
    return a.device_bytes < b.device_bytes;
  });
  return out;
}

}  // namespace zt
