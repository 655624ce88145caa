// engine_micro_step.cpp — one micro-batch: each unit's forward after finish_param_sync, each
// unit's backward followed by start_grad_sync for the buckets it completes; and the step's
// statistics exchange (per-bucket squared norms + the loss).
#include <cstring>

#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

void ZeroEngine::micro_step(const Batch& batch) {
  Impl& e = *impl_;
  ZT_CHECK(e.micro >= 0, "micro_step after the accumulation boundary: call step() first");
  const int gas = opt_.gradient_accumulation_steps;
  const bool boundary = e.micro == gas - 1;
  e.cx.model.set_batch(batch);  // never captured: host checks, then tokens into fixed device buffers
  const auto body = [&] { e.micro_body(boundary); };
  // A timed step (set_timing after enable_cuda_graphs; train refuses the combination) reads
  // per-unit events on the host: it runs eagerly.
  const bool graph = e.graphs && !e.timer.times_micro_step(e.micro == 0);
  if (!graph || !e.graphs->run(e.graph_signature(batch, boundary), body)) body();
  e.micro = boundary ? -1 : e.micro + 1;  // -1: step() must run before the next micro-step
}

// Issues device work only (no host reads, no allocation): what a graph captures.
void ZeroEngine::Impl::micro_body(bool boundary) {
  const int gas = cx.opt.gradient_accumulation_steps;
  timer.micro_begin(micro == 0);
  for (int u = 0; u < cx.plan.num_units(); ++u) forward(u);
  timer.forward_done();
  // The loss slot holds the mean over the accumulation window.
  const TensorView loss(const_cast<float*>(cx.model.loss_device()), DType::F32, {1}, cx.dev.kind());
  zero_ops::accumulate(cx.compute, exchange.loss_slot(), loss, 1.0f / static_cast<float>(gas), micro == 0);
  const float dloss = static_cast<float>(scaler.scale() / gas);
  for (int u = cx.plan.num_units() - 1; u >= 0; --u) backward(u, boundary, dloss);
  timer.backward_done();
}

void ZeroEngine::Impl::forward(int u) {
  timer.unit_begin(u, false);
  param_sync->before(u);  // finish_param_sync
  cx.model.forward_unit(u);
  param_sync->after(u);
  timer.unit_end(u, false);
}

void ZeroEngine::Impl::backward(int u, bool boundary, float dloss) {
  const int pos = 2 * cx.plan.num_units() - 1 - u;
  timer.unit_begin(u, true);
  param_sync->before(pos);  // finish_param_sync
  for (int b : cx.plan.opens_at[u]) grad_sync.open(b);
  cx.model.backward_unit(u, dloss);
  for (int b : cx.plan.closes_at[u]) grad_sync.start(b, micro == 0, boundary);  // start_grad_sync
  param_sync->after(pos);
  timer.unit_end(u, true);
}

// Layout: [nb] doubles (squared norms), then the loss as a float in one more double slot;
// exchanged as 2·(nb+1) fp32 words so both backends move it as plain bytes.
StepExchange::StepExchange(EngineContext& cx) : cx_(cx) {
  const size_t slots = cx.plan.buckets.size() + 1;
  local_ = cx.dev.alloc(slots * sizeof(double), MemCategory::Workspace, true);
  all_ = cx.dev.alloc(slots * sizeof(double) * cx.world, MemCategory::Workspace, true);
  host_ = cx.dev.alloc_pinned_host(slots * sizeof(double) * cx.world);
  ready_ = cx.comm.create_event();
  host_ready_ = cx.dev.create_event();
}

TensorView StepExchange::loss_slot() const {
  return TensorView(local_.as<double>() + cx_.plan.buckets.size(), DType::F32, {1}, cx_.dev.kind());
}

void StepExchange::squared_norm(int b, const TensorView& grads) {
  double* out = local_.as<double>() + b;
  if (grads.numel() > 0) ops::squared_norm(cx_.compute, out, grads);
  else cx_.dev.memset_async(out, 0, sizeof(double), cx_.compute);
}

StepExchange::Totals StepExchange::exchange() {
  const size_t slots = cx_.plan.buckets.size() + 1;
  const int handoff = cx_.comm_waits_for_compute();
  cx_.comm_work([&] { cx_.comm.all_gather(local_.data(), all_.data(), slots * 2, DType::F32, "step stats"); });
  ready_->record(cx_.comm.stream());
  cx_.compute_waits(*ready_, Lane::Comm, handoff);  // nothing else on compute since the hand-off
  cx_.dev.memcpy_async(host_.data(), all_.data(), all_.bytes(), CopyKind::DeviceToHost, cx_.compute);
  host_ready_->record(cx_.compute);
  host_ready_->synchronize();
  // Same sums, same order, on every rank: ranks outer, buckets inner.
  Totals t;
  const double* all = host_.as<double>();
  for (int r = 0; r < cx_.world; ++r, all += slots) {
    for (size_t b = 0; b + 1 < slots; ++b) t.squared_norm += all[b];
    float loss;
    std::memcpy(&loss, all + slots - 1, sizeof(float));
    t.loss += loss;
  }
  return t;
}

}  // namespace zt
