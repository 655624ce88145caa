// engine_offload.cpp — update_owned_shard with ZeRO-Offload: the owned master weights, moments
// and accumulated gradients (ModelStates::host_grads, filled during backward by grads_down,
// engine_grad_offload.cpp) live in host memory; per step, chunk by chunk (sub_group_size elements):
//   host:        CPU optimizer on chunk i (reading host_grads) -> compute-dtype params into host staging
//   copy stream: params(i) host staging -> device         (overlaps the CPU update of chunk i+1)
// Params staging slots (offload_optimizer.buffer_count) are reused only after their upload (h2d).
// The compute stream waits for the last upload before the parameter sync reads the params.
#include <algorithm>

#include "engine_impl.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/host_optim.h"
#include "zerotrain/zero/memory_predict.h"

namespace zt {

HostOptimizer::HostOptimizer(EngineContext& cx, ModelStates& st)
    : cx_(cx),
      st_(st),
      chunks_(optimizer_chunks(cx.plan, cx.rank, cx.opt.sub_group_size)),
      pool_(std::make_unique<cpu::HostThreadPool>(
          cx.opt.offload.host_threads > 0 ? cx.opt.offload.host_threads : cpu::default_host_threads())),
      isa_(cpu::active_isa()) {
  const OffloadSlots shape = offload_slots(cx.plan, cx.opt, cx.rank);
  const bool pinned = cx.opt.offload.pin_memory;
  for (int k = 0; k < shape.count; ++k)
    slots_.push_back({FlatBuffer::host(cx.dev, cx.plan.compute, shape.elems, MemCategory::HostStaging, pinned),
                      cx.dev.create_event()});
  for (int k = 0; k < shape.grad_count; ++k)
    grad_slots_.push_back({FlatBuffer::host(cx.dev, cx.plan.reduced_dtype(), shape.grad_elems, MemCategory::HostStaging,
                                            pinned),
                           cx.dev.create_event(), cx.dev.create_event()});
  copy_ = cx.dev.create_stream("offload copy");
  host_lane_ = cx.dev.create_stream("offload host");
  reduced_ = cx.comm.create_event();
  accumulated_ = cx.dev.create_event();
  uploads_done_ = cx.dev.create_event();
}

void HostOptimizer::drain() {
  copy_->synchronize();
  host_lane_->synchronize();
}

void HostOptimizer::upload_params(int i) {
  if (params_in_place()) return;  // offload_param: the CPU optimizer wrote the host shard itself
  const OptimizerChunk& c = chunks_[i];
  Slot& s = slots_[i % slots_.size()];
  timed_copy(st_.params.view(c.params), s.params.view({0, c.params.count}), CopyKind::HostToDevice,
             "params c" + std::to_string(i) + " up");
  s.h2d->record(*copy_);
  ++stats_.h2d_copies;
  stats_.h2d_bytes += static_cast<int64_t>(s.params.view({0, c.params.count}).nbytes());
}

void HostOptimizer::update(const OptimizerStep& step, LambNorms* lamb) {
  if (step.kind == OptimizerKind::Lamb) {
    ZT_CHECK(lamb != nullptr, "LAMB offload without its norms");
    return update_lamb(step, *lamb);
  }
  // host_grads is final (finish_grad_sync ran grads_landed).
  const int n = static_cast<int>(chunks_.size());
  for (int i = 0; i < n; ++i) {
    Slot& s = slots_[i % slots_.size()];
    s.h2d->synchronize();  // the params slot's previous upload has finished
    const OptimizerChunk& c = chunks_[i];
    const TensorView out = params_in_place() ? st_.params.view(c.params) : s.params.view({0, c.params.count});
    update_on_host(step, c, st_.host_grads.view(c.grads), out);
    ++stats_.chunks;
    upload_params(i);
  }
  uploads_done_->record(*copy_);
  cx_.compute_waits(*uploads_done_, Lane::Copy);
  report_copy_busy();
}

void HostOptimizer::timed_copy(const TensorView& dst, const TensorView& src, CopyKind kind, std::string name) {
  const bool timed = cx_.timer && cx_.timer->timing();
  if (timed) {
    while (static_cast<int>(brackets_.size()) < brackets_used_ + 2) brackets_.push_back(cx_.dev.create_event(true));
    brackets_[brackets_used_]->record(*copy_);
  }
  copy_view(cx_.dev, dst, src, *copy_, kind);
  if (timed) {
    brackets_[brackets_used_ + 1]->record(*copy_);
    brackets_used_ += 2;
    bracket_names_.push_back({std::move(name), kind, static_cast<uint64_t>(src.nbytes())});
  }
}

// Timed steps only: waits for the last copy bracketed so far (the compute stream waits on it
// anyway), then adds each copy's bracket to the step's copy_busy_ms.
void HostOptimizer::report_copy_busy() {
  if (brackets_used_ == 0) return;
  brackets_[brackets_used_ - 1]->synchronize();
  double ms = 0;
  for (int k = 0; k < brackets_used_; k += 2) {
    ms += brackets_[k + 1]->elapsed_ms_since(*brackets_[k]);
    const CopyName& c = bracket_names_[k / 2];
    cx_.timer->add_copy_slice(c.name, c.kind == CopyKind::DeviceToHost ? "d2h" : "h2d", c.bytes, *brackets_[k],
                              *brackets_[k + 1]);
  }
  brackets_used_ = 0;
  bracket_names_.clear();
  cx_.timer->add_copy_busy_ms(ms);
}

// The same per-element arithmetic as the device optimizer (math::adam_update, optim::sgd_update,
// lion_update, adagrad_update).
void HostOptimizer::update_on_host(const OptimizerStep& step, const OptimizerChunk& c, const TensorView& grads,
                                   const TensorView& params_out) {
  const TensorView master = st_.master.view(c.master);
  const TensorView m = st_.exp_avg ? st_.exp_avg.view(c.master) : TensorView();
  switch (step.kind) {
    case OptimizerKind::Adam:
      host_optim::adam_step(*pool_, isa_, master, m, st_.exp_avg_sq.view(c.master), grads, step.grad_scale,
                            step.adam_params, params_out);
      break;
    case OptimizerKind::SGD:
      host_optim::sgd_step(*pool_, master, m, grads, step.grad_scale, step.sgd_params, step.first_step, params_out);
      break;
    case OptimizerKind::Lion:
      host_optim::lion_step(*pool_, isa_, master, m, grads, step.grad_scale, step.lion_params, params_out);
      break;
    case OptimizerKind::Adagrad:
      host_optim::adagrad_step(*pool_, isa_, master, m, grads, step.grad_scale, step.adagrad_params, params_out);
      break;
    case OptimizerKind::Lamb: ZT_CHECK(false, "LAMB runs through update_lamb");
  }
}

// Initialisation / loading: master (host) -> compute-dtype params, through the staging slots.
void HostOptimizer::upload_params_from_master() {
  for (int i = 0; i < static_cast<int>(chunks_.size()); ++i) {
    Slot& s = slots_[i % slots_.size()];
    s.h2d->synchronize();
    const OptimizerChunk& c = chunks_[i];
    const TensorView out = params_in_place() ? st_.params.view(c.params) : s.params.view({0, c.params.count});
    cpu_ops::cast(out, st_.master.view(c.master));
    upload_params(i);
  }
  uploads_done_->record(*copy_);
  cx_.compute_waits(*uploads_done_, Lane::Copy);
}

}  // namespace zt
