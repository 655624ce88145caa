// key_table.cpp — every DeepSpeed key zerotrain reads, classed (include/zerotrain/config/key_table.h).
// The readers (cfg_*.cpp) validate; this table says what each key then does. A key read by a
// reader but missing here fails tests/config/test_key_table (completeness), and so does an entry
// whose class a 2-step run contradicts.
#include "zerotrain/config/key_table.h"

#include <algorithm>
#include <sstream>

namespace zt {
namespace {

// Probe contexts (JSON merge patches over the test's base config: stage 2, AdamW, fp32).
const char* const kStage1 = R"({"zero_optimization":{"stage":1}})";
const char* const kStage3 = R"({"zero_optimization":{"stage":3,"stage3_param_persistence_threshold":0}})";
const char* const kFp16 = R"({"fp16":{"enabled":true}})";
const char* const kFp16Overflow = R"({"fp16":{"enabled":true,"initial_scale_power":60}})";
const char* const kBf16 = R"({"bf16":{"enabled":true}})";
const char* const kOffload = R"({"zero_optimization":{"offload_optimizer":{"device":"cpu"}}})";
const char* const kOffloadParam =
    R"({"zero_optimization":{"stage":3,"stage3_param_persistence_threshold":0,"offload_optimizer":{"device":"cpu"},"offload_param":{"device":"cpu"}}})";
const char* const kAdam = R"({"optimizer":{"type":"Adam","params":{"weight_decay":0.1}}})";
const char* const kSgd = R"({"optimizer":{"type":"SGD","params":{"momentum":0.9}}})";
const char* const kAdagrad = R"({"optimizer":{"type":"Adagrad","params":{"lr":0.01}}})";
const char* const kLamb = R"({"optimizer":{"type":"LAMB","params":{"lr":0.01}}})";
const char* const kWarmupLR = R"({"scheduler":{"type":"WarmupLR","params":{"warmup_num_steps":4}}})";
const char* const kDecayLR = R"({"scheduler":{"type":"WarmupDecayLR","params":{"warmup_num_steps":1,"total_num_steps":4}}})";
const char* const kCosineLR = R"({"scheduler":{"type":"WarmupCosineLR","params":{"warmup_num_steps":3,"total_num_steps":4}}})";
const char* const kRangeLR = R"({"scheduler":{"type":"LRRangeTest","params":{}}})";
const char* const kOneCycle =
    R"({"scheduler":{"type":"OneCycle","params":{"cycle_min_lr":1e-4,"cycle_max_lr":1e-2,"cycle_first_step_size":2}}})";
const char* const kCommsLogger = R"({"comms_logger":{"enabled":true,"prof_all":false}})";

const char* const kNoMoE = "zerotrain has no expert parallelism";
const char* const kNoHooks = "zerotrain has no PyTorch modules or hooks to configure";

KeyEntry row(KeyUse use, std::string path, std::string why, std::string probe, std::string effects,
             std::string context, std::string alias, bool input_only, std::string input_default) {
  return {std::move(path), use, std::move(why), std::move(probe), std::move(effects), std::move(context),
          std::move(alias), input_only, std::move(input_default)};
}

// The top-level scalars' rows, from their declaration (config/top_keys.h).
std::vector<KeyEntry> build_top_level() {
  std::vector<KeyEntry> t;
#define ZT_TOP_KEY(name, type, def, read, refused, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, #name, why, probe, effects, context, "", false, ""));
#define ZT_TOP_SPECIAL(path, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, path, why, probe, effects, context, "", false, ""));
#include "zerotrain/config/top_keys.h"
  return t;
}

// fp16 / bf16 / data_types / torch_autocast rows, from their declaration (config/precision_keys.h).
std::vector<KeyEntry> build_precision() {
  const std::string F16 = "fp16.", B16 = "bf16.", DT = "data_types.", TA = "torch_autocast.", TOP;
  std::vector<KeyEntry> t;
#define ZT_PRECISION_KEY(sec, name, type, def, rule, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, sec + #name, why, probe, effects, context, "", false, ""));
#define ZT_PRECISION_SPECIAL(sec, path, use, why, probe, effects, context, input_only, input_default) \
  t.push_back(row(KeyUse::use, sec + path, why, probe, effects, context, "", input_only, input_default));
#include "zerotrain/config/precision_keys.h"
  return t;
}

// zero_optimization's rows, from its declaration (config/zero_keys.h).
std::vector<KeyEntry> build_zero() {
  const std::string Z = "zero_optimization.", OO = Z + "offload_optimizer.", OP = Z + "offload_param.", TOP;
  std::vector<KeyEntry> t;
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, sec + #name, why, probe, effects, context, alias, false, ""));
#define ZT_ZERO_SPECIAL(sec, path, handler, use, why, probe, effects, context, alias, input_only, input_default) \
  t.push_back(row(KeyUse::use, sec + path, why, probe, effects, context, alias, input_only, input_default));
#include "zerotrain/config/zero_keys.h"
  return t;
}

// The optimizer's and the scheduler's rows, from their declarations (config/optim_keys.h,
// config/sched_keys.h).
std::vector<KeyEntry> build_optimizer_and_scheduler() {
  const std::string O = "optimizer.params.", S = "scheduler.params.", SECTION;
  std::vector<KeyEntry> t;
#define ZT_PARAMS_ROW(prefix, path, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, prefix + path, why, probe, effects, context, "", false, ""));
#define ZT_OPTIM_KEY(name, rule, ...) ZT_PARAMS_ROW(O, #name, __VA_ARGS__)
#define ZT_OPTIM_SPECIAL(path, ...) ZT_PARAMS_ROW(SECTION, path, __VA_ARGS__)
#include "zerotrain/config/optim_keys.h"
#define ZT_SCHED_KEY(name, rule, ...) ZT_PARAMS_ROW(S, #name, __VA_ARGS__)
#define ZT_SCHED_SPECIAL(path, ...) ZT_PARAMS_ROW(SECTION, path, __VA_ARGS__)
#include "zerotrain/config/sched_keys.h"
#undef ZT_PARAMS_ROW
  return t;
}

// activation_checkpointing / comms_logger / checkpoint / flops_profiler rows, from their
// declaration (config/feature_keys.h).
std::vector<KeyEntry> build_sections() {
  const std::string AC = "activation_checkpointing.", CL = "comms_logger.", CK = "checkpoint.", FP = "flops_profiler.";
  const char* const kNoProfiler = "zerotrain has no FLOPs profiler; progress lines print achieved TFLOP/s";
  std::vector<KeyEntry> t;
#define ZT_FEATURE_KEY(sec, name, type, def, rule, store, refused, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, sec + #name, why, probe, effects, context, "", false, ""));
#define ZT_FEATURE_SPECIAL(sec, path, handler, use, why, probe, effects, context) \
  t.push_back(row(KeyUse::use, sec + path, why, probe, effects, context, "", false, ""));
#include "zerotrain/config/feature_keys.h"
  return t;
}

// The monitors, then the sections and features zerotrain accepts only while they change nothing.
std::vector<KeyEntry> build_monitors_and_features() {
  std::vector<KeyEntry> t;
  const std::pair<std::string, const char*> kFileMonitors[] = {
      {"tensorboard", "rank 0 writes each step's loss, lr, loss scale (and breakdown) as TensorBoard events"},
      {"csv_monitor", "rank 0 writes each step's loss, lr, loss scale (and breakdown), one CSV file per event"}};
  const char* const kNoNetwork = "no network service is contacted; the same numbers are in the --metrics JSONL, "
                                 "csv_monitor and tensorboard";
  for (const auto& [m, what] : kFileMonitors) {
    const std::string on = "{\"" + m + "\":{\"enabled\":true}}";
#define ZT_MONITOR_KEY(sec, name, type, def, read, use, why, probe, effects, context) \
  ZT_MONITOR_ROW_##sec(KeyUse::use, #name, why, probe, effects, context)
#define ZT_MONITOR_ROW_FILE(use, name, why, probe, effects, context) \
  t.push_back(row(use, m + "." + name, why, probe, effects, context, "", false, ""));
#define ZT_MONITOR_ROW_WANDB(...)
#define ZT_MONITOR_ROW_COMET(...)
#include "zerotrain/config/monitor_keys.h"
#undef ZT_MONITOR_ROW_FILE
#undef ZT_MONITOR_ROW_WANDB
#undef ZT_MONITOR_ROW_COMET
  }
  const std::string WANDB = "wandb.", COMET = "comet.";
#define ZT_MONITOR_KEY(sec, name, type, def, read, use, why, probe, effects, context) \
  ZT_MONITOR_ROW_##sec(KeyUse::use, sec + #name, why, probe, effects, context)
#define ZT_MONITOR_SPECIAL(sec, name, use, why, probe, effects, context) \
  ZT_MONITOR_ROW_##sec(KeyUse::use, sec + #name, why, probe, effects, context)
#define ZT_MONITOR_ROW_FILE(...)
#define ZT_MONITOR_ROW_WANDB(use, path, why, probe, effects, context) \
  t.push_back(row(use, path, why, probe, effects, context, "", false, ""));
#define ZT_MONITOR_ROW_COMET ZT_MONITOR_ROW_WANDB
#include "zerotrain/config/monitor_keys.h"
#undef ZT_MONITOR_ROW_FILE
#undef ZT_MONITOR_ROW_WANDB
#undef ZT_MONITOR_ROW_COMET
#define ZT_IGNORED_SECTION(key)                                                                                 \
  t.push_back(row(KeyUse::kNotUsed, #key, "DeepSpeed's " #key " settings have no counterpart in zerotrain", \
                  R"({"x":1})", "", "", "", false, ""));
#include "zerotrain/config/section_keys.h"
#define ZT_UNSUPPORTED_SECTION(key, what, keys, probe)                                                   \
  t.push_back(row(KeyUse::kRejected, #key,                                                             \
                  "a DeepSpeed feature zerotrain does not implement; accepted only while disabled", probe, "", \
                  "", "", false, ""));
#include "zerotrain/config/section_keys.h"
  return t;
}

std::vector<KeyEntry> build_table() {
  std::vector<KeyEntry> t;
  for (auto part : {build_top_level, build_precision, build_zero, build_optimizer_and_scheduler, build_sections,
                    build_monitors_and_features}) {
    std::vector<KeyEntry> p = part();
    t.insert(t.end(), p.begin(), p.end());
  }
  return t;
}

}  // namespace

const char* key_use_name(KeyUse u) {
  switch (u) {
    case KeyUse::kImplemented: return "implemented";
    case KeyUse::kNotUsed: return "not used";
    case KeyUse::kRejected: return "rejected";
  }
  return "?";
}

const std::vector<KeyEntry>& key_table() {
  static const std::vector<KeyEntry> table = build_table();
  return table;
}

const KeyEntry* find_key_entry(const std::string& path) {
  for (const KeyEntry& e : key_table())
    if (e.path == path) return &e;
  return nullptr;
}

namespace {
template <typename J>  // Json or const Json
J* walk_path(J& doc, const std::string& path) {
  J* v = &doc;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!v->is_object() || !v->contains(key)) return nullptr;
    v = &(*v)[key];
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}
}  // namespace

Json* json_at_path(Json& doc, const std::string& path) { return walk_path(doc, path); }
const Json* json_at_path(const Json& doc, const std::string& path) { return walk_path(doc, path); }

Json key_table_json() {
  Json out = Json::array();
  for (const KeyEntry& e : key_table()) {
    out.push_back({{"path", e.path}, {"use", key_use_name(e.use)}, {"why", e.why}, {"probe", e.probe},
                   {"effects", e.effects}, {"context", e.context}, {"alias", e.alias},
                   {"input_only", e.input_only}});
  }
  return out;
}

std::string key_table_text(bool markdown) {
  std::ostringstream os;
  if (markdown) {
    os << "| key | class | what it does / why |\n| --- | --- | --- |\n";
    for (const KeyEntry& e : key_table()) {
      os << "| `" << e.path << "`";
      if (!e.alias.empty()) os << " (also `" << e.alias << "`)";
      os << " | " << key_use_name(e.use) << " | " << e.why << " |\n";
    }
    return os.str();
  }
  size_t w = 0;
  for (const KeyEntry& e : key_table()) w = std::max(w, e.path.size());
  for (const KeyEntry& e : key_table()) {
    os << e.path << std::string(w + 2 - e.path.size(), ' ') << key_use_name(e.use)
       << std::string(13 - std::string(key_use_name(e.use)).size(), ' ') << e.why << "\n";
  }
  return os.str();
}

}  // namespace zt
