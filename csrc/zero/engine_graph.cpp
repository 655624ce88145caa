// engine_graph.cpp — train --cuda-graph: each micro-step's device work captured into a CUDA
// graph per micro-step kind after the warm-up steps, replayed while its signature holds
// (zero/step_graph.h has the region, the joins and the signature).
#include <algorithm>

#include "engine_impl.h"
#include "zerotrain/core/check.h"

namespace zt {

namespace {
const void* address(const FlatBuffer& f) { return f ? f.view().data : nullptr; }
}  // namespace

void GradSync::graph_buffers(std::vector<const void*>& out) const {
  out.push_back(address(ring_));
  for (const Slot& w : wire_) out.push_back(address(w.buf));
}

GraphSignature ZeroEngine::Impl::graph_signature(const Batch& batch, bool boundary) const {
  GraphSignature s;
  s.plan_hash = cx.plan.hash();
  s.stage = cx.opt.stage;
  s.world = cx.world;
  s.gas = cx.opt.gradient_accumulation_steps;
  s.first = micro == 0;
  s.boundary = boundary;
  s.wire_next = grad_sync.wire_next();
  s.batch_B = batch.B;
  s.batch_T = batch.T;
  s.model_scalars = cx.model.launch_scalars();
  s.dloss = static_cast<float>(scaler.scale() / s.gas);
  s.buffers = {address(states.params), address(states.grads), exchange.loss_slot().data, cx.model.loss_device()};
  for (const FlatBuffer& f : states.staged) s.buffers.push_back(address(f));
  grad_sync.graph_buffers(s.buffers);
  return s;
}

StepGraphs::StepGraphs(EngineContext& cx, int warmup_steps, std::function<void(const std::string&)> note)
    : cx_(cx), warmup_steps_(warmup_steps), note_(std::move(note)), comm_mark_(cx.comm.create_event()),
      compute_mark_(cx.dev.create_event()), join_(cx.comm.create_event()) {}

// The joins (step_graph.h): compute waits for all comm work so far, the graph runs, then comm
// waits for compute. Both events are recorded outside any capture.
void StepGraphs::launch(StreamGraph& g) {
  comm_mark_->record(cx_.comm.stream());
  cx_.compute.wait(*comm_mark_);
  g.launch(cx_.compute);
  compute_mark_->record(cx_.compute);
  cx_.comm.stream().wait(*compute_mark_);
}

// Captures body on the compute stream. The comm stream joins the capture at the first
// compute -> comm hand-off (EngineContext::comm_waits_for_compute) and is joined back here, so
// the capture ends with every comm-stream node ordered before the graph's end.
std::unique_ptr<StreamGraph> StepGraphs::capture(const std::function<void()>& body) {
  cx_.dev.begin_capture(cx_.compute);
  try {
    body();
    join_->record(cx_.comm.stream());  // a capture-time record when comm joined; else outside (skipped)
    cx_.compute.wait(*join_);
    return cx_.dev.end_capture(cx_.compute);
  } catch (const std::exception& e) {
    cx_.dev.abort_capture(cx_.compute);
    throw std::runtime_error(std::string("train --cuda-graph: capturing a micro-step failed (run without "
                                         "--cuda-graph to train eagerly): ") + e.what());
  }
}

bool StepGraphs::run(const GraphSignature& sig, const std::function<void()>& body) {
  if (steps_seen_ < warmup_steps_) {
    ++stats_.eager_micro_steps;
    return false;
  }
  auto same_kind = [&](const Entry& e) {
    return e.sig.first == sig.first && e.sig.boundary == sig.boundary && e.sig.wire_next == sig.wire_next;
  };
  auto it = std::find_if(entries_.begin(), entries_.end(), same_kind);
  if (it != entries_.end()) {
    const std::string diff = signature_difference(it->sig, sig);
    if (diff.empty()) {
      launch(*it->graph);
      ++stats_.replays;
      return true;
    }
    stats_.last_recapture = "cuda graph: re-capturing the '" + micro_kind_name(sig) + "' micro-step: " + diff;
    if (note_) note_(stats_.last_recapture);
    stats_.nodes -= it->graph->nodes();
    ++stats_.recaptures;
    // Safe to destroy now: an in-flight launch of it is not cut short (cudaGraphExecDestroy
    // frees an executing graph once it completes), and the new graph is launched after it on
    // the same stream.
    entries_.erase(it);
  }
  std::unique_ptr<StreamGraph> g = capture(body);
  ++stats_.captures;
  stats_.nodes += g->nodes();
  if (note_ && stats_.captures == 1)
    note_("cuda graph: captured the '" + micro_kind_name(sig) + "' micro-step (" + std::to_string(g->nodes()) +
          " nodes) after " + std::to_string(steps_seen_) + " eager warm-up step(s)");
  launch(*g);  // capture recorded the work without running it
  entries_.push_back({sig, std::move(g)});
  return true;
}

void ZeroEngine::enable_cuda_graphs(int warmup_steps, std::function<void(const std::string&)> note) {
  GraphEligibility g;
  g.device = impl_->cx.dev.kind();
  g.stage = opt_.stage;
  g.offload_optimizer = opt_.offload.optimizer;
  g.offload_params = opt_.offload.params;
  g.side_stream = impl_->cx.model.uses_side_stream();
  g.warmup_steps = warmup_steps;
  const std::string refusal = graph_refusal(g);
  if (!refusal.empty()) throw InputError("train --cuda-graph: " + refusal);
  ZT_CHECK(impl_->cx.dev.supports_graphs(), "train --cuda-graph: " + impl_->cx.dev.description() + " has no graphs");
  ZT_CHECK(impl_->micro == 0, "enable_cuda_graphs inside an accumulation window");
  impl_->graphs = std::make_unique<StepGraphs>(impl_->cx, warmup_steps, std::move(note));
}

GraphStats ZeroEngine::graph_stats() const { return impl_->graphs ? impl_->graphs->stats() : GraphStats{}; }

}  // namespace zt
