// train_setup.h — from the command line and the resolved DeepSpeed config to the engine's
// options; shared by `zerotrain train` and the engine tests.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "zerotrain/config/ds_config.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/zero/engine.h"

namespace zt {

struct TrainArgs {
  std::string config, model, data;
  int64_t steps = 0;
  uint64_t seed = 1234;
  std::string device = "auto";     // auto | cpu | cuda
  std::string init_from, save_weights, metrics, memory_report;
  bool strict = false;
  int64_t log_every = 0;           // 0: steps_per_print (or ~10 lines when unset)
  int64_t max_skipped_steps = 100; // stop (exit 4) after this many all-skipped steps in a row; 0: never
};

// Parses `train` flags; InputError names the flag and what was expected.
TrainArgs parse_train_args(int argc, char** argv);
const char* train_usage();

// Hidden size h for the "auto" rules: GPT n_embd, MLP widest hidden layer.
int64_t model_hidden_size(const ModelConfig& m);
DType compute_dtype_of(const DsConfig& cfg);
// Engine options for this config (InputError for settings zerotrain does not implement yet).
EngineOptions engine_options_from(const DsConfig& cfg);
// The LR schedule the config asks for (constant at the optimizer's lr when there is none).
std::unique_ptr<LrSchedule> schedule_from(const DsConfig& cfg, const OptimizerHparams& opt);

}  // namespace zt
