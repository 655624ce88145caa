// engine_grad_offload.cpp — ZeRO-Offload's gradient path: each bucket's reduced slice leaves the
// device as soon as its reduction is done and accumulates in the host gradient shard
// (ModelStates::host_grads), so no device gradient accumulator exists.
//   comm stream:  reduce-scatter b ............ (reduced_ recorded)
//   copy stream:  wait reduced_, wait slot.free -> d2h reduced slice -> slot (slot.copied)
//                 [GradSync records b's "consumed" event here: its ring region / wire slot is free]
//   host lane:    wait slot.copied -> host_grads[b's slice] (+)= slot   (slot.free)
// Staging slots are reused round-robin, each only after its accumulation read it, so the copy of
// bucket b+1 overlaps the accumulation of bucket b. The host lane completes in issue order:
// grads_landed() waits for its last accumulation, after which the optimizer, the norms and the
// overflow check read host_grads.
#include "engine_impl.h"
#include "zerotrain/kernels/host_optim.h"

namespace zt {

Stream& HostOptimizer::grads_down(int b, const TensorView& reduced, bool overwrite) {
  ZT_CHECK(!grad_slots_.empty(), "gradient offload without staging slots");
  const ElemRange into = cx_.plan.slice(b, cx_.rank, Layout::Shard);
  ZT_CHECK(reduced.numel() == into.count && reduced.dtype == cx_.plan.reduced_dtype(),
           "gradient offload: bucket " + std::to_string(b) + " reduced slice " + reduced.shape_string() + " " +
               dtype_name(reduced.dtype) + ", expected " + std::to_string(into.count) + " " +
               dtype_name(cx_.plan.reduced_dtype()));
  reduced_->record(cx_.comm.stream());
  copy_->wait(*reduced_);
  GradSlot& s = grad_slots_[grad_next_];
  grad_next_ = (grad_next_ + 1) % static_cast<int>(grad_slots_.size());
  copy_->wait(*s.free);  // its previous accumulation has read it (never recorded yet: nothing to wait for)
  const TensorView staged = s.staged.view({0, into.count});
  timed_copy(staged, reduced, CopyKind::DeviceToHost, "grads b" + std::to_string(b) + " down");
  s.copied->record(*copy_);
  ++stats_.d2h_copies;
  stats_.d2h_bytes += static_cast<int64_t>(staged.nbytes());

  host_lane_->wait(*s.copied);
  const TensorView dst = st_.host_grads.view(into);
  host_lane_->enqueue_host([this, dst, staged, overwrite] { host_optim::accumulate(*pool_, isa_, dst, staged, overwrite); });
  s.free->record(*host_lane_);
  ++stats_.accumulations;
  return *copy_;
}

void HostOptimizer::grads_landed() {
  accumulated_->record(*host_lane_);
  accumulated_->synchronize();
  report_copy_busy();
}

}  // namespace zt
