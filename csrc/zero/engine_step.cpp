// engine_step.cpp — the optimizer step at the accumulation boundary: global norm from owned
// shards, overflow agreement, clip + unscale folded into the update, parameter all-gather.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/optim/clipping.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

// After the owned parameter ranges were written on the compute stream: make every rank's
// copy whole again (stages 1-2: all-gather per group; stage 3: refresh gathers).
void ZeroEngine::Impl::post_update_param_sync() {
  if (stage == 3) {
    mark_compute_for_comm();
    gatherer->refresh_after_update();
    return;
  }
  if (stage == 0) return;
  mark_compute_for_comm();
  size_t b = 0;
  for (size_t g = 0; g < ag_done.size(); ++g) {
    {
      CommGroup group(comm);
      for (; b < plan.buckets.size() && ag_group_of[b] == static_cast<int>(g); ++b) {
        const PlanBucket& bk = plan.buckets[b];
        char* base = static_cast<char*>(params.data()) + bk.flat_begin * static_cast<int64_t>(cs);
        comm.all_gather(base + rank * bk.slice * static_cast<int64_t>(cs), base, static_cast<size_t>(bk.slice),
                        opt.compute_dtype, "ag" + std::to_string(g) + ".b" + std::to_string(bk.id), nullptr);
      }
    }
    ag_done[g]->record(comm.stream());
    ag_waited[g] = false;
  }
  if (!opt.overlap_comm) {
    for (size_t g = 0; g < ag_done.size(); ++g) {
      compute.wait(*ag_done[g]);
      ag_waited[g] = true;
    }
  }
}

StepStats ZeroEngine::step() {
  Impl& e = *impl_;
  ZT_CHECK(e.micro == -1, "step() before gradient_accumulation_steps micro-steps ran");
  const size_t nb = plan_.buckets.size();
  const DType ct = opt_.compute_dtype;
  if (e.last_reduce_ptr) e.compute.wait(*e.last_reduce_ptr);  // in-order comm: covers every reduction

  // Squared norm of each bucket's owned, real gradient elements (padding excluded).
  auto grad_view = [&](const PlanBucket& b, int64_t skip, int64_t count) -> TensorView {
    if (e.stage == 0) return e.view(e.grads_full, e.grad_dtype, b.flat_begin + skip, count);
    if (e.stage == 1) return e.view(e.grads_full, e.grad_dtype, plan_.owned_flat_begin(b.id, e.rank) + skip, count);
    return e.view(e.grad_acc, opt_.grad_accum_dtype, b.shard_begin + skip, count);
  };
  const int64_t attempt = e.global_steps + 1;
  if (std::find(opt_.inject_overflow_at_steps.begin(), opt_.inject_overflow_at_steps.end(), attempt) !=
          opt_.inject_overflow_at_steps.end() &&
      attempt % e.world == e.rank) {
    for (const PlanBucket& b : plan_.buckets) {  // first bucket where this rank owns a real element
      if (e.rank * b.slice >= b.numel) continue;
      TensorView g = grad_view(b, e.stage == 0 ? e.rank * b.slice : 0, 1);
      uint32_t inf32 = 0x7f800000u;
      uint16_t inf16 = g.dtype == DType::BF16 ? 0x7f80 : 0x7c00;
      e.dev.memcpy_async(g.data, g.dtype == DType::F32 ? static_cast<const void*>(&inf32) : &inf16,
                         dtype_size(g.dtype), CopyKind::HostToDevice, e.compute);
      e.compute.synchronize();  // the host values above die with this scope
      break;
    }
  }
  double* stats = static_cast<double*>(e.stats_local.data());
  for (const PlanBucket& b : plan_.buckets) {
    int64_t lo = e.rank * b.slice;
    int64_t real = std::max<int64_t>(0, std::min(lo + b.slice, b.numel) - lo);
    int64_t skip = e.stage == 0 ? lo : 0;  // stage 0 holds the full bucket; norm our slice of it
    if (real > 0) ops::squared_norm(e.compute, stats + b.id, grad_view(b, skip, real));
    else e.dev.memset_async(stats + b.id, 0, sizeof(double), e.compute);
  }
  e.mark_compute_for_comm();
  e.comm.all_gather(e.stats_local.data(), e.stats_all.data(), (nb + 1) * 2, DType::F32, "step stats",
                    e.stats_ready.get());
  e.compute.wait(*e.stats_ready);
  e.dev.memcpy_async(e.stats_host.data(), e.stats_all.data(), (nb + 1) * sizeof(double) * static_cast<size_t>(e.world),
                     CopyKind::DeviceToHost, e.compute);
  e.host_ready->record(e.compute);
  e.host_ready->synchronize();

  // Same sums, same order, on every rank: ranks outer, buckets inner.
  const double* all = e.stats_host.as<double>();
  double sq = 0, loss = 0;
  for (int r = 0; r < e.world; ++r) {
    for (size_t b = 0; b < nb; ++b) sq += all[static_cast<size_t>(r) * (nb + 1) + b];
    float l;
    std::memcpy(&l, all + static_cast<size_t>(r) * (nb + 1) + nb, sizeof(float));
    loss += l;
  }
  StepStats st;
  st.loss = loss / e.world;
  st.loss_scale = e.scaler.scale();
  st.lr = e.sched->current().lr;
  const double post = e.post_factor();
  const double scaled_norm = std::sqrt(sq) * post;
  ZeroClip clip = zero_clip(scaled_norm, st.loss_scale, opt_.gradient_clipping);
  st.grad_norm = clip.unscaled_norm;
  st.clip_coefficient = clip.coefficient;
  st.skipped = opt_.check_overflow && !std::isfinite(scaled_norm);
  ++e.global_steps;
  st.step = e.global_steps;

  if (!st.skipped) {
    ++e.successful_steps;
    const float grad_scale = static_cast<float>(post * clip.grad_multiplier);
    const LrValues& lrv = e.sched->current();
    const bool adam = opt_.optimizer.kind == OptimizerKind::Adam;
    math::AdamParams ap{};
    optim::SgdParams sp{};
    if (adam) ap = adam_params_for_step(opt_.optimizer, e.successful_steps, lrv);
    else sp = sgd_params_for_step(opt_.optimizer, lrv);
    const int64_t chunk = std::max<int64_t>(1, opt_.sub_group_size);
    for (const PlanBucket& b : plan_.buckets) {
      const ZeroEngine::Impl::OwnedRange o = e.owned(b);
      const int64_t count = o.count, opt_off = o.master, dst = o.param;
      for (int64_t c = 0; c < count; c += chunk) {  // sub_group_size: elements per optimizer call
        int64_t n = std::min(chunk, count - c);
        TensorView p = e.view(e.master, opt_.master_dtype, opt_off + c, n);
        TensorView g = grad_view(b, c, n);
        TensorView out = e.view(e.params, ct, dst + c, n);
        if (adam) {
          ops::adam_step(e.compute, p, e.view(e.exp_avg, opt_.moments_dtype, opt_off + c, n),
                         e.view(e.exp_avg_sq, opt_.moments_dtype, opt_off + c, n), g, grad_scale, ap, out);
        } else {
          TensorView mom = e.exp_avg ? e.view(e.exp_avg, opt_.moments_dtype, opt_off + c, n) : TensorView();
          zero_ops::sgd_step(e.compute, p, mom, g, grad_scale, sp, e.successful_steps == 1, out);
        }
      }
    }
    e.sched->step();
  }
  e.scaler.update(st.skipped);  // may throw LossScaleAtMinimum (Zero flavor)

  if (e.stage <= 1) e.dev.memset_async(e.grads_full.data(), 0, e.grads_full.bytes(), e.compute);
  if (!st.skipped) e.post_update_param_sync();
  e.last_reduce_ptr = nullptr;
  e.micro = 0;
  return st;
}

}  // namespace zt
