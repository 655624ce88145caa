// engine_step.cpp — the accumulation boundary: finish_grad_sync, the global norm and loss agreed
// by every rank, clip + unscale folded into the update, update_owned_shard, start_param_sync.
#include <algorithm>
#include <cmath>

#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/optim/clipping.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

StepStats ZeroEngine::step() {
  Impl& e = *impl_;
  ZT_CHECK(e.micro == -1, "step() before gradient_accumulation_steps micro-steps ran");
  e.grad_sync.finish();                        // finish_grad_sync: every reduction has landed
  if (e.hooks.before_grad_norm) e.hooks.before_grad_norm(e.global_steps + 1, e.owned_real_grads());
  const StepVerdict v = e.agree_on_step();     // the same verdict on every rank
  const StepStats& st = v.stats;
  if (!st.skipped) {
    e.update_owned_shard(v.grad_scale);
    e.sched->step();
  }
  e.scaler.update(st.skipped);                 // may throw LossScaleAtMinimum (Zero flavor)
  e.grad_sync.reset_after_step();
  if (!st.skipped) e.param_sync->start();      // start_param_sync
  e.micro = 0;
  return st;
}

// This rank's owned, real gradient elements per bucket (where the optimizer reads them).
std::vector<TensorView> ZeroEngine::Impl::owned_real_grads() const {
  std::vector<TensorView> out;
  for (const PlanBucket& b : cx.plan.buckets)
    out.push_back(states.grads.view(cx.plan.real_slice(b.id, cx.rank, cx.plan.flow.grads)));
  return out;
}

// Squared norm of each bucket's owned real gradient elements (padding excluded; at stage 0 each
// rank norms its slice of the full bucket), all-gathered with the loss; the clip coefficient and
// the overflow verdict follow from sums every rank computes in the same order.
StepVerdict ZeroEngine::Impl::agree_on_step() {
  const std::vector<TensorView> grads = owned_real_grads();
  for (size_t b = 0; b < grads.size(); ++b) exchange.squared_norm(static_cast<int>(b), grads[b]);
  const StepExchange::Totals t = exchange.exchange();
  StepVerdict v;
  StepStats& st = v.stats;
  st.loss = t.loss / cx.world;
  st.loss_scale = scaler.scale();
  st.lr = sched->current().lr;
  const double post = cx.opt.prescale_gradients ? 1.0 : cx.opt.gradient_predivide_factor / cx.world;
  const double scaled_norm = std::sqrt(t.squared_norm) * post;
  const ZeroClip clip = zero_clip(scaled_norm, st.loss_scale, cx.opt.gradient_clipping);
  st.grad_norm = clip.unscaled_norm;
  st.clip_coefficient = clip.coefficient;
  st.skipped = cx.opt.check_overflow && !std::isfinite(scaled_norm);
  st.step = ++global_steps;
  v.grad_scale = static_cast<float>(post * clip.grad_multiplier);
  return v;
}

// AdamW (or SGD) over this rank's updated ranges, sub_group_size elements per kernel call; the
// updated values are also written, cast, into the compute-dtype parameters.
void ZeroEngine::Impl::update_owned_shard(float grad_scale) {
  const ZeroPlan& plan = cx.plan;
  const EngineOptions& o = cx.opt;
  ++successful_steps;
  const LrValues& lrv = sched->current();
  const bool adam = o.optimizer.kind == OptimizerKind::Adam;
  const math::AdamParams ap = adam ? adam_params_for_step(o.optimizer, successful_steps, lrv) : math::AdamParams{};
  const optim::SgdParams sp = adam ? optim::SgdParams{} : sgd_params_for_step(o.optimizer, lrv);
  const int64_t chunk = std::max<int64_t>(1, o.sub_group_size);
  for (const PlanBucket& b : plan.buckets) {
    const ElemRange m = plan.updated(b.id, cx.rank, plan.flow.optimizer);
    const ElemRange g = plan.updated(b.id, cx.rank, plan.flow.grads);
    const ElemRange p = plan.updated(b.id, cx.rank, plan.flow.params);
    for (int64_t c = 0; c < m.count; c += chunk) {  // sub_group_size: elements per optimizer call
      const int64_t n = std::min(chunk, m.count - c);
      const TensorView grad = states.grads.view(g.sub(c, n)), out = states.params.view(p.sub(c, n));
      if (adam) {
        ops::adam_step(cx.compute, states.master.view(m.sub(c, n)), states.exp_avg.view(m.sub(c, n)),
                       states.exp_avg_sq.view(m.sub(c, n)), grad, grad_scale, ap, out);
      } else {
        const TensorView mom = states.exp_avg ? states.exp_avg.view(m.sub(c, n)) : TensorView();
        zero_ops::sgd_step(cx.compute, states.master.view(m.sub(c, n)), mom, grad, grad_scale, sp,
                           successful_steps == 1, out);
      }
    }
  }
}

}  // namespace zt
