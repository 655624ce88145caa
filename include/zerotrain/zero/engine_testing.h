// engine_testing.h — the engine's test seam. Production code never sets these hooks; tests use
// them to reach states no real input produces on demand (e.g. an overflow on one rank).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "zerotrain/core/tensor.h"

namespace zt {

class ZeroEngine;

struct EngineTestHooks {
  // In step(), after every gradient reduction has landed and before the norm: the optimizer-step
  // attempt (1-based) and this rank's owned, real (non-padding) gradient elements per bucket,
  // in the accumulation dtype, on the device. Writes must be complete (synchronised on the
  // compute stream) when the hook returns.
  std::function<void(int64_t attempt, const std::vector<TensorView>& owned_grads)> before_grad_norm;
};

void set_engine_test_hooks(ZeroEngine& engine, EngineTestHooks hooks);

}  // namespace zt
