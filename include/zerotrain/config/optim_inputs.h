// optim_inputs.h — the typed inputs of optim/ (optimizer hyper-parameters, LR schedule spec)
// from the DeepSpeed `optimizer` and `scheduler` sections. optim/ never sees JSON.
//
// load_ds_config() reads both sections once (csrc/config/cfg_optim.cpp, cfg_sched.cpp) and keeps
// the result typed; optimizer_of / lr_schedule_of hand it over with the checks DeepSpeed makes only
// when it builds the optimizer or the schedule (max_grad_norm, one parameter group).
// parse_optimizer / parse_lr_schedule run the same readers on a bare section (client optimizer
// flags, tests): DeepSpeed's kwargs semantics, so an unknown parameter is an InputError naming its
// JSON path and a missing one takes DeepSpeed's default.
#pragma once
#include <string>

#include "zerotrain/config/ds_config.h"
#include "zerotrain/config/hjson.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/optim/optimizer_hparams.h"

namespace zt {

// type: the `optimizer.type` string ("Adam"/"AdamW" case-insensitive, "SGD" case-sensitive);
// params: `optimizer.params` (null => all defaults). InputError for an unsupported type, an
// unknown or ill-typed parameter, amsgrad true, or max_grad_norm (DeepSpeed: use `gradient_clipping`).
OptimizerHparams parse_optimizer(const std::string& type, const Json& params);

// type: "" (no scheduler section) => constant; otherwise one of the five DeepSpeed names
// (case-sensitive); anything else => InputError "not supported". params: the `params` object
// (null => InputError for the five types, as DeepSpeed's TypeError); unknown keys => InputError.
LrScheduleSpec parse_lr_schedule(const std::string& type, const Json& params);

// The same for a resolved config. optimizer_of: needs cfg.optimizer (a config without one leaves
// the optimizer to the client: the trainer's flags).
OptimizerHparams optimizer_of(const DsConfig& cfg);
LrScheduleSpec lr_schedule_of(const DsConfig& cfg);  // kConstant when there is no scheduler

}  // namespace zt
