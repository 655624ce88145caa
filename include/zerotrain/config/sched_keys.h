// sched_keys.h — every key of the DeepSpeed `scheduler` section, declared once. An X-macro list with
// no include guard, as config/optim_keys.h: a file defines ZT_SCHED_KEY, ZT_SCHED_SPECIAL and/or
// ZT_SCHED_PARAM, includes this file, and gets one expansion per entry (all three are #undef'd at the
// end; an undefined one expands to nothing). Expansions:
//   cfg_sched.cpp  the reader of `params` for each schedule: its ZT_SCHED_PARAM entries in list
//                  order, each read by its key's rule into SchedulerConfig's field of the same name
//   key_table.cpp  the rows of `zerotrain check-config --keys` / docs/config-keys.md: the
//                  ZT_SCHED_KEY and ZT_SCHED_SPECIAL entries, in list order
//
// ZT_SCHED_KEY(name, rule, use, why, probe, effects, context)
//   a key of scheduler.params and its reading rule (cfg_sched.cpp):
//     kGroups       a number or a per-param-group list of numbers
//     kReal         a finite number >= 0          kPositiveReal  a finite number > 0
//     kAnyReal      a finite number
//     kCount        an integer >= 0 (a JSON whole number)   kStepCount  an integer >= 1
//     kTotalSteps   an integer >= 0; a whole float such as 1e12 counts
//     kSwitch       true/false (or 0/1)           kWarmupType  "log" or "linear" (else "log", a warning)
//     kSecondStepSize / kSecondStairCount  as kReal / kCount; null: the first half's value
// ZT_SCHED_SPECIAL(path, use, why, probe, effects, context)
//   a key-table row only: read by hand in csrc/config/cfg_sched.cpp (the type; last_batch_iteration,
//   which every schedule accepts after its own keys).
// ZT_SCHED_PARAM(schedule, name, default)
//   schedule `schedule` reads `name`: the lists of one schedule keep DeepSpeed's parameter order (the
//   resolved document's). default: a sched_defaults constant or literal, kRequired (absent: an
//   error naming the schedule), or kOptimizerLr (each group's optimizer lr, WarmupLR's warmup_max_lr).
// use, why, probe, effects, context: the key table's columns (config/key_table.h). Steps count
// optimizer steps.

#ifndef ZT_SCHED_KEY
#define ZT_SCHED_KEY(name, rule, use, why, probe, effects, context)
#endif
#ifndef ZT_SCHED_SPECIAL
#define ZT_SCHED_SPECIAL(path, use, why, probe, effects, context)
#endif
#ifndef ZT_SCHED_PARAM
#define ZT_SCHED_PARAM(schedule, name, def)
#endif

ZT_SCHED_SPECIAL("scheduler.type", kImplemented, "the learning-rate schedule", "\"WarmupLR\"", "L", "")
ZT_SCHED_KEY(warmup_min_lr, kGroups, kImplemented, "lr at the start of warm-up", "0.0001", "L", kWarmupLR)
ZT_SCHED_KEY(warmup_max_lr, kGroups, kImplemented, "lr at the end of warm-up", "0.01", "L", kWarmupLR)
ZT_SCHED_KEY(warmup_num_steps, kStepCount, kImplemented, "warm-up length in steps", "2", "L", kWarmupLR)
ZT_SCHED_KEY(warmup_type, kWarmupType, kImplemented, "\"log\" or \"linear\" warm-up", "\"linear\"", "L", kWarmupLR)
ZT_SCHED_KEY(total_num_steps, kTotalSteps, kImplemented, "WarmupDecayLR / WarmupCosineLR: schedule length", "8",
             "=LrSchedule.WarmupDecayTrace", kDecayLR)
ZT_SCHED_KEY(warmup_min_ratio, kAnyReal, kImplemented, "WarmupCosineLR: start of warm-up as a share of lr", "0.5", "L",
             kCosineLR)
ZT_SCHED_KEY(cos_min_ratio, kAnyReal, kImplemented, "WarmupCosineLR: floor as a share of lr", "0.5",
             "=LrSchedule.WarmupCosineLinearTrace", kCosineLR)
ZT_SCHED_KEY(lr_range_test_min_lr, kGroups, kImplemented, "LRRangeTest: first lr", "0.01", "L", kRangeLR)
ZT_SCHED_KEY(lr_range_test_step_size, kStepCount, kImplemented, "LRRangeTest: steps per increase", "1", "L", kRangeLR)
ZT_SCHED_KEY(lr_range_test_step_rate, kAnyReal, kImplemented, "LRRangeTest: increase per step size", "100", "L", kRangeLR)
ZT_SCHED_KEY(lr_range_test_staircase, kSwitch, kImplemented, "LRRangeTest: step-wise increases", "true",
             "=LrSchedule.LrRangeTestTraces", kRangeLR)
ZT_SCHED_KEY(cycle_min_lr, kGroups, kImplemented, "OneCycle: lowest lr", "0.001", "L", kOneCycle)
ZT_SCHED_KEY(cycle_max_lr, kGroups, kImplemented, "OneCycle: highest lr", "0.05", "L", kOneCycle)
ZT_SCHED_KEY(decay_lr_rate, kReal, kImplemented, "OneCycle: lr decay after the cycle", "0.5",
             "=LrSchedule.OneCycleItem34And35", kOneCycle)
ZT_SCHED_KEY(cycle_first_step_size, kPositiveReal, kImplemented, "OneCycle: steps of the rising half", "1", "L", kOneCycle)
ZT_SCHED_KEY(cycle_second_step_size, kSecondStepSize, kImplemented, "OneCycle: steps of the falling half", "1",
             "=LrSchedule.OneCycleStairs", kOneCycle)
ZT_SCHED_KEY(cycle_first_stair_count, kCount, kImplemented, "OneCycle: stairs in the rising half", "1", "L", kOneCycle)
ZT_SCHED_KEY(cycle_second_stair_count, kSecondStairCount, kImplemented, "OneCycle: stairs in the falling half", "1",
             "=LrSchedule.OneCycleStairs", kOneCycle)
ZT_SCHED_KEY(decay_step_size, kReal, kImplemented, "OneCycle: steps per decay", "1", "=LrSchedule.OneCycleItem34And35",
             kOneCycle)
ZT_SCHED_KEY(cycle_momentum, kSwitch, kImplemented, "OneCycle: cycle Adam's beta1 against the lr", "false", "L", kOneCycle)
ZT_SCHED_KEY(cycle_min_mom, kGroups, kImplemented, "OneCycle: lowest beta1", "0.5", "L", kOneCycle)
ZT_SCHED_KEY(cycle_max_mom, kGroups, kImplemented, "OneCycle: highest beta1", "0.95", "L", kOneCycle)
ZT_SCHED_KEY(decay_mom_rate, kReal, kImplemented, "OneCycle: beta1 decay after the cycle", "0.5",
             "=LrSchedule.OneCycleItem34And35", kOneCycle)
ZT_SCHED_SPECIAL("scheduler.params.last_batch_iteration", kRejected,
                 "a schedule resumes from its checkpoint; only -1 (the beginning) is accepted", "3", "", kOneCycle)

ZT_SCHED_PARAM(WarmupLR, warmup_min_lr, sched_defaults::kWarmupMinLr)
ZT_SCHED_PARAM(WarmupLR, warmup_max_lr, kOptimizerLr)
ZT_SCHED_PARAM(WarmupLR, warmup_num_steps, sched_defaults::kWarmupNumSteps)
ZT_SCHED_PARAM(WarmupLR, warmup_type, "log")
ZT_SCHED_PARAM(WarmupDecayLR, warmup_min_lr, sched_defaults::kWarmupMinLr)
ZT_SCHED_PARAM(WarmupDecayLR, warmup_max_lr, sched_defaults::kWarmupDecayMaxLr)
ZT_SCHED_PARAM(WarmupDecayLR, warmup_num_steps, sched_defaults::kWarmupNumSteps)
ZT_SCHED_PARAM(WarmupDecayLR, warmup_type, "log")
ZT_SCHED_PARAM(WarmupDecayLR, total_num_steps, kRequired)
ZT_SCHED_PARAM(WarmupCosineLR, warmup_min_ratio, sched_defaults::kWarmupMinRatio)
ZT_SCHED_PARAM(WarmupCosineLR, cos_min_ratio, sched_defaults::kCosMinRatio)
ZT_SCHED_PARAM(WarmupCosineLR, warmup_num_steps, sched_defaults::kWarmupNumSteps)
ZT_SCHED_PARAM(WarmupCosineLR, warmup_type, "log")
ZT_SCHED_PARAM(WarmupCosineLR, total_num_steps, kRequired)
ZT_SCHED_PARAM(OneCycle, cycle_min_lr, kRequired)
ZT_SCHED_PARAM(OneCycle, cycle_max_lr, kRequired)
ZT_SCHED_PARAM(OneCycle, decay_lr_rate, 0.0)
ZT_SCHED_PARAM(OneCycle, cycle_first_step_size, sched_defaults::kCycleFirstStepSize)
ZT_SCHED_PARAM(OneCycle, cycle_second_step_size, 0.0)
ZT_SCHED_PARAM(OneCycle, cycle_first_stair_count, int64_t{0})
ZT_SCHED_PARAM(OneCycle, cycle_second_stair_count, int64_t{0})
ZT_SCHED_PARAM(OneCycle, decay_step_size, 0.0)
ZT_SCHED_PARAM(OneCycle, cycle_momentum, true)
ZT_SCHED_PARAM(OneCycle, cycle_min_mom, sched_defaults::kCycleMinMom)
ZT_SCHED_PARAM(OneCycle, cycle_max_mom, sched_defaults::kCycleMaxMom)
ZT_SCHED_PARAM(OneCycle, decay_mom_rate, 0.0)
ZT_SCHED_PARAM(LRRangeTest, lr_range_test_min_lr, sched_defaults::kLrRangeTestMinLr)
ZT_SCHED_PARAM(LRRangeTest, lr_range_test_step_size, sched_defaults::kLrRangeTestStepSize)
ZT_SCHED_PARAM(LRRangeTest, lr_range_test_step_rate, sched_defaults::kLrRangeTestStepRate)
ZT_SCHED_PARAM(LRRangeTest, lr_range_test_staircase, false)

#undef ZT_SCHED_KEY
#undef ZT_SCHED_SPECIAL
#undef ZT_SCHED_PARAM
