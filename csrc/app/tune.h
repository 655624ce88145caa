// tune.h — `zerotrain tune`'s search: every setting of the knobs that shape a step (stage, micro-
// batch × accumulation at the config's global batch, bucket sizes, overlap_comm, the stage-3
// thresholds, recompute, offload), each written into a copy of the user's DeepSpeed JSON and
// resolved by the same reader `train` uses, priced by the memory predictor (`estimate`) and the
// step simulator (`simulate`). Settings that produce the same plan are one candidate.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/app/client_optimizer.h"
#include "zerotrain/config/hjson.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/sim/hardware.h"
#include "zerotrain/sim/simulate.h"

namespace zt {

struct TuneInputs {
  Json base;                       // the user's config, as read
  std::string source;              // its path, for messages
  ModelConfig model;
  int world = 1, nodes = 1;
  HardwareProfile hw;
  int64_t device_memory = 0;       // bytes per rank a candidate may use
  int64_t host_memory = 0;         // bytes per node (0: not limited)
  ClientOptimizer client;
  std::string model_path;                 // for the runs `--confirm` launches
  std::vector<std::string> client_flags;  // train's optimizer flags as given, for the same runs
};

// One point of the search space.
struct TuneSetting {
  int stage = 0;
  int64_t micro_batch = 1, gas = 1;
  int64_t reduce_bucket = 0, allgather_bucket = 0;   // elements
  bool overlap = true, offload = false;
  std::string recompute = "none";                   // none | block | selective
  int64_t prefetch = 0, max_live = 0, persistence = 0;  // stage 3, elements
  std::string describe() const;                      // "stage 2, mbs 4 x gas 2, reduce 5e+08, ..."
};

struct TuneOutcome {
  TuneSetting setting;
  Json config;                  // the DeepSpeed JSON that gives it
  std::string signature;        // the step program and bucket sizes: equal => the same plan
  int buckets = 0;              // gradient buckets
  int64_t device_bytes = 0;     // predicted per rank
  int64_t host_bytes = 0;       // predicted per node
  bool fits = false;
  std::string rejected;         // why it does not fit or cannot run ("" when it does)
  double step_s = 0, comm_exposed_s = 0, comm_busy_s = 0, tokens_per_s = 0, mfu = 0;
  int duplicates = 0;           // other settings that produced this plan
};

// The settings searched for this config and model (global batch kept; stage-3 knobs only at
// stage 3; offload only when the config allows it or memory requires it).
std::vector<TuneSetting> tune_space(const TuneInputs& in);
// The config a setting gives: a copy of the base with the knobs written in DeepSpeed's keys.
Json tune_config(const Json& base, const TuneSetting& s);
// Resolves, predicts memory and simulates one setting. A setting the reader refuses is
// returned with `rejected` set, not thrown.
TuneOutcome tune_evaluate(const TuneInputs& in, const TuneSetting& s);
// Every setting evaluated, identical plans collapsed (the first setting kept, `duplicates`
// counted), those that fit first by predicted step time, then the rest by device memory.
std::vector<TuneOutcome> tune_search(const TuneInputs& in);

}  // namespace zt
