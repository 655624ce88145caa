// engine_lamb.cpp — LAMB on the sharded path: phase 1 updates the moments chunk by chunk, the
// per-parameter norms of the weights and of the update direction are agreed across ranks
// (LambNorms: one all-reduce at stages 1-3), phase 2 applies each parameter's trust ratio to
// its piece. Device-resident states run on the compute stream; offloaded ones on the host
// (HostOptimizer::update_lamb), with the same per-element arithmetic (optimizer_math.h).
#include <algorithm>
#include <cstring>

#include "engine_impl.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

LambNorms::LambNorms(EngineContext& cx, const ModelStates& st) : cx_(cx), st_(st) {
  const ZeroPlan& plan = cx.plan;
  for (const PlanPiece& pc : plan.pieces(cx.rank, PieceScope::Updated))
    pieces_.push_back({pc.param, pc.at(plan.flow.optimizer), pc.at(plan.flow.params)});
  const size_t n = 2 * plan.params.size();
  sq_ = cx.dev.alloc(n * sizeof(double), MemCategory::Workspace, true);
  if (plan.param_norms_all_reduce) wire_ = cx.dev.alloc(n * sizeof(float), MemCategory::Workspace, true);
  host_ = cx.dev.alloc_pinned_host(n * (sizeof(double) + sizeof(float)));
  ready_ = cx.comm.create_event();
  host_ready_ = cx.dev.create_event();
}

std::vector<float> LambNorms::ratios(const optim::LambParams& a, bool host) {
  const size_t P = cx_.plan.params.size();
  double* sq = host_.as<double>();
  float* words = reinterpret_cast<float*>(sq + 2 * P);
  if (P == 0) return {};
  std::fill(sq, sq + 2 * P, 0.0);
  if (host) {
    for (const Piece& k : pieces_) {
      const TensorView w = st_.master.view(k.master);
      cpu_ops::squared_norm(sq + 2 * k.param, w);
      cpu_ops::lamb_direction_sq_norm(sq + 2 * k.param + 1, w, st_.exp_avg.view(k.master), st_.exp_avg_sq.view(k.master), a);
    }
  } else {
    double* dev_sq = sq_.as<double>();
    cx_.dev.memset_async(dev_sq, 0, 2 * P * sizeof(double), cx_.compute);
    for (const Piece& k : pieces_) {
      const TensorView w = st_.master.view(k.master);
      ops::squared_norm(cx_.compute, dev_sq + 2 * k.param, w);
      zero_ops::lamb_direction_sq_norm(cx_.compute, dev_sq + 2 * k.param + 1, w, st_.exp_avg.view(k.master),
                                       st_.exp_avg_sq.view(k.master), a);
    }
    cx_.dev.memcpy_async(sq, dev_sq, 2 * P * sizeof(double), CopyKind::DeviceToHost, cx_.compute);
    host_ready_->record(cx_.compute);
    host_ready_->synchronize();
  }
  for (size_t i = 0; i < 2 * P; ++i) words[i] = static_cast<float>(sq[i]);
  if (wire_) {  // stages 1-3: each parameter's pieces live on several ranks
    float* w = wire_.as<float>();
    cx_.dev.memcpy_async(w, words, 2 * P * sizeof(float), CopyKind::HostToDevice, cx_.compute);
    const int handoff = cx_.comm_waits_for_compute();
    const std::string label = CollectiveLabel{CollectiveLabel::Kind::LambNorms}.to_string();
    cx_.comm_work([&] { cx_.comm.all_reduce(w, w, 2 * P, DType::F32, ReduceOp::Sum, label); });
    ready_->record(cx_.comm.stream());
    cx_.compute_waits(*ready_, Lane::Comm, handoff);
    cx_.dev.memcpy_async(words, w, 2 * P * sizeof(float), CopyKind::DeviceToHost, cx_.compute);
    host_ready_->record(cx_.compute);
    host_ready_->synchronize();
  }
  std::vector<float> out(P);
  for (size_t p = 0; p < P; ++p) out[p] = optim::lamb_ratio(words[2 * p], words[2 * p + 1], a);
  return out;
}

void ZeroEngine::Impl::lamb_update(const OptimizerStep& step) {
  const optim::LambParams& a = step.lamb_params;
  for (const OptimizerChunk& c : optimizer_chunks(cx.plan, cx.rank, cx.opt.sub_group_size))
    zero_ops::lamb_moments(cx.compute, states.exp_avg.view(c.master), states.exp_avg_sq.view(c.master),
                           states.grads.view(c.grads), step.grad_scale, a);
  const std::vector<float> ratio = lamb->ratios(a, false);
  for (const LambNorms::Piece& k : lamb->pieces())
    zero_ops::lamb_apply(cx.compute, states.master.view(k.master), states.exp_avg.view(k.master),
                         states.exp_avg_sq.view(k.master), ratio[k.param], a, states.params.view(k.params));
}

// Offloaded: every chunk's host gradients update the moments, then the ratios, then
// each chunk's pieces are applied into its params slot and uploaded.
void HostOptimizer::update_lamb(const OptimizerStep& step, LambNorms& lamb) {
  const optim::LambParams& a = step.lamb_params;
  const int n = static_cast<int>(chunks_.size());
  for (int i = 0; i < n; ++i) {
    const OptimizerChunk& c = chunks_[i];
    cpu_ops::lamb_moments(st_.exp_avg.view(c.master), st_.exp_avg_sq.view(c.master), st_.host_grads.view(c.grads),
                          step.grad_scale, a);
    ++stats_.chunks;
  }
  const std::vector<float> ratio = lamb.ratios(a, true);
  for (int i = 0; i < n; ++i) {
    Slot& s = slots_[i % slots_.size()];
    s.h2d->synchronize();  // the params slot's previous upload has finished
    const OptimizerChunk& c = chunks_[i];
    const TensorView whole = params_in_place() ? st_.params.view(c.params) : s.params.view({0, c.params.count});
    cpu_ops::cast(whole, st_.master.view(c.master));  // the alignment gaps: zero, as the master's
    for (const LambNorms::Piece& k : lamb.pieces()) {
      const ElemRange both = intersect(k.master, c.master);
      if (both.count == 0) continue;
      const ElemRange in_chunk{both.begin - c.master.begin, both.count};
      const TensorView out = params_in_place() ? st_.params.view(c.params.sub(in_chunk.begin, in_chunk.count))
                                               : s.params.view(in_chunk);
      cpu_ops::lamb_apply(st_.master.view(both), st_.exp_avg.view(both), st_.exp_avg_sq.view(both), ratio[k.param], a,
                          out);
    }
    upload_params(i);
  }
  uploads_done_->record(*copy_);
  cx_.compute_waits(*uploads_done_, Lane::Copy);
  report_copy_busy();
}

}  // namespace zt
