// optim_inputs.h — the typed inputs of optim/ (optimizer hyper-parameters, LR schedule spec),
// read from the DeepSpeed `optimizer` and `scheduler` sections. optim/ never sees JSON.
//
// The readers follow DeepSpeed's kwargs semantics: an unknown parameter is an InputError naming
// its JSON path ("optimizer.params.lrr: unknown parameter for optimizer Adam"), a missing one takes
// DeepSpeed's default. load_ds_config() has already validated and resolved both sections;
// these readers turn the resolved params into what the optimizer and the schedule use.
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
