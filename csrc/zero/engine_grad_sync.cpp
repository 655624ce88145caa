// engine_grad_sync.cpp — start_grad_sync / finish_grad_sync: each bucket's gradients are
// reduced on the comm stream as soon as the backward that completes them was issued.
//   stage 0:    all-reduce the bucket in the full gradient buffer (at the boundary)
//   stage 1:    reduce-scatter it; the sum lands in this rank's slice of the full buffer (boundary)
//   stages 2-3: reduce-scatter the bucket's ring region every micro-step; the owned slice is added
//               into the shard accumulator on the comm stream, then the region is free again.
// qgZ (plan.quantized_grads_block > 0, stage 3): the reduce-scatter is quantized_reduce.h's two
// int4 all_to_all hops; its scratch is used only on the comm stream, in bucket order.
// offload_optimizer (plan.host_grads): the reduced slice is not accumulated on the device; the
// Offload op right after the Reduce takes it down into the host gradient shard
// (HostOptimizer::grads_down), and the region or slot it lives in is free once the copy is done.
// Ring (stages 2-3): one arena, bucket b at plan.ring_offset[b]; bucket b's `free` event is
// recorded on the comm stream after its accumulate, and opening b waits on the events of every
// bucket whose region overlaps b's (plan.ring_overlaps[b]) before zeroing it.
#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

GradSync::GradSync(EngineContext& cx, ModelStates& st, HostOptimizer* offload)
    : cx_(cx), st_(st), offload_(offload) {
  const ZeroPlan& plan = cx.plan;
  if (plan.ring_elems > 0) {
    ring_ = FlatBuffer(cx.dev, plan.compute, plan.ring_elems, MemCategory::Buckets);
    for (size_t b = 0; b < plan.buckets.size(); ++b) ring_free_.push_back(cx.comm.create_event());
  }
  for (int k = 0; k < plan.wire_slots; ++k)
    wire_.push_back({FlatBuffer(cx.dev, plan.wire, plan.wire_slot_elems, MemCategory::Buckets), cx.comm.create_event()});
  if (plan.flow.grads == Layout::Full)
    for (size_t b = 0; b < plan.buckets.size(); ++b) reduce_done_.push_back(cx.comm.create_event());
  if (plan.quantized_grads_block > 0) {  // collective: every rank builds its GradSync at the same point
    cx.comm.prepare_block(plan.qgz_local);
    qgz_ = FlatBuffer(cx.dev, DType::F32, quantized_reduce_sizes(qgz_shape(-1)).total(), MemCategory::Buckets);
    qgz_scratch_ = quantized_reduce_scratch(qgz_.view(), qgz_shape(-1));
  }
  bind_grads();
}

// Bucket b's qgZ reduce-scatter (b < 0: the widest slice, which sizes the scratch).
QuantizedReduceShape GradSync::qgz_shape(int b) const {
  const ZeroPlan& plan = cx_.plan;
  return {plan.qgz_local, plan.qgz_nodes(), b < 0 ? plan.max_slice() : plan.bucket(b).slice, plan.quantized_grads_block};
}

// Backward writes into the full gradient buffer (stages 0-1; in fp32 with plan.fp32_backward_grads),
// into per-parameter staging buffers, or (stages 2-3, contiguous) into the bucket's ring slot,
// bound when it opens.
void GradSync::bind_grads() {
  const ZeroPlan& plan = cx_.plan;
  cx_.model.set_grad_dtype(plan.fp32_backward_grads ? DType::F32 : plan.compute);
  for (int p = 0; p < static_cast<int>(plan.params.size()); ++p) {
    if (plan.staged_grads) cx_.model.bind_grad(p, st_.staged[p].view().data);
    else if (plan.flow.grads == Layout::Full) cx_.model.bind_grad(p, st_.grads.view(plan.param_range(p)).data);
  }
}

TensorView GradSync::ring_region(int b) const {
  return ring_.view({cx_.plan.ring_offset[b], cx_.plan.bucket(b).padded});
}

void GradSync::open(int b) {
  if (ring_free_.empty()) return;  // stages 0-1: gradients accumulate in place
  // Every earlier user of these bytes was a bucket in ring_overlaps[b]; its last reduction has
  // consumed them once its free event completed (never recorded yet: nothing to wait for).
  for (int j : cx_.plan.ring_overlaps[b]) cx_.compute_waits(*ring_free_[j], offload_ ? Lane::Copy : Lane::Comm);
  const TensorView bucket = ring_region(b);
  zero_view(cx_.dev, bucket, cx_.compute);
  if (cx_.plan.staged_grads) return;
  for (int p : cx_.plan.bucket(b).params)
    cx_.model.bind_grad(p, bucket.slice1d(cx_.plan.param_in_bucket(p).begin, cx_.plan.param(p).numel).data);
}

// The bucket's gradients as the buffer to reduce: staged per-parameter grads are added into
// the full buffer (stages 0-1) or copied into the ring slot (2-3), then zeroed for the next
// backward.
TensorView GradSync::gather_into_reduced(int b) {
  const ZeroPlan& plan = cx_.plan;
  const PlanBucket& bk = plan.bucket(b);
  const bool full = plan.flow.grads == Layout::Full;
  const TensorView dst = full ? st_.grads.view(plan.bucket_range(b)) : ring_region(b);
  if (plan.staged_grads) {
    for (int p : bk.params) {
      const TensorView staged = st_.staged[p].view();
      const TensorView into = dst.slice1d(plan.param_in_bucket(p).begin, staged.numel());
      if (full) zero_ops::accumulate(cx_.compute, into, staged, 1.0f, false);
      else copy_view(cx_.dev, into, staged, cx_.compute);
      zero_view(cx_.dev, staged, cx_.compute);
    }
  }
  return dst;
}

// communication_data_type differs from the reduced buffer: the collective runs on a cast copy
// in the next wire slot (reused only after its previous reduction was consumed).
TensorView GradSync::cast_to_wire(const TensorView& src, Slot*& ws) {
  if (wire_.empty()) return src;
  ws = &wire_[wire_next_];
  wire_next_ = (wire_next_ + 1) % static_cast<int>(wire_.size());
  cx_.compute_waits(*ws->free);
  const TensorView on_wire = ws->buf.view({0, src.numel()});
  ops::cast(cx_.compute, on_wire, src);
  return on_wire;
}

// Issues bucket b's collective on the comm stream. Returns this rank's reduced part of `on_wire`.
TensorView GradSync::collective(int b, const TensorView& on_wire) {
  const ZeroPlan& plan = cx_.plan;
  const std::string label = CollectiveLabel{CollectiveLabel::Kind::Grads, b}.to_string();
  if (plan.flow.all_reduce_grads) {
    all_reduce_view(cx_.comm, on_wire, label);
    return on_wire;
  }
  const TensorView reduced = rank_slice(on_wire, cx_.rank, cx_.world);
  if (plan.quantized_grads_block > 0)
    quantized_reduce_scatter(cx_.comm, cx_.comm.stream(), qgz_shape(b), on_wire, reduced, qgz_scratch_, b);
  else
    reduce_scatter_view(cx_.comm, on_wire, reduced, label);
  return reduced;
}

// Lands the reduced part in plan.flow.grads layout on stream `s`: in place, cast back from the
// wire slot, or accumulated into the shard accumulator (which host_grads replaces: there the
// rank's reduced slice stays where the collective left it). Returns where it lies.
TensorView GradSync::land(Stream& s, int b, const TensorView& src, const TensorView& reduced, bool first_micro) {
  const ZeroPlan& plan = cx_.plan;
  if (plan.host_grads && plan.flow.grads == Layout::Shard) return reduced;
  const TensorView dest = plan.flow.all_reduce_grads ? src : st_.grads.view(plan.slice(b, cx_.rank, plan.flow.grads));
  if (plan.flow.reduce_every_micro_step)
    zero_ops::accumulate(s, dest, reduced, 1.0f, first_micro);  // overwrite on the first micro-step
  else if (reduced.data != dest.data)
    ops::cast(s, dest, reduced);
  return dest;
}

// Stages 0-1 without overlap_comm: compute waits for each reduction at once, so the cast back
// from the wire slot runs there, on the rank's whole OpenMP team (the comm stream runs one).
bool GradSync::lands_on_compute(const Slot* ws) const {
  return ws != nullptr && !cx_.opt.overlap_comm && offload_ == nullptr && !cx_.plan.flow.reduce_every_micro_step;
}

Event& GradSync::consumed(int b) { return cx_.plan.flow.grads == Layout::Full ? *reduce_done_[b] : *ring_free_[b]; }

// Bucket b's reduction has been consumed once `s` reaches this point: its wire slot and region are
// free again, and without overlap_comm compute waits for that at once.
void GradSync::consumed_on(Stream& s, int b, Slot* ws, int handoff) {
  if (ws) ws->free->record(s);
  Event& done = consumed(b);
  done.record(s);
  last_ = &done;
  cx_.compute_waits_unless_overlap(done, handoff);
}

// Bucket b's gradients are complete and stay where they are until the boundary (stages 0-1
// before it: the program's Close op).
void GradSync::close(int b) { gather_into_reduced(b); }

// start_grad_sync: bucket b's gradients are complete on the compute stream (the Reduce op).
void GradSync::reduce(int b, bool first_micro) {
  const TensorView src = gather_into_reduced(b);
  const double pre = cx_.opt.prescale_gradients ? 1.0 / cx_.world : 1.0 / cx_.opt.gradient_predivide_factor;
  if (pre != 1.0) ops::scale(cx_.compute, src, static_cast<float>(pre));
  Slot* ws = nullptr;
  const TensorView on_wire = cast_to_wire(src, ws);
  const int handoff = cx_.comm_waits_for_compute();
  const bool on_compute = lands_on_compute(ws);
  TensorView reduced;
  cx_.comm_work([&] {
    reduced = collective(b, on_wire);
    if (!on_compute) reduced = land(cx_.comm.stream(), b, src, reduced, first_micro);
  });
  if (offload_) {
    pending_ = {b, reduced, ws, handoff};
    return;
  }
  // With on_compute the wire slot is recorded free before the cast back reads it: its next user,
  // cast_to_wire, writes it on the compute stream, after this cast.
  consumed_on(cx_.comm.stream(), b, ws, handoff);
  if (on_compute) land(cx_.compute, b, src, reduced, first_micro);
}

// The Offload op: the reduction the Reduce op just issued goes down into the host shard. Stage 1
// reduces once per step (the last micro-step), so its slice overwrites; stages 2-3 add from the
// second micro-step on.
void GradSync::offload(int b, bool first_micro) {
  ZT_CHECK(offload_ != nullptr && pending_.bucket == b,
           "step program: 'offload b" + std::to_string(b) + "' does not follow its reduce");
  const bool overwrite = first_micro || !cx_.plan.flow.reduce_every_micro_step;
  Stream& copy = offload_->grads_down(b, pending_.reduced, overwrite);
  consumed_on(copy, b, pending_.wire, pending_.handoff);
  pending_ = {};
}

// finish_grad_sync: the comm stream (or, with host_grads, the copy stream) completes in issue
// order, so the last event covers all; with host_grads the host shard is then made final.
void GradSync::finish() {
  if (last_) cx_.compute_waits(*last_, offload_ ? Lane::Copy : Lane::Comm);
  if (offload_) offload_->grads_landed();
}

void GradSync::reset_after_step() {
  if (cx_.plan.flow.grads == Layout::Full) zero_view(cx_.dev, st_.grads.view(), cx_.compute);
  last_ = nullptr;
}

}  // namespace zt
