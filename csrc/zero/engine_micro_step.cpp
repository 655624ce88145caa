// engine_micro_step.cpp — the step program's executor for one micro-batch: the micro-step kind's
// ops (step_program.h), in order, each a one-line call into a part (ParamSync, GradSync, the
// model, StepExchange), bracketed by the step timer; and the step's statistics exchange
// (per-bucket squared norms + the loss).
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine_impl.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

void ZeroEngine::micro_step(const Batch& batch) {
  Impl& e = *impl_;
  ZT_CHECK(e.micro >= 0, "micro_step after the accumulation boundary: call step() first");
  const MicroStep& m = e.program.micro(e.micro);
  e.cx.model.set_batch(batch);  // never captured: host checks, then tokens into fixed device buffers
  const auto body = [&] { e.micro_body(m); };
  // A timed step (set_timing after enable_cuda_graphs; train refuses the combination) reads
  // per-unit events on the host: it runs eagerly.
  const bool graph = e.graphs && !e.timer.times_micro_step(m.first);
  if (!graph || !e.graphs->run(e.graph_signature(batch, m.last), body)) body();
  e.micro = m.last ? -1 : e.micro + 1;  // -1: step() must run before the next micro-step
}

// Issues device work only (no host reads, no allocation): what a graph captures.
void ZeroEngine::Impl::micro_body(const MicroStep& m) {
  const float dloss = static_cast<float>(scaler.scale() / cx.opt.gradient_accumulation_steps);
  timer.micro_begin(m.first);
  for (const StepOp& op : m.ops) {
    timer.before(op);
    run_micro_op(op, m.first, dloss);
    timer.after(op);
    if (hooks.ran_op) hooks.ran_op(op);
  }
  timer.micro_end();
}

void ZeroEngine::Impl::run_micro_op(const StepOp& op, bool first, float dloss) {
  switch (op.kind) {
    case OpKind::Gather: return param_sync->gather(op);
    case OpKind::Wait: return param_sync->wait(op.bucket >= 0 ? op.bucket : op.group);
    case OpKind::Prefetch: return param_sync->gather(op);
    case OpKind::Forward:
      param_sync->bind(cx.plan.position_of(op.unit, false));
      return cx.model.forward_unit(op.unit);
    case OpKind::Loss: {  // the loss slot holds the mean over the accumulation window
      const TensorView loss(const_cast<float*>(cx.model.loss_device()), DType::F32, {1}, cx.dev.kind());
      const float mean = 1.0f / static_cast<float>(cx.opt.gradient_accumulation_steps);
      return zero_ops::accumulate(cx.compute, exchange.loss_slot(), loss, mean, first);
    }
    case OpKind::Open: return grad_sync.open(op.bucket);
    case OpKind::Backward:
      param_sync->bind(cx.plan.position_of(op.unit, true));
      return cx.model.backward_unit(op.unit, dloss);
    case OpKind::Close: return grad_sync.close(op.bucket);
    case OpKind::Reduce: return grad_sync.reduce(op.bucket, first);  // start_grad_sync
    case OpKind::Offload: return grad_sync.offload(op.bucket, first);
    case OpKind::Release: return param_sync->release(op.bucket);
    default: throw std::logic_error(std::string("step program: '") + op_text(op) + "' inside a micro-step");
  }
}

double ZeroEngine::eval_loss(const Batch& batch) {
  Impl& e = *impl_;
  ZT_CHECK(e.micro == 0, "eval_loss inside an accumulation window: call it after step()");
  e.cx.model.set_batch(batch);
  return e.run_eval(e.eval);
}

// The evaluation's ops (eval_program): the parameter ops and the forwards as in a micro-step, the
// loss read back to the host instead of accumulated into the step statistics.
float ZeroEngine::Impl::run_eval(const std::vector<StepOp>& ops) {
  float loss = 0;
  for (const StepOp& op : ops) {
    switch (op.kind) {
      case OpKind::Gather: param_sync->gather(op); break;
      case OpKind::Wait: param_sync->wait(op.bucket >= 0 ? op.bucket : op.group); break;
      case OpKind::Forward:
        param_sync->bind_unit(op.unit);
        cx.model.forward_unit(op.unit);
        break;
      case OpKind::Release: param_sync->release(op.bucket); break;
      case OpKind::Loss:
        cx.dev.memcpy_async(&loss, cx.model.loss_device(), sizeof(float), CopyKind::DeviceToHost, cx.compute);
        cx.compute.synchronize();
        break;
      default: throw std::logic_error(std::string("eval program: '") + op_text(op) + "' in a forward-only evaluation");
    }
  }
  return loss;
}

StepExchange::StepExchange(EngineContext& cx) : cx_(cx) {
  const size_t slots = static_cast<size_t>(cx.plan.step_stats().slots);
  local_ = cx.dev.alloc(slots * sizeof(double), MemCategory::Workspace, true);
  all_ = cx.dev.alloc(slots * sizeof(double) * cx.world, MemCategory::Workspace, true);
  host_ = cx.dev.alloc_pinned_host(slots * sizeof(double) * cx.world);
  ready_ = cx.comm.create_event();
  host_ready_ = cx.dev.create_event();
}

TensorView StepExchange::loss_slot() const {
  return TensorView(local_.as<double>() + cx_.plan.step_stats().loss_slot(), DType::F32, {1}, cx_.dev.kind());
}

void StepExchange::squared_norm(int b, const TensorView& grads) {
  double* out = local_.as<double>() + b;
  if (grads.numel() > 0) ops::squared_norm(cx_.compute, out, grads);
  else cx_.dev.memset_async(out, 0, sizeof(double), cx_.compute);
}

void StepExchange::squared_norms_on_host(const std::vector<TensorView>& grads) {
  double* norms = host_.as<double>();  // free until exchange() copies the gathered slots into it
  for (size_t b = 0; b < grads.size(); ++b) {
    norms[b] = 0;
    if (grads[b].numel() > 0) cpu_ops::squared_norm(norms + b, grads[b]);
  }
  cx_.dev.memcpy_async(local_.data(), norms, grads.size() * sizeof(double), CopyKind::HostToDevice, cx_.compute);
}

StepExchange::Totals StepExchange::exchange() {
  const StepStatsLayout layout = cx_.plan.step_stats();
  const int handoff = cx_.comm_waits_for_compute();
  cx_.comm_work([&] {
    cx_.comm.all_gather(local_.data(), all_.data(), static_cast<size_t>(layout.words()), DType::F32,
                        CollectiveLabel{CollectiveLabel::Kind::StepStats}.to_string());
  });
  ready_->record(cx_.comm.stream());
  cx_.compute_waits(*ready_, Lane::Comm, handoff);  // nothing else on compute since the hand-off
  cx_.dev.memcpy_async(host_.data(), all_.data(), all_.bytes(), CopyKind::DeviceToHost, cx_.compute);
  host_ready_->record(cx_.compute);
  host_ready_->synchronize();
  // Same sums, same order, on every rank: ranks outer, buckets inner.
  Totals t;
  const double* all = host_.as<double>();
  for (int r = 0; r < cx_.world; ++r, all += layout.slots) {
    for (int64_t b = 0; b < layout.loss_slot(); ++b) t.squared_norm += all[b];
    float loss;
    std::memcpy(&loss, all + layout.loss_slot(), sizeof(float));
    t.loss += loss;
  }
  return t;
}

}  // namespace zt
