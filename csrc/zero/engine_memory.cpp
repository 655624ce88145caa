// engine_memory.cpp — predicted vs measured bytes per category: the ZeRO formulas (docs/design.md)
// over the actual plan, including its padding, ring / wire slots and stage-3 gather buffers.
#include <algorithm>
#include <cstdio>

#include "engine_impl.h"

namespace zt {

namespace {
int64_t bytes_of(int64_t numel, DType t) { return numel * static_cast<int64_t>(dtype_size(t)); }

// buffer_count slots (at least 2), each one widest chunk of grads and of compute-dtype params.
int64_t host_staging_bytes(const ZeroPlan& plan, int rank, const EngineOptions& o) {
  int64_t widest = 0;
  for (const OptimizerChunk& c : optimizer_chunks(plan, rank, o.sub_group_size)) widest = std::max(widest, c.master.count);
  return std::max(2, o.offload.buffer_count) * (bytes_of(widest, plan.grad_dtype) + bytes_of(widest, plan.compute));
}
}  // namespace

// Predicted bytes per category, from the plan alone (the measured side is the tracker's).
std::vector<MemoryLine> ZeroEngine::memory_lines() const {
  const Impl& e = *impl_;
  const ZeroPlan& plan = plan_;
  const bool adam = opt_.optimizer.kind == OptimizerKind::Adam;
  const bool sgd_mom = opt_.optimizer.kind == OptimizerKind::SGD && opt_.optimizer.momentum != 0.0;
  const int64_t opt_numel = plan.numel_in(plan.flow.optimizer);
  std::vector<int64_t> pred(kNumMemCategories, -1);
  auto at = [&](MemCategory c) -> int64_t& { return pred[static_cast<int>(c)]; };
  const int64_t params = bytes_of(plan.numel_in(plan.flow.params), plan.compute);
  at(MemCategory::Params) = opt_.offload.params ? 0 : params;
  at(MemCategory::Grads) = bytes_of(plan.numel_in(plan.flow.grads), plan.grad_dtype) +
                           (plan.staged_grads ? bytes_of(plan.numel, plan.compute) : 0);
  const int64_t master = bytes_of(opt_numel, opt_.master_dtype);
  const int64_t moments = bytes_of(opt_numel, opt_.moments_dtype) * (adam ? 2 : sgd_mom ? 1 : 0);
  const bool host = opt_.offload.optimizer;
  at(MemCategory::Master) = host ? 0 : master;
  at(MemCategory::OptimMoments) = host ? 0 : moments;
  at(MemCategory::HostMaster) = host ? master : 0;
  at(MemCategory::HostMoments) = host ? moments : 0;
  at(MemCategory::HostParams) = opt_.offload.params ? params : 0;
  at(MemCategory::HostStaging) = host ? host_staging_bytes(plan, e.cx.rank, opt_) : 0;
  at(MemCategory::Buckets) = plan.ring_slots * bytes_of(plan.ring_slot_elems, plan.compute) +
                             plan.wire_slots * bytes_of(plan.wire_slot_elems, plan.wire);
  int64_t persistent = 0;
  for (const PlanBucket& b : plan.buckets) persistent += b.persistent ? b.padded : 0;
  at(MemCategory::Gather) = plan.flow.gather_before_use
                                ? bytes_of(persistent + e.param_sync->stats().peak_live_elems, plan.compute)
                                : 0;
  const MemoryTracker& t = e.cx.dev.tracker();
  std::vector<MemoryLine> lines;
  for (int i = 0; i < kNumMemCategories; ++i) {
    MemCategory c = static_cast<MemCategory>(i);
    MemoryLine l;
    l.category = c;
    l.predicted = pred[i];
    l.measured = static_cast<int64_t>(t.current(c));
    l.peak = static_cast<int64_t>(t.peak(c));
    lines.push_back(l);
  }
  return lines;
}

double ZeroEngine::zero_paper_model_state_bytes() const {
  const double psi = static_cast<double>(plan_.numel), n = plan_.world;
  switch (opt_.stage) {
    case 0: return 16 * psi;
    case 1: return 4 * psi + 12 * psi / n;
    case 2: return 2 * psi + 14 * psi / n;
    default: return 16 * psi / n;
  }
}

std::string ZeroEngine::memory_report() const {
  char line[200];
  std::string out;
  std::snprintf(line, sizeof(line), "memory on rank %d (ZeRO stage %d, N=%d, %lld parameters, %lld padded):\n",
                impl_->cx.rank, opt_.stage, plan_.world, static_cast<long long>(plan_.numel),
                static_cast<long long>(plan_.padded_numel));
  out += line;
  std::snprintf(line, sizeof(line), "  %-18s %16s %16s %16s\n", "category", "predicted (B)", "current (B)", "peak (B)");
  out += line;
  int64_t pred_states = 0, meas_states = 0;
  for (const MemoryLine& l : memory_lines()) {
    char pred[32];
    if (l.predicted < 0) std::snprintf(pred, sizeof(pred), "%s", "-");
    else std::snprintf(pred, sizeof(pred), "%lld", static_cast<long long>(l.predicted));
    std::snprintf(line, sizeof(line), "  %-18s %16s %16lld %16lld\n", mem_category_name(l.category), pred,
                  static_cast<long long>(l.measured), static_cast<long long>(l.peak));
    out += line;
    if (l.category == MemCategory::Params || l.category == MemCategory::Grads || l.category == MemCategory::Master ||
        l.category == MemCategory::OptimMoments) {
      pred_states += l.predicted;
      meas_states += l.measured;
    }
  }
  if (opt_.offload.optimizer) {
    out += std::string("  host_* categories: ") + (opt_.offload.pin_memory ? "pinned (page-locked)" : "pageable") +
           " host memory (offload_optimizer.pin_memory)";
    if (opt_.offload.params)
      out += std::string("; host_params ") + (opt_.offload.param_pin_memory ? "pinned" : "pageable");
    out += "\n";
  }
  std::snprintf(line, sizeof(line),
                "  model states: predicted %lld B, measured %lld B; ZeRO paper (16-bit params, fp32 Adam): %.0f B\n",
                static_cast<long long>(pred_states), static_cast<long long>(meas_states), zero_paper_model_state_bytes());
  return out + line;
}

}  // namespace zt
