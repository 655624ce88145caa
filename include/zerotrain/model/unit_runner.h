// unit_runner.h — the per-micro-step unit loop of model.h, with hooks around every unit.
//
// The engine attaches its stage logic to the hooks: gather/bind a unit's parameters
// (Model::unit_params) before its forward and backward, release them after, bind gradient
// storage before backward, hand finished gradients to the reduce buckets after backward.
// Hooks run on the host, in unit order, while the units' work is only enqueued on the stream.
#pragma once
#include <functional>

#include "zerotrain/model/model.h"

namespace zt {

struct UnitHooks {
  std::function<void(int unit)> before_forward, after_forward, before_backward, after_backward;
};

// set_batch must have been called. forward: units 0..U-1; backward: U-1..0 with `dloss`.
void run_forward(Model& model, const UnitHooks& hooks = {});
void run_backward(Model& model, float dloss, const UnitHooks& hooks = {});

}  // namespace zt
