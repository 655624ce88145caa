// engine.cpp — ZeroEngine set-up: buffers per stage, spans, start-up schedule check,
// parameter initialisation / loading / gathering.
#include <algorithm>
#include <cstring>

#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"

namespace zt {

std::vector<BucketSpan> bucket_spans(const ZeroPlan& plan, const std::vector<std::vector<int>>& unit_params) {
  std::vector<BucketSpan> spans(plan.buckets.size());
  for (int u = 0; u < static_cast<int>(unit_params.size()); ++u) {
    for (int p : unit_params[static_cast<size_t>(u)]) {
      BucketSpan& s = spans[static_cast<size_t>(plan.params[static_cast<size_t>(p)].bucket)];
      s.first_bwd_unit = std::max(s.first_bwd_unit, u);
      s.last_bwd_unit = s.last_bwd_unit < 0 ? u : std::min(s.last_bwd_unit, u);
    }
  }
  return spans;
}

namespace {
LossScaler make_scaler(const EngineOptions& o) { return LossScaler(o.loss_scaler); }
}  // namespace

ZeroEngine::Impl::Impl(ZeroEngine& o, Model& m, Device& d, Stream& c, Communicator& k, std::unique_ptr<LrSchedule> s)
    : owner(o), model(m), dev(d), compute(c), comm(k), opt(o.opt_), plan(o.plan_), sched(std::move(s)),
      scaler(make_scaler(o.opt_)) {}

TensorView ZeroEngine::Impl::view(const DeviceBuffer& b, DType t, int64_t offset, int64_t count) const {
  char* base = static_cast<char*>(b.data()) + offset * static_cast<int64_t>(dtype_size(t));
  return TensorView(base, t, {count}, b.pinned_host() ? DeviceKind::CPU : dev.kind());
}

void* ZeroEngine::Impl::param_ptr(int p) const {
  return static_cast<char*>(params.data()) + plan.params[static_cast<size_t>(p)].flat_begin * static_cast<int64_t>(cs);
}

void ZeroEngine::Impl::bind_all_params() {
  for (size_t p = 0; p < plan.params.size(); ++p) model.bind_param(static_cast<int>(p), param_ptr(static_cast<int>(p)));
}

void ZeroEngine::Impl::mark_compute_for_comm() {
  compute_mark->record(compute);
  comm.wait(*compute_mark);
}

double ZeroEngine::Impl::pre_factor() const {
  if (opt.prescale_gradients) return 1.0 / world;
  return opt.gradient_predivide_factor != 1.0 ? 1.0 / opt.gradient_predivide_factor : 1.0;
}
double ZeroEngine::Impl::post_factor() const {
  if (opt.prescale_gradients) return 1.0;
  return opt.gradient_predivide_factor / world;
}

ZeroEngine::ZeroEngine(Model& model, Device& dev, Stream& compute, Communicator& comm, const EngineOptions& opt,
                       std::unique_ptr<LrSchedule> schedule)
    : opt_(opt) {
  ZT_CHECK(opt_.stage >= 0 && opt_.stage <= 3, "ZeRO stage " + std::to_string(opt_.stage));
  ZT_CHECK(opt_.gradient_accumulation_steps >= 1, "gradient_accumulation_steps >= 1");
  const int world = comm.world_size();
  const int U = model.num_units();
  plan_ = make_zero_plan(model.params(), U, world, std::max<int64_t>(opt_.reduce_bucket_size, 1),
                         opt_.stage == 3 ? opt_.param_persistence_threshold : -1);
  impl_ = std::make_unique<Impl>(*this, model, dev, compute, comm, std::move(schedule));
  Impl& e = *impl_;
  e.rank = comm.rank();
  e.world = world;
  e.stage = opt_.stage;
  e.U = U;
  e.cs = dtype_size(opt_.compute_dtype);
  for (int u = 0; u < U; ++u) e.unit_params.push_back(model.unit_params(u));
  e.spans = bucket_spans(plan_, e.unit_params);
  e.open_at.assign(static_cast<size_t>(U), {});
  e.close_at.assign(static_cast<size_t>(U), {});
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    ZT_CHECK(e.spans[b].first_bwd_unit >= 0, "bucket " + std::to_string(b) + " is read by no unit");
    e.open_at[static_cast<size_t>(e.spans[b].first_bwd_unit)].push_back(static_cast<int>(b));
    e.close_at[static_cast<size_t>(e.spans[b].last_bwd_unit)].push_back(static_cast<int>(b));
  }

  // One static schedule: every rank must hold the same plan, units and settings.
  uint64_t h = plan_.hash();
  for (int u = 0; u < U; ++u)
    for (int p : e.unit_params[static_cast<size_t>(u)]) h = h * 1099511628211ull + static_cast<uint64_t>(p * 131 + u);
  h ^= static_cast<uint64_t>(opt_.stage) * 0x9e3779b97f4a7c15ull;
  comm.verify_same_across_ranks(h, "ZeRO bucket plan and unit order");

  const bool s3 = opt_.stage == 3;
  const DType ct = opt_.compute_dtype;
  e.params = dev.alloc((s3 ? plan_.shard_numel : plan_.padded_numel) * e.cs, MemCategory::Params, true);
  e.grad_dtype = opt_.stage <= 1 ? opt_.grad_accum_dtype : ct;
  e.staged_grads = !opt_.contiguous_gradients || (opt_.stage <= 1 && e.grad_dtype != ct);
  if (opt_.stage <= 1) {
    e.grads_full = dev.alloc(plan_.padded_numel * dtype_size(e.grad_dtype), MemCategory::Grads, true);
  } else {
    e.grad_acc = dev.alloc(plan_.shard_numel * dtype_size(opt_.grad_accum_dtype), MemCategory::Grads, true);
  }
  if (e.staged_grads) {
    for (const ParamSpec& p : model.params())
      e.param_grads.push_back(dev.alloc(static_cast<size_t>(p.numel) * e.cs, MemCategory::Grads, true));
  }
  e.opt_numel = opt_.stage == 0 ? plan_.padded_numel : plan_.shard_numel;
  e.master = dev.alloc(e.opt_numel * dtype_size(opt_.master_dtype), MemCategory::Master, true);
  const bool adam = opt_.optimizer.kind == OptimizerKind::Adam;
  const bool sgd_momentum = opt_.optimizer.kind == OptimizerKind::SGD && opt_.optimizer.momentum != 0.0;
  if (adam || sgd_momentum)
    e.exp_avg = dev.alloc(e.opt_numel * dtype_size(opt_.moments_dtype), MemCategory::OptimMoments, true);
  if (adam) e.exp_avg_sq = dev.alloc(e.opt_numel * dtype_size(opt_.moments_dtype), MemCategory::OptimMoments, true);

  // Bucket ring for stages 2-3: as many slots as buckets open at once during backward, plus one
  // so a new bucket never waits on the reduction of the one just closed.
  if (opt_.stage >= 2) {
    int open = 0, max_open = 0;
    for (int u = U - 1; u >= 0; --u) {
      open += static_cast<int>(e.open_at[static_cast<size_t>(u)].size());
      max_open = std::max(max_open, open);
      open -= static_cast<int>(e.close_at[static_cast<size_t>(u)].size());
    }
    for (const PlanBucket& b : plan_.buckets) e.ring_slot_elems = std::max(e.ring_slot_elems, b.padded);
    e.ring.resize(static_cast<size_t>(max_open + 1));
    for (auto& slot : e.ring) {
      slot.buf = dev.alloc(e.ring_slot_elems * e.cs, MemCategory::Buckets, true);
      slot.free = comm.create_event();
    }
    e.bucket_slot.assign(plan_.buckets.size(), -1);
  }
  // Wire slots: the reduced buffer is grads_full (stages 0-1, grad_dtype) or a ring slot (ct).
  if (opt_.wire_dtype != (opt_.stage <= 1 ? e.grad_dtype : ct)) {
    int64_t max_padded = 0;
    for (const PlanBucket& b : plan_.buckets) max_padded = std::max(max_padded, b.padded);
    e.wire.resize(2);
    for (auto& slot : e.wire) {
      slot.buf = dev.alloc(max_padded * dtype_size(opt_.wire_dtype), MemCategory::Buckets, true);
      slot.free = comm.create_event();
    }
  }
  for (size_t b = 0; b < plan_.buckets.size(); ++b) e.reduce_done.push_back(comm.create_event());
  e.compute_mark = dev.create_event();
  e.stats_ready = comm.create_event();
  e.host_ready = dev.create_event();
  const size_t nstats = plan_.buckets.size() + 1;
  e.stats_local = dev.alloc(nstats * sizeof(double), MemCategory::Workspace, true);
  e.stats_all = dev.alloc(nstats * sizeof(double) * static_cast<size_t>(world), MemCategory::Workspace, true);
  e.stats_host = dev.alloc_pinned_host(nstats * sizeof(double) * static_cast<size_t>(world));

  // Post-step all-gather groups (stages 1-2): consecutive buckets up to allgather_bucket_size.
  if (opt_.stage == 1 || opt_.stage == 2) {
    int64_t in_group = 0;
    for (const PlanBucket& b : plan_.buckets) {
      if (e.ag_done.empty() || (in_group > 0 && in_group + b.padded > opt_.allgather_bucket_size)) {
        e.ag_done.push_back(comm.create_event());
        in_group = 0;
      }
      in_group += b.padded;
      e.ag_group_of.push_back(static_cast<int>(e.ag_done.size()) - 1);
    }
    e.ag_waited.assign(e.ag_done.size(), true);
  }
  if (s3) {
    e.gatherer = std::make_unique<Stage3Gatherer>(e);
  } else {
    e.bind_all_params();
  }
  if (!e.staged_grads && opt_.stage <= 1) {
    for (size_t p = 0; p < plan_.params.size(); ++p)
      model.bind_grad(static_cast<int>(p), static_cast<char*>(e.grads_full.data()) +
                                                  plan_.params[p].flat_begin * static_cast<int64_t>(e.cs));
  } else if (e.staged_grads) {
    for (size_t p = 0; p < plan_.params.size(); ++p) model.bind_grad(static_cast<int>(p), e.param_grads[p].data());
  }
}

ZeroEngine::~ZeroEngine() {
  if (impl_) {
    impl_->comm.synchronize();
    impl_->compute.synchronize();
  }
}

const GatherStats& ZeroEngine::gather_stats() const {
  static const GatherStats kNone;
  return impl_->gatherer ? impl_->gatherer->stats() : kNone;
}

double ZeroEngine::current_lr() const { return impl_->sched->current().lr; }

// Host staging -> master (opt range). src(param, begin, count, out) writes count fp32 values of
// parameter `param` starting at element `begin`.
void ZeroEngine::Impl::fill_master(const std::function<void(int, int64_t, int64_t, float*)>& src) {
  std::vector<float> host(static_cast<size_t>(opt_numel), 0.0f);
  for (const PlanBucket& b : plan.buckets) {
    const OwnedRange o = owned(b);
    const int64_t region = o.flat, count = o.count, opt_off = o.master;
    for (int p : b.params) {
      const PlanParam& pp = plan.params[static_cast<size_t>(p)];
      int64_t lo = std::max(pp.flat_begin, region), hi = std::min(pp.flat_begin + pp.numel, region + count);
      if (hi > lo) src(p, lo - pp.flat_begin, hi - lo, host.data() + opt_off + (lo - region));
    }
  }
  DeviceBuffer staging = dev.alloc(host.size() * sizeof(float), MemCategory::Workspace);
  dev.memcpy_async(staging.data(), host.data(), host.size() * sizeof(float), CopyKind::HostToDevice, compute);
  if (opt_numel > 0) ops::cast(compute, view(master, opt.master_dtype, 0, opt_numel), view(staging, DType::F32, 0, opt_numel));
  compute.synchronize();  // host staging and `staging` die here
  write_owned_params_from_master();
}

void ZeroEngine::Impl::write_owned_params_from_master() {
  for (const PlanBucket& b : plan.buckets) {
    const OwnedRange o = owned(b);
    if (o.count == 0) continue;
    ops::cast(compute, view(params, opt.compute_dtype, o.param, o.count), view(master, opt.master_dtype, o.master, o.count));
  }
  post_update_param_sync();
}

void ZeroEngine::init_parameters(uint64_t seed) {
  const auto& specs = impl_->model.params();
  impl_->fill_master([&](int p, int64_t begin, int64_t count, float* out) {
    init_param_slice(seed, specs[static_cast<size_t>(p)], begin, count, out);
  });
}

void ZeroEngine::load_parameters(const ParamSliceSource& src) { impl_->fill_master(src); }

std::vector<std::vector<float>> ZeroEngine::gather_parameters(int root) {
  Impl& e = *impl_;
  const DType mt = opt_.master_dtype;
  DeviceBuffer full = e.dev.alloc(plan_.padded_numel * dtype_size(mt), MemCategory::Workspace, true);
  if (opt_.stage == 0) {
    if (plan_.padded_numel > 0) ops::cast(e.compute, e.view(full, mt, 0, plan_.padded_numel), e.view(e.master, mt, 0, plan_.padded_numel));
  } else {
    e.mark_compute_for_comm();  // the optimizer's writes to master are done
    for (const PlanBucket& b : plan_.buckets) {
      e.comm.all_gather(static_cast<char*>(e.master.data()) + b.shard_begin * static_cast<int64_t>(dtype_size(mt)),
                        static_cast<char*>(full.data()) + b.flat_begin * static_cast<int64_t>(dtype_size(mt)),
                        static_cast<size_t>(b.slice), mt, "save b" + std::to_string(b.id), nullptr);
    }
    e.comm.synchronize();
  }
  std::vector<std::vector<float>> out;
  if (e.rank != root) {
    e.compute.synchronize();
    return out;
  }
  DeviceBuffer f32 = e.dev.alloc(plan_.padded_numel * sizeof(float), MemCategory::Workspace);
  std::vector<float> host(static_cast<size_t>(plan_.padded_numel));
  if (plan_.padded_numel > 0) {
    ops::cast(e.compute, e.view(f32, DType::F32, 0, plan_.padded_numel), e.view(full, mt, 0, plan_.padded_numel));
    e.dev.memcpy_async(host.data(), f32.data(), host.size() * sizeof(float), CopyKind::DeviceToHost, e.compute);
  }
  e.compute.synchronize();
  for (const PlanParam& p : plan_.params)
    out.emplace_back(host.begin() + p.flat_begin, host.begin() + p.flat_begin + p.numel);
  return out;
}

}  // namespace zt
