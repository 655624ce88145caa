// sched_inputs.cpp — the `scheduler` section's params as an LrScheduleSpec: DeepSpeed's five
// schedules, their defaults and construction-time checks (docs/config.md §5).
#include <algorithm>

#include "param_reader.h"
#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/core/check.h"

namespace zt {

using cfg::ParamReader;

namespace {

// Reads warmup_num_steps: a JSON integer > 0 (v0.19.3+), then N = max(2, value).
int64_t read_warmup_steps(ParamReader& r) {
  int64_t n = r.integer("warmup_num_steps", ds_defaults::kWarmupNumSteps);
  if (n <= 0) throw InputError(r.where() + ".warmup_num_steps: must be an integer > 0, found " + std::to_string(n));
  return std::max<int64_t>(2, n);
}

// "log" (default) or "linear"; anything else warns and uses log.
bool read_warmup_is_log(ParamReader& r, std::vector<std::string>& warnings) {
  std::string type = r.string("warmup_type", "log");
  if (type == "linear") return false;
  if (type != "log")
    warnings.push_back(r.where() + ".warmup_type '" + type + "' is not 'log' or 'linear'; using 'log'");
  return true;
}

void reject_nonstart_iteration(ParamReader& r) {
  int64_t lbi = r.integer("last_batch_iteration", -1);
  if (lbi != -1)
    throw InputError(r.where() + ".last_batch_iteration: only -1 is supported (resume restores it from the checkpoint)");
}

// WarmupLR (max default: the optimizer's lr, null allowed) and WarmupDecayLR (max default 0.001).
void read_warmup(ParamReader& r, LrScheduleSpec& s) {
  const bool decay = s.type == LrScheduleType::kWarmupDecayLR;
  s.warmup_min_lr = r.number("warmup_min_lr", ds_defaults::kWarmupMinLr);
  if (decay) {
    s.warmup_max_lr = r.number("warmup_max_lr", ds_defaults::kWarmupDecayMaxLr);
  } else if (r.has("warmup_max_lr")) {
    s.warmup_max_lr = r.number("warmup_max_lr", 0.0);
  } else {
    r.accept("warmup_max_lr");  // absent or null: the optimizer's lr
  }
  s.warmup_num_steps = read_warmup_steps(r);
  s.warmup_log = read_warmup_is_log(r, s.warnings);
  reject_nonstart_iteration(r);
  if (!decay) return;
  s.total_num_steps = r.required_number("total_num_steps");
  if (s.total_num_steps < static_cast<double>(s.warmup_num_steps))
    s.warnings.push_back(r.where() + ".total_num_steps " + std::to_string(s.total_num_steps) +
                         " is less than warmup_num_steps " + std::to_string(s.warmup_num_steps));
}

void read_warmup_cosine(ParamReader& r, LrScheduleSpec& s) {
  s.total_num_steps = r.required_number("total_num_steps");
  s.warmup_min_ratio = r.number("warmup_min_ratio", ds_defaults::kWarmupMinRatio);
  s.warmup_num_steps = read_warmup_steps(r);
  s.cos_min_ratio = r.number("cos_min_ratio", ds_defaults::kCosMinRatio);
  s.warmup_log = read_warmup_is_log(r, s.warnings);
  reject_nonstart_iteration(r);
}

void read_range_test(ParamReader& r, LrScheduleSpec& s) {
  s.range_min_lr = r.number("lr_range_test_min_lr", ds_defaults::kLrRangeTestMinLr);
  int64_t size = r.integer("lr_range_test_step_size", ds_defaults::kLrRangeTestStepSize);
  if (size <= 0)
    throw InputError(r.where() + ".lr_range_test_step_size: must be an integer > 0, found " + std::to_string(size));
  s.range_step_size = static_cast<double>(size);
  s.range_step_rate = r.number("lr_range_test_step_rate", ds_defaults::kLrRangeTestStepRate);
  s.range_staircase = r.boolean("lr_range_test_staircase", false);
  reject_nonstart_iteration(r);
}

void read_one_cycle(ParamReader& r, LrScheduleSpec& s) {
  s.cycle_min_lr = r.required_number("cycle_min_lr");
  s.cycle_max_lr = r.required_number("cycle_max_lr");
  s.decay_lr_rate = r.number("decay_lr_rate", 0.0);
  s.cycle_first_step_size = r.number("cycle_first_step_size", ds_defaults::kCycleFirstStepSize);
  s.cycle_second_step_size =
      r.has("cycle_second_step_size") ? r.number("cycle_second_step_size", 0) : s.cycle_first_step_size;
  r.accept("cycle_second_step_size");
  if (s.cycle_first_step_size <= 0)
    throw InputError(r.where() + ".cycle_first_step_size: must be > 0, found " + std::to_string(s.cycle_first_step_size));
  if (s.cycle_second_step_size < 0)
    throw InputError(r.where() + ".cycle_second_step_size: must be >= 0, found " +
                     std::to_string(s.cycle_second_step_size));
  s.cycle_first_stair_count = r.integer("cycle_first_stair_count", 0);
  s.cycle_second_stair_count =
      r.has("cycle_second_stair_count") ? r.integer("cycle_second_stair_count", 0) : s.cycle_first_stair_count;
  r.accept("cycle_second_stair_count");
  if (s.cycle_first_stair_count < 0 || s.cycle_second_stair_count < 0)
    throw InputError(r.where() + ": stair counts must be >= 0");
  s.decay_step_size = r.number("decay_step_size", 0.0);
  s.cycle_momentum = r.boolean("cycle_momentum", true);
  s.cycle_min_mom = r.number("cycle_min_mom", ds_defaults::kCycleMinMom);
  s.cycle_max_mom = r.number("cycle_max_mom", ds_defaults::kCycleMaxMom);
  s.decay_mom_rate = r.number("decay_mom_rate", 0.0);
  reject_nonstart_iteration(r);
}

LrScheduleType schedule_type_named(const std::string& type) {
  if (type == "WarmupLR") return LrScheduleType::kWarmupLR;
  if (type == "WarmupDecayLR") return LrScheduleType::kWarmupDecayLR;
  if (type == "WarmupCosineLR") return LrScheduleType::kWarmupCosineLR;
  if (type == "LRRangeTest") return LrScheduleType::kLRRangeTest;
  if (type == "OneCycle") return LrScheduleType::kOneCycle;
  throw InputError("scheduler.type: '" + type +
                   "' is not supported (zerotrain implements WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, "
                   "LRRangeTest; names are case-sensitive)");
}

}  // namespace

LrScheduleSpec parse_lr_schedule(const std::string& type, const Json& params) {
  LrScheduleSpec s;
  if (type.empty()) return s;
  s.type = schedule_type_named(type);
  if (params.is_null()) throw InputError("scheduler.params: missing; scheduler " + type + " needs a params object");
  ParamReader r(params, "scheduler.params", "scheduler " + type);
  switch (s.type) {
    case LrScheduleType::kWarmupLR:
    case LrScheduleType::kWarmupDecayLR: read_warmup(r, s); break;
    case LrScheduleType::kWarmupCosineLR: read_warmup_cosine(r, s); break;
    case LrScheduleType::kLRRangeTest: read_range_test(r, s); break;
    case LrScheduleType::kOneCycle: read_one_cycle(r, s); break;
    case LrScheduleType::kConstant: break;
  }
  r.reject_unknown();
  return s;
}

LrScheduleSpec lr_schedule_of(const DsConfig& cfg) {
  if (!cfg.scheduler) return LrScheduleSpec{};
  return parse_lr_schedule(cfg.scheduler->type, cfg.scheduler->params);
}

}  // namespace zt
