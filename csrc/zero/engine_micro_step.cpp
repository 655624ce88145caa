// engine_micro_step.cpp — forward and backward of one micro-batch, and the gradient
// reductions each stage issues while backward runs.
#include <string>

#include "engine_impl.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

void ZeroEngine::Impl::forward_wait_allgather(int unit) {
  if (ag_done.empty()) return;
  for (int p : unit_params[static_cast<size_t>(unit)]) {
    int g = ag_group_of[static_cast<size_t>(plan.params[static_cast<size_t>(p)].bucket)];
    if (!ag_waited[static_cast<size_t>(g)]) {
      compute.wait(*ag_done[static_cast<size_t>(g)]);
      ag_waited[static_cast<size_t>(g)] = true;
    }
  }
}

// A bucket opens at the first backward that writes its gradients.
void ZeroEngine::Impl::open_bucket(int b) {
  if (stage <= 1) return;  // grads live in the full buffer (or per-parameter buffers)
  // Pick the next free ring slot; its previous reduction must have consumed it first.
  int slot = -1;
  for (size_t k = 0; k < ring.size(); ++k) {
    int cand = (ring_next + static_cast<int>(k)) % static_cast<int>(ring.size());
    if (ring[static_cast<size_t>(cand)].bucket < 0) { slot = cand; break; }
  }
  ZT_CHECK(slot >= 0, "bucket ring exhausted (plan/ring sizing bug)");
  ring_next = (slot + 1) % static_cast<int>(ring.size());
  RingSlot& rs = ring[static_cast<size_t>(slot)];
  rs.bucket = b;
  bucket_slot[static_cast<size_t>(b)] = slot;
  compute.wait(*rs.free);
  const PlanBucket& bk = plan.buckets[static_cast<size_t>(b)];
  dev.memset_async(rs.buf.data(), 0, static_cast<size_t>(bk.padded) * cs, compute);
  if (!staged_grads) {
    for (int p : bk.params)
      model.bind_grad(p, static_cast<char*>(rs.buf.data()) +
                             (plan.params[static_cast<size_t>(p)].flat_begin - bk.flat_begin) * static_cast<int64_t>(cs));
  }
}

// A bucket closes after the last backward that writes it: its gradients are complete.
void ZeroEngine::Impl::close_bucket(int b, bool boundary) {
  const PlanBucket& bk = plan.buckets[static_cast<size_t>(b)];
  const DType ct = opt.compute_dtype;
  const std::string label = "b" + std::to_string(b);
  // The buffer the bucket is reduced from: grads_full (stages 0-1) or its ring slot (2-3).
  RingSlot* rs = nullptr;
  TensorView src;
  if (stage <= 1) {
    if (staged_grads) {  // per-parameter compute-dtype grads -> the accumulation buffer
      for (int p : bk.params) {
        const PlanParam& pp = plan.params[static_cast<size_t>(p)];
        zero_ops::accumulate(compute, view(grads_full, grad_dtype, pp.flat_begin, pp.numel),
                             view(param_grads[static_cast<size_t>(p)], ct, 0, pp.numel), 1.0f, false);
        dev.memset_async(param_grads[static_cast<size_t>(p)].data(), 0, static_cast<size_t>(pp.numel) * cs, compute);
      }
    }
    if (!boundary) return;  // stages 0-1 reduce once, at the accumulation boundary
    src = view(grads_full, grad_dtype, bk.flat_begin, bk.padded);
  } else {
    rs = &ring[static_cast<size_t>(bucket_slot[static_cast<size_t>(b)])];
    if (staged_grads) {
      for (int p : bk.params) {
        const PlanParam& pp = plan.params[static_cast<size_t>(p)];
        dev.memcpy_async(static_cast<char*>(rs->buf.data()) + (pp.flat_begin - bk.flat_begin) * static_cast<int64_t>(cs),
                         param_grads[static_cast<size_t>(p)].data(), static_cast<size_t>(pp.numel) * cs,
                         CopyKind::DeviceToDevice, compute);
        dev.memset_async(param_grads[static_cast<size_t>(p)].data(), 0, static_cast<size_t>(pp.numel) * cs, compute);
      }
    }
    src = view(rs->buf, ct, 0, bk.padded);
  }
  if (pre_factor() != 1.0) ops::scale(compute, src, static_cast<float>(pre_factor()));
  // communication_data_type differs from the buffer: reduce a cast copy in a wire slot.
  RingSlot* ws = nullptr;
  TensorView comm_buf = src;
  if (!wire.empty()) {
    ws = &wire[static_cast<size_t>(wire_next)];
    wire_next = (wire_next + 1) % static_cast<int>(wire.size());
    compute.wait(*ws->free);
    comm_buf = view(ws->buf, opt.wire_dtype, 0, bk.padded);
    ops::cast(compute, comm_buf, src);
  }
  mark_compute_for_comm();
  char* base = static_cast<char*>(comm_buf.data);
  char* owned = base + rank * bk.slice * static_cast<int64_t>(dtype_size(comm_buf.dtype));
  TensorView owned_view(owned, comm_buf.dtype, {bk.slice}, comm_buf.device);
  if (stage == 0) {
    comm.all_reduce(base, base, static_cast<size_t>(bk.padded), comm_buf.dtype, ReduceOp::Sum, label, nullptr);
    if (ws) ops::cast(comm.stream(), src, comm_buf);
  } else if (stage == 1) {
    comm.reduce_scatter(base, owned, static_cast<size_t>(bk.slice), comm_buf.dtype, ReduceOp::Sum, label, nullptr);
    if (ws) ops::cast(comm.stream(), view(grads_full, grad_dtype, bk.flat_begin + rank * bk.slice, bk.slice), owned_view);
  } else {
    comm.reduce_scatter(base, owned, static_cast<size_t>(bk.slice), comm_buf.dtype, ReduceOp::Sum, label, nullptr);
    zero_ops::accumulate(comm.stream(), view(grad_acc, opt.grad_accum_dtype, bk.shard_begin, bk.slice), owned_view,
                         1.0f, micro == 0);  // overwrite on the first micro-step
  }
  if (ws) ws->free->record(comm.stream());
  Event* done;
  if (rs) {
    rs->free->record(comm.stream());
    rs->bucket = -1;
    bucket_slot[static_cast<size_t>(b)] = -1;
    done = rs->free.get();
  } else {
    done = reduce_done[static_cast<size_t>(b)].get();
    done->record(comm.stream());
  }
  last_reduce_ptr = done;
  if (!opt.overlap_comm) compute.wait(*done);
}

void ZeroEngine::micro_step(const Batch& batch) {
  Impl& e = *impl_;
  const int U = e.U;
  ZT_CHECK(e.micro >= 0, "micro_step after the accumulation boundary: call step() first");
  const bool boundary = e.micro == opt_.gradient_accumulation_steps - 1;
  e.model.set_batch(batch);
  for (int u = 0; u < U; ++u) {
    if (e.gatherer) e.gatherer->begin_position(u);
    else e.forward_wait_allgather(u);
    e.model.forward_unit(u);
    if (e.gatherer) e.gatherer->end_position(u);
  }
  // Loss accumulator: mean over the accumulation steps, in the last stats slot.
  TensorView loss_acc(static_cast<double*>(e.stats_local.data()) + plan_.buckets.size(), DType::F32, {1},
                      e.dev.kind());
  TensorView loss(const_cast<float*>(e.model.loss_device()), DType::F32, {1}, e.dev.kind());
  zero_ops::accumulate(e.compute, loss_acc, loss, 1.0f / static_cast<float>(opt_.gradient_accumulation_steps),
                       e.micro == 0);

  const float dloss = static_cast<float>(e.scaler.scale() / opt_.gradient_accumulation_steps);
  for (int u = U - 1; u >= 0; --u) {
    if (e.gatherer) e.gatherer->begin_position(2 * U - 1 - u);
    for (int b : e.open_at[static_cast<size_t>(u)]) e.open_bucket(b);
    e.model.backward_unit(u, dloss);
    for (int b : e.close_at[static_cast<size_t>(u)]) e.close_bucket(b, boundary);
    if (e.gatherer) e.gatherer->end_position(2 * U - 1 - u);
  }
  e.micro = boundary ? -1 : e.micro + 1;  // -1: step() must run before the next micro-step
}

}  // namespace zt
