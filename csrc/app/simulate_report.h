// simulate_report.h — `zerotrain simulate`'s outputs: the text report, the --json document and the
// --trace events (train --trace's format) of a predicted step (zerotrain/sim/simulate.h).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "zerotrain/sim/simulate.h"

namespace zt {

// What the report says about the run beside the prediction.
struct SimContext {
  int stage = 0, world = 1, nodes = 1, gas = 1;
  bool overlap_comm = false, offload_optimizer = false;
  std::string compute_dtype, model_name;
  const CostModel* cost = nullptr;
};

std::string simulate_report(const SimResult& r, const SimContext& c);
nlohmann::json simulate_json(const SimResult& r, const SimContext& c);
// The predicted step as rank 0's lanes, times from the earliest slice (train --trace's format): step 1,
// and as step 0 the previous step's work that runs inside it (its parameter all-gathers).
nlohmann::json simulate_trace(const SimResult& r);

}  // namespace zt
