// engine.cpp — ZeroEngine set-up: the plan from the options, the start-up schedule check, the
// model states each stage keeps, the parts that execute the schedule and the step program they run.
#include <algorithm>
#include <cstring>

#include "engine_impl.h"
#include "zerotrain/zero/memory_predict.h"

namespace zt {

ModelStates::ModelStates(const EngineContext& cx) {
  const ZeroPlan& plan = cx.plan;
  const EngineOptions& o = cx.opt;
  params = o.offload.params
               ? FlatBuffer::host(cx.dev, plan.compute, plan.numel_in(plan.flow.params), MemCategory::HostParams,
                                  o.offload.param_pin_memory)
               : FlatBuffer(cx.dev, plan.compute, plan.numel_in(plan.flow.params), MemCategory::Params);
  // With host_grads, stages 2-3 keep no device accumulator (the reduced slices go to host_grads);
  // stage 1 keeps its unpartitioned buffer, which backward writes.
  if (!plan.host_grads || plan.flow.grads == Layout::Full)
    grads = FlatBuffer(cx.dev, plan.grad_dtype, plan.numel_in(plan.flow.grads), MemCategory::Grads);
  if (plan.host_grads)
    host_grads = FlatBuffer::host(cx.dev, plan.grad_dtype, plan.shard_numel, MemCategory::HostGrads, o.offload.pin_memory);
  if (plan.staged_grads)
    for (const ParamSpec& p : cx.model.params()) staged.emplace_back(cx.dev, plan.compute, p.numel, MemCategory::Grads);
  const int64_t n = plan.numel_in(plan.flow.optimizer);
  const bool host = o.offload.optimizer;
  auto optimizer_state = [&](DType t, MemCategory device_cat, MemCategory host_cat) {
    return host ? FlatBuffer::host(cx.dev, t, n, host_cat, o.offload.pin_memory) : FlatBuffer(cx.dev, t, n, device_cat);
  };
  master = optimizer_state(o.master_dtype, MemCategory::Master, MemCategory::HostMaster);
  const int moments = o.optimizer.moment_count();
  if (moments >= 1) exp_avg = optimizer_state(o.moments_dtype, MemCategory::OptimMoments, MemCategory::HostMoments);
  if (moments >= 2) exp_avg_sq = optimizer_state(o.moments_dtype, MemCategory::OptimMoments, MemCategory::HostMoments);
  if (o.optimizer.kind == OptimizerKind::Adagrad && o.optimizer.initial_accumulator_value != 0.0)
    fill_state(cx, exp_avg, static_cast<float>(o.optimizer.initial_accumulator_value));
}

// Every element of `buf` (padding included) = value, through a pageable host block of at most
// 1M elements (no tracked allocation).
void fill_state(const EngineContext& cx, FlatBuffer& buf, float value) {
  const int64_t n = buf.numel(), block = std::min<int64_t>(n, int64_t{1} << 20);
  if (n == 0) return;
  std::vector<float> f32(static_cast<size_t>(block), value);
  std::vector<uint8_t> host(static_cast<size_t>(block) * dtype_size(buf.dtype()));
  convert(f32.data(), DType::F32, host.data(), buf.dtype(), static_cast<size_t>(block));
  for (int64_t at = 0; at < n; at += block) {
    const int64_t k = std::min(block, n - at);
    const TensorView dst = buf.view({at, k});
    if (dst.device == DeviceKind::CPU) std::memcpy(dst.data, host.data(), dst.nbytes());
    else copy_view(cx.dev, dst, TensorView(host.data(), buf.dtype(), {k}), cx.compute, CopyKind::HostToDevice);
  }
  cx.compute.synchronize();  // the host block dies with this scope
}

ZeroEngine::Impl::Impl(ZeroEngine& o, Model& m, Device& d, Stream& c, Communicator& k, std::unique_ptr<LrSchedule> s)
    : timer(d, c, k, o.plan_),
      cx{o.plan_, o.opt_, m, d, c, k, k.rank(), k.world_size(), d.create_event(), &timer},
      states(cx),
      host_optimizer(o.opt_.offload.optimizer ? std::make_unique<HostOptimizer>(cx, states) : nullptr),
      grad_sync(cx, states, o.plan_.host_grads ? host_optimizer.get() : nullptr),
      param_sync(make_param_sync(cx, states)),
      lamb(o.opt_.optimizer.needs_param_norms() ? std::make_unique<LambNorms>(cx, states) : nullptr),
      exchange(cx),
      sched(std::move(s)),
      scaler(o.opt_.loss_scaler),
      program(step_program(o.plan_, o.opt_.gradient_accumulation_steps)),
      eval(eval_program(o.plan_)) {
  if (host_optimizer) timer.add_copy_lane();
}

ZeroEngine::ZeroEngine(Model& model, Device& dev, Stream& compute, Communicator& comm, const EngineOptions& opt,
                       std::unique_ptr<LrSchedule> schedule)
    : opt_(opt) {
  ZT_CHECK(opt_.gradient_accumulation_steps >= 1, "gradient_accumulation_steps >= 1");
  ZT_CHECK(!opt_.offload.optimizer || opt_.stage >= 1, "offload_optimizer needs ZeRO stage 1, 2 or 3");
  ZT_CHECK(!opt_.offload.params || (opt_.stage == 3 && opt_.offload.optimizer),
           "offload_param needs ZeRO stage 3 with offload_optimizer");
  // qgZ's two hops follow the nodes when the ranks are placed node by node; else one hop.
  const int nodes = comm.node().blocked ? comm.node().nodes : 1;
  plan_ = plan_for_model(model, opt_, comm.world_size(), nodes);  // memory_predict.h
  // One static schedule: every rank must hold the same plan, units and settings.
  comm.verify_same_across_ranks(plan_.hash(), "ZeRO bucket plan and unit order");
  impl_ = std::make_unique<Impl>(*this, model, dev, compute, comm, std::move(schedule));
}

ZeroEngine::~ZeroEngine() {
  if (impl_) {
    // A copy down may still read a ring region or wire slot (destroyed before host_optimizer).
    if (impl_->host_optimizer) impl_->host_optimizer->drain();
    impl_->cx.comm.synchronize();
    impl_->cx.compute.synchronize();
  }
}

const GatherStats& ZeroEngine::gather_stats() const { return impl_->param_sync->stats(); }

OffloadStats ZeroEngine::offload_stats() const {
  OffloadStats s = impl_->host_optimizer ? impl_->host_optimizer->stats() : OffloadStats{};
  s.param_stagings = impl_->param_sync->staged_slices();
  return s;
}

double ZeroEngine::current_lr() const { return impl_->sched->current().lr; }

void ZeroEngine::set_timing(TimingLevel level) { impl_->timer.set_level(level); }

std::vector<StepTimeline> ZeroEngine::take_timelines() { return impl_->timer.take_timelines(); }

void set_engine_test_hooks(ZeroEngine& engine, EngineTestHooks hooks) { engine.impl_->hooks = std::move(hooks); }

}  // namespace zt
