// engine_step.cpp — the accumulation boundary, run as the step program's boundary ops:
// finish_grad_sync, the global norm and loss agreed by every rank, clip + unscale folded into the
// update, update_owned_shard, start_param_sync.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/optim/clipping.h"
#include "zerotrain/zero/engine_testing.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

// The step program's boundary ops, in order; on an overflow skip the update and the parameter
// sync (ops marked unless_skipped) are left out.
StepStats ZeroEngine::step() {
  Impl& e = *impl_;
  ZT_CHECK(e.micro == -1, "step() before gradient_accumulation_steps micro-steps ran");
  StepVerdict v;
  for (const StepOp& op : e.program.boundary) {
    if (op.unless_skipped && v.stats.skipped) continue;
    e.timer.before(op);
    e.run_boundary_op(op, v);
    e.timer.after(op);
    if (e.hooks.ran_op) e.hooks.ran_op(op);
  }
  e.micro = 0;
  if (e.graphs) e.graphs->step_done();
  StepStats out = v.stats;
  out.skipped_steps = e.global_steps - e.successful_steps;
  out.breakdown = e.timer.end_step(v.stats.step);  // nullopt unless timing is on
  return out;
}

void ZeroEngine::Impl::run_boundary_op(const StepOp& op, StepVerdict& v) {
  switch (op.kind) {
    case OpKind::FinishReduce:  // finish_grad_sync: every reduction has landed
      grad_sync.finish();
      if (hooks.before_grad_norm) hooks.before_grad_norm(global_steps + 1, owned_real_grads());
      return;
    case OpKind::StepStats: v = agree_on_step(); return;  // the same verdict on every rank
    case OpKind::Update:
      update_owned_shard(v.grad_scale);
      return sched->step();
    case OpKind::LossScale: return scaler.update(v.stats.skipped);  // may throw LossScaleAtMinimum (Zero flavor)
    case OpKind::ResetGrads: return grad_sync.reset_after_step();
    case OpKind::HandOff: return param_sync->hand_off();  // start_param_sync
    case OpKind::GatherGroup: return param_sync->gather_group(op.group);
    case OpKind::Regather: return param_sync->gather(op);
    default: throw std::logic_error(std::string("step program: '") + op_text(op) + "' at the boundary");
  }
}

// This rank's owned, real gradient elements per bucket (where the optimizer reads them: device
// memory, or the host shard with host_grads).
std::vector<TensorView> ZeroEngine::Impl::owned_real_grads() const {
  std::vector<TensorView> out;
  for (const PlanBucket& b : cx.plan.buckets)
    out.push_back(states.optimizer_grads().view(cx.plan.real_slice(b.id, cx.rank, cx.plan.optimizer_grads())));
  return out;
}

// Squared norm of each bucket's owned real gradient elements (padding excluded; at stage 0 each
// rank norms its slice of the full bucket), all-gathered with the loss; the clip coefficient and
// the overflow verdict follow from sums every rank computes in the same order.
StepVerdict ZeroEngine::Impl::agree_on_step() {
  const std::vector<TensorView> grads = owned_real_grads();
  if (cx.plan.host_grads) exchange.squared_norms_on_host(grads);
  else
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
  st.non_finite = !std::isfinite(scaled_norm) || !std::isfinite(st.loss);
  st.step = ++global_steps;
  v.grad_scale = static_cast<float>(post * clip.grad_multiplier);
  return v;
}

std::vector<OptimizerChunk> optimizer_chunks(const ZeroPlan& plan, int rank, int64_t sub_group_size) {
  ZT_CHECK(sub_group_size >= 1, "sub_group_size must be >= 1 element");
  const int64_t chunk = sub_group_size;
  std::vector<OptimizerChunk> out;
  for (const PlanBucket& b : plan.buckets) {
    const ElemRange m = plan.updated(b.id, rank, plan.flow.optimizer);
    const ElemRange g = plan.updated(b.id, rank, plan.optimizer_grads());
    const ElemRange p = plan.updated(b.id, rank, plan.flow.params);
    for (int64_t c = 0; c < m.count; c += chunk) {
      const int64_t n = std::min(chunk, m.count - c);
      out.push_back({m.sub(c, n), g.sub(c, n), p.sub(c, n)});
    }
  }
  return out;
}

std::vector<AdamChunk> optimizer_adam_chunks(const ZeroPlan& plan, int rank, int64_t sub_group_size) {
  std::vector<AdamChunk> out;
  for (const OptimizerChunk& c : optimizer_chunks(plan, rank, sub_group_size))
    out.push_back({c.master.begin, c.grads.begin, c.params.begin, c.master.count});
  return out;
}

OptimizerStep ZeroEngine::Impl::optimizer_step(float grad_scale) {
  const OptimizerHparams& h = cx.opt.optimizer;
  ++successful_steps;
  OptimizerStep s;
  s.kind = h.kind;
  const LrValues& now = sched->current();
  switch (h.kind) {
    case OptimizerKind::Adam: s.adam_params = adam_params_for_step(h, successful_steps, now); break;
    case OptimizerKind::SGD: s.sgd_params = sgd_params_for_step(h, now); break;
    case OptimizerKind::Lion: s.lion_params = lion_params_for_step(h, now); break;
    case OptimizerKind::Adagrad: s.adagrad_params = adagrad_params_for_step(h, successful_steps, now); break;
    case OptimizerKind::Lamb: s.lamb_params = lamb_params_for_step(h, successful_steps, now); break;
  }
  s.first_step = successful_steps == 1;
  s.grad_scale = grad_scale;
  return s;
}

// The optimizer over this rank's updated ranges; the updated values are also written, cast,
// into the compute-dtype parameters. AdamW: one ops::adam_step_multi over the whole chunk list
// (the CPU backend runs one adam_step per sub_group_size chunk, as before; the CUDA backend
// coalesces contiguous chunks into one multi-tensor launch). SGD, Lion, Adagrad: one call per
// chunk. LAMB: lamb_update (engine_lamb.cpp).
void ZeroEngine::Impl::update_owned_shard(float grad_scale) {
  const OptimizerStep step = optimizer_step(grad_scale);
  if (host_optimizer) return host_optimizer->update(step, lamb.get());
  if (step.kind == OptimizerKind::Lamb) return lamb_update(step);
  if (step.kind == OptimizerKind::Adam) {
    const std::vector<AdamChunk> chunks = optimizer_adam_chunks(cx.plan, cx.rank, cx.opt.sub_group_size);
    if (chunks.empty()) return;
    ops::adam_step_multi(cx.compute, states.master.view(), states.exp_avg.view(), states.exp_avg_sq.view(),
                         states.grads.view(), step.grad_scale, step.adam_params, states.params.view(), chunks);
    return;
  }
  for (const OptimizerChunk& c : optimizer_chunks(cx.plan, cx.rank, cx.opt.sub_group_size)) {
    const TensorView master = states.master.view(c.master), grad = states.grads.view(c.grads);
    const TensorView out = states.params.view(c.params);
    const TensorView m = states.exp_avg ? states.exp_avg.view(c.master) : TensorView();
    if (step.kind == OptimizerKind::SGD)
      zero_ops::sgd_step(cx.compute, master, m, grad, step.grad_scale, step.sgd_params, step.first_step, out);
    else if (step.kind == OptimizerKind::Lion)
      zero_ops::lion_step(cx.compute, master, m, grad, step.grad_scale, step.lion_params, out);
    else
      zero_ops::adagrad_step(cx.compute, master, m, grad, step.grad_scale, step.adagrad_params, out);
  }
}

}  // namespace zt
