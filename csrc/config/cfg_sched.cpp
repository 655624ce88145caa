// cfg_sched.cpp — the "scheduler" section (docs/config.md §5): the five DeepSpeed
// schedules, their params with defaults, and the construction-time checks done at config time.
// The section is read once into SchedulerConfig; lr_schedule_of() turns that into the
// LrScheduleSpec optim/ builds the schedule from, and parse_lr_schedule() runs the same reader
// for callers without a config file.
#include <algorithm>
#include <cmath>

#include "config_reader.h"
#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/core/check.h"

namespace zt::cfg {
namespace {

const char* const kSchedules[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"};
const char* const kTorchSchedulers[] = {
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
    "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR", "OneCycleLR",
    "CosineAnnealingWarmRestarts", "PolynomialLR", "LRScheduler"};

// Required when the value is "auto" without a command-line value, or absent.
[[noreturn]] void missing(Ctx& c, Section& s, const std::string& key, const Section::Lookup& l) {
  if (l.source == ConfigSource::kAuto) {
    c.error(s.key_path(key), "is \"auto\" but nothing supplies a value (no command-line value); give a number");
  }
  c.error(s.key_path(key), std::string("missing; ") + "required by " + c.cfg.resolved["scheduler"]["type"].get<std::string>());
}

// A learning-rate / momentum value: a number or a per-param-group list of numbers.
std::vector<double> read_group_values(Ctx& c, Section& s, const std::string& key, const std::vector<double>* def,
                                      Json default_json = nullptr) {
  Section::Lookup l = s.take(key);
  if (!l.present()) {
    if (!def) missing(c, s, key, l);
    s.put_lookup(key, default_json.is_null() && !def->empty() ? Json((*def)[0]) : default_json, l);
    return *def;
  }
  std::string p = s.key_path(l.key);
  const Json& v = *l.value;
  std::vector<double> out;
  if (v.is_number()) {
    out.push_back(v.get<double>());
  } else if (v.is_array() && !v.empty()) {
    for (const Json& e : v) {
      if (!e.is_number()) c.fail(p, v, "a number or a list of numbers (one per parameter group)");
      out.push_back(e.get<double>());
    }
  } else {
    c.fail(p, v, "a number or a list of numbers (one per parameter group)");
  }
  for (double d : out)
    if (!std::isfinite(d)) c.fail(p, v, "finite numbers");
  s.put_lookup(key, v, l);
  return out;
}

double read_real(Ctx& c, Section& s, const std::string& key, double def, double min_value, bool strictly_greater) {
  Section::Lookup l = s.take(key);
  double v = def;
  if (l.present()) {
    std::string p = s.key_path(l.key);
    if (!l.value->is_number()) c.fail(p, *l.value, "a number");
    v = l.value->get<double>();
    bool ok = std::isfinite(v) && (strictly_greater ? v > min_value : v >= min_value);
    if (!ok) c.fail(p, *l.value, std::string("a number ") + (strictly_greater ? "> " : ">= ") + describe(Json(min_value)));
  }
  s.put_lookup(key, v, l);
  return v;
}

// An integer step count. DeepSpeed requires a Python int (a JSON whole number from a file), except
// for total_num_steps (`whole_floats`: a whole float such as 1e12 counts).
int64_t read_count(Ctx& c, Section& s, const std::string& key, std::optional<int64_t> def, int64_t min_value,
                   bool whole_floats = false) {
  Section::Lookup l = s.take(key);
  if (!l.present()) {
    if (!def) missing(c, s, key, l);
    s.put_lookup(key, *def, l);
    return *def;
  }
  std::string p = s.key_path(l.key);
  const Json& v = *l.value;
  std::string expected = "an integer >= " + std::to_string(min_value);
  if (!v.is_number() || (v.is_number_float() && !whole_floats)) c.fail(p, v, expected);
  int64_t n = to_int(c, p, v, BoolAsInt::kReject);
  if (n < min_value) c.fail(p, v, expected);
  s.put_lookup(key, n, l);
  return n;
}

std::string read_warmup_type(Ctx& c, Section& s, const std::string& def) {
  Section::Lookup l = s.take("warmup_type");
  std::string t = def;
  if (l.present()) {
    if (!l.value->is_string()) c.fail(s.key_path(l.key), *l.value, "\"log\" or \"linear\"");
    t = l.value->get<std::string>();
    if (t != "log" && t != "linear") {
      c.warn(s.key_path(l.key), "\"" + t + "\" is not \"log\" or \"linear\"; using \"log\" (as DeepSpeed does)");
      t = "log";
    }
  }
  s.put_lookup("warmup_type", t, l);
  return t;
}

bool read_switch(Ctx& c, Section& s, const char* key, bool def) {
  Section::Lookup l = s.take(key);
  bool v = def;
  if (l.present()) v = to_bool_strict(c, s.key_path(l.key), *l.value);
  s.put_lookup(key, v, l);
  return v;
}

// The reading rules of sched_keys.h (one type each, so that a key's rule picks its reader) and the
// defaults that are not values.
struct Groups {};
struct Real {};
struct PositiveReal {};
struct AnyReal {};
struct Count {};
struct StepCount {};
struct TotalSteps {};
struct Switch {};
struct WarmupType {};
struct SecondStepSize {};
struct SecondStairCount {};
struct Required {};
struct OptimizerLr {};
constexpr Groups kGroups;
constexpr Real kReal;
constexpr PositiveReal kPositiveReal;
constexpr AnyReal kAnyReal;
constexpr Count kCount;
constexpr StepCount kStepCount;
constexpr TotalSteps kTotalSteps;
constexpr Switch kSwitch;
constexpr WarmupType kWarmupType;
constexpr SecondStepSize kSecondStepSize;
constexpr SecondStairCount kSecondStairCount;
constexpr Required kRequired;
constexpr OptimizerLr kOptimizerLr;

std::vector<double> read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, double def, Groups) {
  const std::vector<double> d{def};
  return read_group_values(c, s, key, &d);
}
std::vector<double> read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, Required, Groups) {
  return read_group_values(c, s, key, nullptr);
}
// WarmupLR's warmup_max_lr: each group's optimizer lr (DeepSpeed >= 0.17.2).
std::vector<double> read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, OptimizerLr, Groups) {
  std::vector<double> opt_lr;
  Json shown = nullptr;
  if (c.cfg.optimizer) {
    opt_lr.push_back(c.cfg.optimizer->lr);
    shown = c.cfg.optimizer->lr;
  }
  Section::Lookup peek = s.take(key);
  std::vector<double> v = read_group_values(c, s, key, &opt_lr, shown);
  if (!peek.present()) {
    c.record(s.key_path(key), peek.source, c.cfg.optimizer ? "default: the optimizer's lr" : "default: each param group's lr");
  }
  return v;
}
double read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, double def, Real) {
  return read_real(c, s, key, def, 0.0, false);
}
double read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, double def, PositiveReal) {
  return read_real(c, s, key, def, 0.0, true);
}
double read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, double def, AnyReal) {
  return read_real(c, s, key, def, -INFINITY, false);
}
int64_t read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, int64_t def, Count) {
  return read_count(c, s, key, def, 0);
}
int64_t read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, int64_t def, StepCount) {
  return read_count(c, s, key, def, 1);
}
int64_t read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, Required, TotalSteps) {
  return read_count(c, s, key, std::nullopt, 0, true);
}
bool read_sched(Ctx& c, Section& s, SchedulerConfig&, const char* key, bool def, Switch) {
  return read_switch(c, s, key, def);
}
std::string read_sched(Ctx& c, Section& s, SchedulerConfig&, const char*, const char* def, WarmupType) {
  return read_warmup_type(c, s, def);
}
// OneCycle's falling half: null or absent -> the rising half's value.
double read_sched(Ctx& c, Section& s, SchedulerConfig& r, const char* key, double def, SecondStepSize) {
  Section::Lookup l = s.take(key);
  if (l.present() && !l.value->is_null()) return read_real(c, s, key, def, 0.0, false);
  s.put(key, nullptr, l.source, "null -> cycle_first_step_size");
  return r.cycle_first_step_size;
}
int64_t read_sched(Ctx& c, Section& s, SchedulerConfig& r, const char* key, int64_t def, SecondStairCount) {
  Section::Lookup l = s.take(key);
  if (l.present() && !l.value->is_null()) return read_count(c, s, key, def, 0);
  s.put(key, nullptr, l.source, "null -> cycle_first_stair_count");
  return r.cycle_first_stair_count;
}

// The params of r.type, in sched_keys.h's order for that schedule.
void read_declared_params(Ctx& c, Section& s, SchedulerConfig& r) {
#define ZT_SCHED_KEY(name, rule, ...) constexpr auto kRuleOf_##name = rule;
#include "zerotrain/config/sched_keys.h"
#define ZT_SCHED_PARAM(schedule, name, def) \
  if (r.type == #schedule) r.name = read_sched(c, s, r, #name, def, kRuleOf_##name);
#include "zerotrain/config/sched_keys.h"
}

[[noreturn]] void fail_unknown_schedule(Ctx& c, const Json& t, const std::string& type) {
  const std::string five = "one of WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest (case-sensitive)";
  if (std::find(std::begin(kTorchSchedulers), std::end(kTorchSchedulers), type) != std::end(kTorchSchedulers)) {
    c.fail("scheduler.type", t, five, "torch scheduler `" + type + "` is not supported by zerotrain");
  }
  std::string near = nearest_key(type, {std::begin(kSchedules), std::end(kSchedules)});
  c.fail("scheduler.type", t, five + "; DeepSpeed does not recognize this LR scheduler either",
         near.empty() ? "" : "did you mean `" + near + "`?");
}

void read_params(Ctx& c, Section& ps, SchedulerConfig& r) {
  read_declared_params(c, ps, r);
  if ((r.type == "WarmupDecayLR" || r.type == "WarmupCosineLR") && r.total_num_steps < r.warmup_num_steps) {
    c.warn(ps.key_path("total_num_steps"), "smaller than warmup_num_steps; the schedule never leaves warm-up fully");
  }
  Section::Lookup li = ps.take("last_batch_iteration");
  if (li.present()) {
    int64_t v = to_int(c, ps.key_path(li.key), *li.value, BoolAsInt::kReject);
    if (v != -1) c.fail(ps.key_path(li.key), *li.value, "-1 (resuming a schedule comes from a checkpoint in zerotrain)");
  }
}

}  // namespace

void read_scheduler(Ctx& c, Section& top) {
  Section::Lookup l = top.take("scheduler");
  if (!l.present()) {
    c.record("scheduler", l.source, "no scheduler section: constant learning rate");
    return;
  }
  if (!l.value->is_object()) c.fail("scheduler", *l.value, "an object {\"type\": ..., \"params\": {...}}");
  Section s(c, l.value, "scheduler", Section::Kind::kLoose);
  Section::Lookup lt = s.take("type");
  Section::Lookup lp = s.take("params");
  s.finish();
  if (!lt.present() || lt.value->is_null()) {
    if (lp.present()) c.warn("scheduler.params", "ignored: the scheduler has no `type` (as in DeepSpeed)");
    c.record("scheduler", ConfigSource::kDefault, "no scheduler type: constant learning rate");
    return;
  }
  const Json& t = *lt.value;
  if (!t.is_string()) c.fail("scheduler.type", t, "a scheduler name (a string), e.g. \"WarmupLR\"");
  SchedulerConfig r;
  r.type = t.get<std::string>();
  if (std::find(std::begin(kSchedules), std::end(kSchedules), r.type) == std::end(kSchedules)) {
    fail_unknown_schedule(c, t, r.type);
  }
  c.cfg.resolved["scheduler"] = Json{{"type", r.type}};
  Json params_in = Json::object();
  if (lp.present()) {
    if (!lp.value->is_object()) c.fail("scheduler.params", *lp.value, "an object of scheduler parameters");
    params_in = *lp.value;
  } else {
    c.warn("scheduler.params", "missing (DeepSpeed would fail when building the scheduler); using the defaults");
  }
  Section ps(c, &params_in, "scheduler.params", Section::Kind::kStrict);
  read_params(c, ps, r);
  ps.finish();
  r.params = ps.out();
  c.cfg.resolved["scheduler"]["params"] = r.params;
  c.record("scheduler.type", ConfigSource::kFile);
  c.cfg.scheduler = r;
}

}  // namespace zt::cfg

namespace zt {
namespace {

// zerotrain has one parameter group: a per-group list must have one entry.
double one_group(const char* key, const std::vector<double>& v) {
  if (v.size() != 1)
    throw InputError(std::string("scheduler.params.") + key +
                     ": a list needs one entry per parameter group (zerotrain has 1), found " + std::to_string(v.size()));
  return v[0];
}

LrScheduleType schedule_type_named(const std::string& type) {
  if (type == "WarmupLR") return LrScheduleType::kWarmupLR;
  if (type == "WarmupDecayLR") return LrScheduleType::kWarmupDecayLR;
  if (type == "WarmupCosineLR") return LrScheduleType::kWarmupCosineLR;
  if (type == "LRRangeTest") return LrScheduleType::kLRRangeTest;
  return LrScheduleType::kOneCycle;  // the reader admits only the five names
}

// WarmupLR / WarmupDecayLR / WarmupCosineLR: N as used is max(2, warmup_num_steps).
void warmup_spec(const SchedulerConfig& r, LrScheduleSpec& s) {
  s.warmup_num_steps = std::max<int64_t>(2, r.warmup_num_steps);
  s.warmup_log = r.warmup_type != "linear";
  s.total_num_steps = static_cast<double>(r.total_num_steps);
  if (s.type == LrScheduleType::kWarmupCosineLR) {
    s.warmup_min_ratio = r.warmup_min_ratio;
    s.cos_min_ratio = r.cos_min_ratio;
    return;
  }
  s.warmup_min_lr = one_group("warmup_min_lr", r.warmup_min_lr);
  if (!r.warmup_max_lr.empty()) s.warmup_max_lr = one_group("warmup_max_lr", r.warmup_max_lr);
}

void range_test_spec(const SchedulerConfig& r, LrScheduleSpec& s) {
  s.range_min_lr = one_group("lr_range_test_min_lr", r.lr_range_test_min_lr);
  s.range_step_size = static_cast<double>(r.lr_range_test_step_size);
  s.range_step_rate = r.lr_range_test_step_rate;
  s.range_staircase = r.lr_range_test_staircase;
}

void one_cycle_spec(const SchedulerConfig& r, LrScheduleSpec& s) {
  s.cycle_min_lr = one_group("cycle_min_lr", r.cycle_min_lr);
  s.cycle_max_lr = one_group("cycle_max_lr", r.cycle_max_lr);
  s.decay_lr_rate = r.decay_lr_rate;
  s.cycle_first_step_size = r.cycle_first_step_size;
  s.cycle_second_step_size = r.cycle_second_step_size;
  s.cycle_first_stair_count = r.cycle_first_stair_count;
  s.cycle_second_stair_count = r.cycle_second_stair_count;
  s.decay_step_size = r.decay_step_size;
  s.cycle_momentum = r.cycle_momentum;
  s.cycle_min_mom = one_group("cycle_min_mom", r.cycle_min_mom);
  s.cycle_max_mom = one_group("cycle_max_mom", r.cycle_max_mom);
  s.decay_mom_rate = r.decay_mom_rate;
}

LrScheduleSpec spec_of(const SchedulerConfig& r) {
  LrScheduleSpec s;
  s.type = schedule_type_named(r.type);
  if (s.type == LrScheduleType::kLRRangeTest) range_test_spec(r, s);
  else if (s.type == LrScheduleType::kOneCycle) one_cycle_spec(r, s);
  else warmup_spec(r, s);
  return s;
}

}  // namespace

LrScheduleSpec lr_schedule_of(const DsConfig& cfg) {
  if (!cfg.scheduler) return LrScheduleSpec{};
  return spec_of(*cfg.scheduler);
}

LrScheduleSpec parse_lr_schedule(const std::string& type, const Json& params) {
  if (type.empty()) return LrScheduleSpec{};
  Json section = Json::object();
  section["type"] = type;
  section["params"] = params;
  Json doc = Json::object();
  doc["scheduler"] = section;
  const ConfigOptions opt;
  DsConfig cfg;
  cfg::Ctx c{"(scheduler arguments)", opt, cfg};
  cfg::Section top(c, &doc, "", cfg::Section::Kind::kLoose);
  cfg::read_scheduler(c, top);
  LrScheduleSpec s = spec_of(*cfg.scheduler);
  s.warnings = cfg.warnings;
  return s;
}

}  // namespace zt
