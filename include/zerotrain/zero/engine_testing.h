// engine_testing.h — the engine's test seam. Production code never sets these hooks; tests use
// them to reach states no real input produces on demand (e.g. an overflow on one rank).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/vector_path.h"
#include "zerotrain/zero/plan.h"
#include "zerotrain/zero/step_program.h"

namespace zt {

class ZeroEngine;

struct EngineTestHooks {
  // In step(), after every gradient reduction has landed and before the norm: the optimizer-step
  // attempt (1-based) and this rank's owned, real (non-padding) gradient elements per bucket,
  // in the accumulation dtype, on the device. Writes must be complete (synchronised on the
  // compute stream) when the hook returns.
  std::function<void(int64_t attempt, const std::vector<TensorView>& owned_grads)> before_grad_norm;
  // After each op of the step program the engine ran (step_program.h), micro-steps and boundary,
  // in order (an eagerly run micro-step; a replayed CUDA graph runs none on the host).
  std::function<void(const StepOp& op)> ran_op;
};

void set_engine_test_hooks(ZeroEngine& engine, EngineTestHooks hooks);

// The chunk list the engine's AdamW step passes to ops::adam_step_multi: rank's updated range of
// every bucket, cut into sub_group_size pieces, in bucket order, as (master/moments, grads,
// params) offsets in each buffer's layout (the stage's StageFlow). Exposed for tests.
std::vector<AdamChunk> optimizer_adam_chunks(const ZeroPlan& plan, int rank, int64_t sub_group_size);

}  // namespace zt
