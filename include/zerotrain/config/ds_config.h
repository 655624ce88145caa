// ds_config.h — DeepSpeed-compatible training config: load, validate, resolve.
//
// load_ds_config() reads a DeepSpeed JSON/HJSON config file and returns every setting zerotrain
// uses, typed, with DeepSpeed 0.19.5's defaults filled in (docs/config.md, with the
// file-specific rules of §17), plus zerotrain's policy (docs/config.md, the seven rules):
//   * every rejection is a zt::InputError "config FILE: <json.path>: found <value>; expected <what>"
//     (+ "did you mean `x`?" for an unknown key), raised before any training starts;
//   * unknown keys: error in DeepSpeed's strict sections (zero_optimization, offload_*, fp16,
//     bf16, optimizer/scheduler params); a warning at the top level and in the loose sections
//     (an error with ConfigOptions::strict);
//   * "auto" is resolved (docs/config.md §10) and every value carries its provenance;
//   * features DeepSpeed knows but zerotrain does not implement are accepted while disabled and
//     rejected ("not supported by zerotrain") when a config turns them on.
//
// Usage (trainer):
//   zt::ConfigOptions opt;
//   opt.world_size = comm.world_size(); opt.world_size_origin = "MPI";
//   opt.hidden_size = model.hidden_size();          // resolves the h-based "auto" values
//   zt::DsConfig cfg = zt::load_ds_config(path, opt);
//   for (auto& w : cfg.warnings) log_rank0(w);
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/config/hjson.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/optim/hparam_defaults.h"
#include "zerotrain/optim/optimizer_hparams.h"

namespace zt {

// Where a resolved value came from.
enum class ConfigSource {
  kFile,         // written in the config file
  kDefault,      // DeepSpeed's default (key absent)
  kAuto,         // the file said "auto"; zerotrain's auto rule (docs/config.md §10) produced the value
  kCommandLine,  // the file said "auto"; ConfigOptions::command_line supplied the value
  kDerived,      // computed from other keys (batch triad, legacy / deprecated key mapping)
};
const char* config_source_name(ConfigSource s);  // "file", "default", "auto", "command line", "derived"

struct Provenance {
  ConfigSource source = ConfigSource::kDefault;
  std::string note;  // e.g. "= train_batch_size / (world size 2 * gradient_accumulation_steps 1)"
};

struct ConfigOptions {
  int world_size = 1;                             // data-parallel world size W
  std::string world_size_origin = "default: 1";   // shown in batch-triad errors ("MPI", "--world-size")
  bool strict = false;                            // unknown top-level / loose-section keys are errors
  std::optional<int64_t> hidden_size;             // model hidden size h, for the h-based "auto" rules
  // Values for keys the file sets to "auto", by JSON path ("optimizer.params.lr",
  // "train_micro_batch_size_per_gpu", "scheduler.params.total_num_steps", ...). They are
  // validated like file values. A path whose file value is not "auto" is left alone.
  std::map<std::string, Json> command_line;
  // The command line's --recompute (train, estimate), which overrides activation_checkpointing's
  // granularity; "" when not given. Only decides whether cpu_checkpointing takes effect (its warning).
  std::string recompute_flag;
};

// fp16 and bf16: the ZT_PRECISION_KEY entries of config/precision_keys.h, `type name = default;`.
#define ZT_PRECISION_FIELD(name, type, def) type name = def;
#define ZT_PRECISION_FIELD_SKIP(name, type, def)

struct Fp16Config {
  double loss_scale = 0.0;  // 0: dynamic loss scaling; > 0: static scale
#define ZT_PRECISION_KEY(sec, name, type, def, ...) ZT_PRECISION_FIELD_##sec(name, type, def)
#define ZT_PRECISION_FIELD_F16 ZT_PRECISION_FIELD
#define ZT_PRECISION_FIELD_B16 ZT_PRECISION_FIELD_SKIP
#include "zerotrain/config/precision_keys.h"
#undef ZT_PRECISION_FIELD_F16
#undef ZT_PRECISION_FIELD_B16
  bool dynamic() const { return loss_scale == 0.0; }
};

struct Bf16Config {
#define ZT_PRECISION_KEY(sec, name, type, def, ...) ZT_PRECISION_FIELD_##sec(name, type, def)
#define ZT_PRECISION_FIELD_F16 ZT_PRECISION_FIELD_SKIP
#define ZT_PRECISION_FIELD_B16 ZT_PRECISION_FIELD
#include "zerotrain/config/precision_keys.h"
#undef ZT_PRECISION_FIELD_F16
#undef ZT_PRECISION_FIELD_B16
};
#undef ZT_PRECISION_FIELD
#undef ZT_PRECISION_FIELD_SKIP

// The ZT_ZERO_KEY entries of config/zero_keys.h for one section: `type name = default;`.
#define ZT_ZERO_FIELD(name, type, def) type name = def;
#define ZT_ZERO_FIELD_SKIP(name, type, def)

struct OffloadParamConfig {
  std::string device = "none";  // "none" | "cpu" ("nvme" is rejected: not supported)
  std::optional<std::string> nvme_path;
#define ZT_ZERO_KEY(sec, name, type, def, ...) ZT_ZERO_FIELD_##sec(name, type, def)
#define ZT_ZERO_FIELD_OP ZT_ZERO_FIELD
#define ZT_ZERO_FIELD_OO ZT_ZERO_FIELD_SKIP
#define ZT_ZERO_FIELD_Z ZT_ZERO_FIELD_SKIP
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_FIELD_OP
#undef ZT_ZERO_FIELD_OO
#undef ZT_ZERO_FIELD_Z
};

struct OffloadOptimizerConfig {
  std::string device = "none";  // "none" | "cpu"
  std::optional<std::string> nvme_path;
#define ZT_ZERO_KEY(sec, name, type, def, ...) ZT_ZERO_FIELD_##sec(name, type, def)
#define ZT_ZERO_FIELD_OP ZT_ZERO_FIELD_SKIP
#define ZT_ZERO_FIELD_OO ZT_ZERO_FIELD
#define ZT_ZERO_FIELD_Z ZT_ZERO_FIELD_SKIP
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_FIELD_OP
#undef ZT_ZERO_FIELD_OO
#undef ZT_ZERO_FIELD_Z
};

// zero_optimization: the special keys (zero_keys.h ZT_ZERO_SPECIAL) by hand, then every ordinary
// key. Sizes, thresholds and distances count elements.
struct ZeroConfig {
  int stage = 0;
  bool overlap_comm = false;  // resolved: explicit value, else stage == 3
  std::optional<OffloadParamConfig> offload_param;          // null / absent -> nullopt
  std::optional<OffloadOptimizerConfig> offload_optimizer;  // null / absent -> nullopt
  bool stage3_gather_16bit_weights_on_model_save = false;  // or its deprecated fp16 spelling
#define ZT_ZERO_KEY(sec, name, type, def, ...) ZT_ZERO_FIELD_##sec(name, type, def)
#define ZT_ZERO_FIELD_OP ZT_ZERO_FIELD_SKIP
#define ZT_ZERO_FIELD_OO ZT_ZERO_FIELD_SKIP
#define ZT_ZERO_FIELD_Z ZT_ZERO_FIELD
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_FIELD_OP
#undef ZT_ZERO_FIELD_OO
#undef ZT_ZERO_FIELD_Z
  bool optimizer_offloaded() const { return offload_optimizer && offload_optimizer->device != "none"; }
  bool params_offloaded() const { return offload_param && offload_param->device != "none"; }
};
#undef ZT_ZERO_FIELD
#undef ZT_ZERO_FIELD_SKIP

// The `optimizer` section, read once straight into the hyper-parameters the optimizer uses (the
// base; its `type` is DeepSpeed's lower-cased name, or "SGD"; its `kind` is the update rule, Adam
// for both "adam" and "adamw"; its `adam_w_mode` is the effective decoupled-weight-decay rule:
// type "adamw" || params.adam_w_mode).
struct OptimizerConfig : OptimizerHparams {
  Json params;  // resolved params, every default filled (DeepSpeed names)
};

// The five DeepSpeed schedules. Learning-rate and momentum values may be per-param-group
// lists; a single number is stored as a one-element vector.
struct SchedulerConfig {
  std::string type;  // "WarmupLR" | "WarmupDecayLR" | "WarmupCosineLR" | "LRRangeTest" | "OneCycle"
  Json params;       // resolved params, every default filled
  // WarmupLR / WarmupDecayLR / WarmupCosineLR
  // Steps count optimizer steps.
  std::vector<double> warmup_min_lr{sched_defaults::kWarmupMinLr};
  std::vector<double> warmup_max_lr;  // WarmupLR: empty = each group's optimizer lr
  int64_t warmup_num_steps = sched_defaults::kWarmupNumSteps;
  std::string warmup_type = "log";    // "log" | "linear"
  int64_t total_num_steps = 0;        // required by WarmupDecayLR / WarmupCosineLR
  double warmup_min_ratio = sched_defaults::kWarmupMinRatio;
  double cos_min_ratio = sched_defaults::kCosMinRatio;
  // LRRangeTest
  std::vector<double> lr_range_test_min_lr{sched_defaults::kLrRangeTestMinLr};
  int64_t lr_range_test_step_size = sched_defaults::kLrRangeTestStepSize;
  double lr_range_test_step_rate = sched_defaults::kLrRangeTestStepRate;
  bool lr_range_test_staircase = false;
  // OneCycle
  std::vector<double> cycle_min_lr, cycle_max_lr;
  double decay_lr_rate = 0.0;
  double cycle_first_step_size = sched_defaults::kCycleFirstStepSize;   // steps
  double cycle_second_step_size = sched_defaults::kCycleFirstStepSize;  // steps; null -> first
  int64_t cycle_first_stair_count = 0, cycle_second_stair_count = 0;   // second: null -> first
  double decay_step_size = 0;
  bool cycle_momentum = true;
  std::vector<double> cycle_min_mom{sched_defaults::kCycleMinMom}, cycle_max_mom{sched_defaults::kCycleMaxMom};
  double decay_mom_rate = 0.0;
};

// The STORE entries of config/feature_keys.h (ZT_FEATURE_KEY): `type name = default;` for the
// section `ZT_FEATURE_FIELD_<sec>` declares, nothing for the others.
#define ZT_FEATURE_FIELD_STORE(sec, name, type, def) ZT_FEATURE_FIELD_##sec(name, type, def)
#define ZT_FEATURE_FIELD_NONE(...)

// comms_logger: at the end of the run each rank prints a per-op summary (count, bytes, busy
// time, algbw/busbw) from its communicator's log. verbose is accepted (the per-collective log is
// --comm-log); prof_all false: only the ops in prof_ops.
struct CommsLoggerConfig {
#define ZT_FEATURE_KEY(sec, name, type, def, rule, store, ...) ZT_FEATURE_FIELD_##store(sec, name, type, def)
#define ZT_FEATURE_FIELD_CL(name, type, def) type name = def;
#define ZT_FEATURE_FIELD_AC(...)
#include "zerotrain/config/feature_keys.h"
#undef ZT_FEATURE_FIELD_CL
#undef ZT_FEATURE_FIELD_AC
  std::vector<std::string> prof_ops;   // op names ("all_reduce", "reduce_scatter", "all_gather", ...)
};

// tensorboard / csv_monitor (DeepSpeed's monitor sections): the FILE entries of
// config/monitor_keys.h. Rank 0 writes output_path/job_name/.
struct MonitorConfig {
#define ZT_MONITOR_KEY(sec, name, type, def, ...) ZT_MONITOR_FIELD_##sec(name, type, def)
#define ZT_MONITOR_FIELD_FILE(name, type, def) type name = def;
#define ZT_MONITOR_FIELD_WANDB(...)
#define ZT_MONITOR_FIELD_COMET(...)
#include "zerotrain/config/monitor_keys.h"
#undef ZT_MONITOR_FIELD_FILE
#undef ZT_MONITOR_FIELD_WANDB
#undef ZT_MONITOR_FIELD_COMET
};

struct DsConfig {
  std::string source;  // the file
  int world_size = 1;
  // Batch triad, always resolved and consistent: tbs == mbs * gas * world_size.
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  CommsLoggerConfig comms_logger;
  MonitorConfig tensorboard;  // events.out.tfevents.* (docs/observability.md)
  MonitorConfig csv_monitor;  // one <tag>.csv per metric
  // The other top-level scalars: the ZT_TOP_KEY entries of config/top_keys.h, `type name = default;`.
#define ZT_TOP_KEY(name, type, def, ...) type name = def;
#include "zerotrain/config/top_keys.h"
  Fp16Config fp16;
  Bf16Config bf16;
  ZeroConfig zero;
  std::optional<DType> grad_accum_dtype;            // data_types.grad_accum_dtype
  std::optional<OptimizerConfig> optimizer;         // nullopt: no "optimizer" (or no type)
  std::optional<SchedulerConfig> scheduler;
  std::string checkpoint_tag_validation = "WARN";   // "WARN" | "IGNORE" | "FAIL"
  // activation_checkpointing: "none" | "block" | "selective" (zerotrain_recompute, or "block"
  // when number_checkpoints >= 1); `train --recompute` overrides it.
  std::string activation_recompute = "none";
  // The other activation_checkpointing keys: the AC STORE entries of config/feature_keys.h,
  // `type activation_<name> = default;` (activation_cpu_checkpointing).
#define ZT_FEATURE_KEY(sec, name, type, def, rule, store, ...) ZT_FEATURE_FIELD_##store(sec, name, type, def)
#define ZT_FEATURE_FIELD_CL(...)
#define ZT_FEATURE_FIELD_AC(name, type, def) type activation_##name = def;
#include "zerotrain/config/feature_keys.h"
#undef ZT_FEATURE_FIELD_CL
#undef ZT_FEATURE_FIELD_AC
#undef ZT_FEATURE_FIELD_STORE
#undef ZT_FEATURE_FIELD_NONE

  // The resolved config: DeepSpeed's key names and nesting, every default filled in.
  Json resolved;
  std::map<std::string, Provenance> provenance;     // JSON path -> where its value came from
  std::vector<std::string> warnings;                // "config FILE: path: ..." lines, in order
  // Keys classed "not used" (config/key_table.h) that the file sets to a non-default value, as
  // the file spells them; warnings holds one line listing them.
  std::vector<std::string> unused_keys;

  const Json& resolved_json() const { return resolved; }
  // One line per resolved leaf: "path = value  [source: note]".
  std::string explain() const;
};

// Reads, validates and resolves a config file. Throws InputError on a config DeepSpeed would
// reject at config time, or one zerotrain rejects by policy.
DsConfig load_ds_config(const std::string& path, const ConfigOptions& opt);

// The same from text; `source` names it in messages (tests use this).
DsConfig parse_ds_config(const std::string& text, const std::string& source, const ConfigOptions& opt);

// The same from an already parsed document.
DsConfig resolve_ds_config(const Json& doc, const std::string& source, const ConfigOptions& opt);

}  // namespace zt
