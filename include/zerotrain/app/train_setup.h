// train_setup.h — from the command line and the resolved DeepSpeed config to the engine's
// options; shared by `zerotrain train` and the engine tests.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/app/client_optimizer.h"
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
  // Checkpoints (csrc/app/train_checkpoint.cpp): save to DIR/global_step<K> every N steps and at
  // the end, keeping the newest K (0: all); resume from DIR's latest (or --tag). --steps counts
  // global steps from the start of training.
  std::string save_checkpoint, resume, tag;
  int64_t save_every = 0, keep_last = 0;
  bool seed_given = false;         // --seed on the command line (a resume otherwise keeps the checkpoint's)
  std::string trace_dir;           // --trace DIR: Chrome trace-event JSON per rank + merged
  std::string trace_steps = "1:";  // --trace-steps FIRST:LAST (1-based, inclusive)
  std::string comm_log;            // --comm-log FILE: per-collective JSONL
  std::string recompute;           // --recompute: overrides activation_checkpointing (empty: config)
  int64_t max_skipped_steps = 100; // stop (exit 4) after this many non-finite steps in a row; 0: never
  bool allow_non_finite = false;   // --init-from / --resume may hold NaN/Inf (forensics)
  bool cuda_graph = false;         // --cuda-graph: capture + replay each micro-step (zero/step_graph.h)
  int64_t cuda_graph_warmup = 2;   // --cuda-graph-warmup N: eager steps before the first capture (>= 1)
  ClientOptimizer client_optimizer; // --optimizer, --lr, ...: used when the config has no optimizer section
  // Validation (csrc/app/train_eval.cpp): every eval_every steps and at the end, the mean loss of
  // eval_batches fixed global batches of eval_data; keep_best saves DIR/best on an improvement;
  // early_stop ends training after that many evaluations without one (0: never).
  std::string eval_data;
  int64_t eval_every = 0, eval_batches = 8, early_stop = 0;
  bool keep_best = false;
  // Samples (csrc/app/train_sample.cpp): every sample_every steps and at the end, rank 0 prints
  // sample_tokens tokens after sample_prompt (greedy at temperature 0, else seeded by --seed).
  int64_t sample_every = 0, sample_tokens = 64;
  std::string sample_prompt, sample_tokenizer;  // tokenizer: a BPE tokenizer.json, or "" for bytes
  double sample_temperature = 0.0;
  // Every flag as given, in command-line order, with its value ("" for a switch): what the ranks
  // compare at start-up (train_agreement.h).
  std::vector<std::pair<std::string, std::string>> given;
};

// Parses `train` flags; InputError names the flag and what was expected.
TrainArgs parse_train_args(int argc, char** argv);
const char* train_usage();

// "none" | "block" | "selective"; InputError naming `what` otherwise.
Recompute recompute_from(const std::string& name, const std::string& what);
// The recompute granularity: `flag` (train --recompute) when given, else the config's.
Recompute recompute_of(const DsConfig& cfg, const std::string& flag);

// Hidden size h for the "auto" rules: GPT n_embd, MLP widest hidden layer.
int64_t model_hidden_size(const ModelConfig& m);
DType compute_dtype_of(const DsConfig& cfg);
// ZeRO-Offload settings the trainer runs (InputError for combinations it cannot run); check-config
// calls it too, so both give the same verdict.
OffloadOptions offload_options_from(const DsConfig& cfg);
// Engine options for this config (InputError for settings zerotrain does not implement yet). The
// optimizer: the config's section, else `client` (app/client_optimizer.h; default: AdamW defaults).
EngineOptions engine_options_from(const DsConfig& cfg, const ClientOptimizer& client = {});
// The LR schedule the config asks for (constant at the optimizer's lr when there is none).
std::unique_ptr<LrSchedule> schedule_from(const DsConfig& cfg, const OptimizerHparams& opt);

}  // namespace zt
