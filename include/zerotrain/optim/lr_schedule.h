// lr_schedule.h — DeepSpeed's five LR schedules (WarmupLR, WarmupDecayLR, WarmupCosineLR,
// OneCycle, LRRangeTest) with DeepSpeed's stepping semantics (docs/config.md §5). The
// parameters arrive typed (LrScheduleSpec); config/ reads them from the `scheduler` section.
//
// Stepping contract (t = last_batch_iteration):
//   construction: t = -1 and the optimizer's values become the construction values
//                 (lr = f(-1); OneCycle with momentum cycling: beta1 = cycle_min_mom, beta2 = 0.99);
//   step():       t += 1, then the optimizer's values become f(t).
// The engine calls step() once per SUCCESSFUL optimizer step (a step skipped for overflow does not
// advance the schedule). So optimizer step k uses current() as it stands before the k-th step():
// f(-1) for k = 1, f(k-2) for k >= 2; after k successful steps current().lr == f(k-1).
// All arithmetic is double; the engine casts to float when it builds AdamParams.
// zerotrain has one parameter group: DeepSpeed's per-group lists are accepted with length 1.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/optim/hparam_defaults.h"

namespace zt {

// Values the optimizer uses now. has_betas: the schedule overrides Adam's (beta1, beta2).
struct LrValues {
  double lr = 0.0;
  bool has_betas = false;
  double beta1 = 0.0, beta2 = 0.0;
};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string name() const = 0;        // DeepSpeed type name, "constant" if none
  virtual double lr_at(int64_t t) const = 0;   // f(t), t >= -1
  // Momentum cycling (OneCycle with cycle_momentum on an optimizer that has betas).
  virtual bool cycles_momentum() const { return false; }
  virtual double beta1_at(int64_t t) const { return 0.0; }  // only when cycles_momentum()

  int64_t last_batch_iteration() const { return t_; }
  const LrValues& current() const { return current_; }
  void step() { step_to(t_ + 1); }
  // DeepSpeed's step(batch_iteration): sets t and applies f(t). Also used to restore a checkpoint
  // (state_dict = {last_batch_iteration}).
  void step_to(int64_t t);
  // Warnings DeepSpeed would log (unknown warmup_type, momentum cycling disabled, T < N, …);
  // the caller prints them once on rank 0.
  const std::vector<std::string>& warnings() const { return warnings_; }

 protected:
  // Sets the construction values; called at the end of each derived constructor.
  void init_construction(const LrValues& values);
  std::vector<std::string> warnings_;

 private:
  int64_t t_ = -1;
  LrValues current_;
};

enum class LrScheduleType { kConstant, kWarmupLR, kWarmupDecayLR, kWarmupCosineLR, kLRRangeTest, kOneCycle };

// A schedule's parameters, validated, with DeepSpeed's defaults. Steps count optimizer steps.
// Fields not used by `type` keep their defaults.
struct LrScheduleSpec {
  LrScheduleType type = LrScheduleType::kConstant;  // kConstant: the optimizer's lr throughout
  std::vector<std::string> warnings;                // found while reading the params, in order
  // WarmupLR / WarmupDecayLR / WarmupCosineLR
  int64_t warmup_num_steps = sched_defaults::kWarmupNumSteps;  // N as used: max(2, configured value)
  bool warmup_log = true;                                   // false: linear warm-up
  // WarmupLR / WarmupDecayLR
  double warmup_min_lr = sched_defaults::kWarmupMinLr;
  std::optional<double> warmup_max_lr;              // nullopt: the optimizer's lr (WarmupLR only)
  // WarmupDecayLR / WarmupCosineLR
  double total_num_steps = 0;
  // WarmupCosineLR
  double warmup_min_ratio = sched_defaults::kWarmupMinRatio, cos_min_ratio = sched_defaults::kCosMinRatio;
  // LRRangeTest
  double range_min_lr = sched_defaults::kLrRangeTestMinLr;
  double range_step_size = sched_defaults::kLrRangeTestStepSize;  // steps, > 0
  double range_step_rate = sched_defaults::kLrRangeTestStepRate;
  bool range_staircase = false;
  // OneCycle (second_* already resolved: null -> first_*)
  double cycle_min_lr = 0, cycle_max_lr = 0, decay_lr_rate = 0;
  double cycle_first_step_size = sched_defaults::kCycleFirstStepSize;   // steps, > 0
  double cycle_second_step_size = sched_defaults::kCycleFirstStepSize;  // steps, >= 0
  int64_t cycle_first_stair_count = 0, cycle_second_stair_count = 0;   // >= 0
  double decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = sched_defaults::kCycleMinMom, cycle_max_mom = sched_defaults::kCycleMaxMom, decay_mom_rate = 0;
};

// Builds the schedule `spec` describes, at t = -1.
//   optimizer_lr: the optimizer's lr (the constant lr, WarmupLR's default max, WarmupCosineLR's base).
//   optimizer_has_betas: Adam/AdamW true, SGD false (OneCycle then disables momentum cycling, warning).
std::unique_ptr<LrSchedule> make_lr_schedule(const LrScheduleSpec& spec, double optimizer_lr,
                                             bool optimizer_has_betas);

}  // namespace zt
