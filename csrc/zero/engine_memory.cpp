// engine_memory.cpp — predicted vs measured bytes per category (design.md §4 formulas plus the
// bucket, gather and padding buffers of the actual plan).
#include <algorithm>
#include <cstdio>

#include "engine_impl.h"

namespace zt {

std::vector<MemoryLine> ZeroEngine::memory_lines() const {
  const Impl& e = *impl_;
  const int64_t P = plan_.padded_numel, S = plan_.shard_numel, psi = plan_.numel;
  const int64_t cs = static_cast<int64_t>(e.cs);
  const bool adam = opt_.optimizer.kind == OptimizerKind::Adam;
  const bool sgd_mom = opt_.optimizer.kind == OptimizerKind::SGD && opt_.optimizer.momentum != 0.0;
  std::vector<int64_t> pred(kNumMemCategories, -1);
  auto at = [&](MemCategory c) -> int64_t& { return pred[static_cast<size_t>(c)]; };
  at(MemCategory::Params) = (opt_.stage == 3 ? S : P) * cs;
  at(MemCategory::Grads) = (opt_.stage <= 1 ? P : S) * static_cast<int64_t>(dtype_size(opt_.grad_accum_dtype)) +
                           (e.staged_grads ? psi * cs : 0);
  at(MemCategory::Master) = e.opt_numel * static_cast<int64_t>(dtype_size(opt_.master_dtype));
  at(MemCategory::OptimMoments) =
      e.opt_numel * static_cast<int64_t>(dtype_size(opt_.moments_dtype)) * (adam ? 2 : sgd_mom ? 1 : 0);
  int64_t max_padded = 0;
  for (const PlanBucket& b : plan_.buckets) max_padded = std::max(max_padded, b.padded);
  at(MemCategory::Buckets) = static_cast<int64_t>(e.ring.size()) * e.ring_slot_elems * cs +
                             static_cast<int64_t>(e.wire.size()) * max_padded *
                                 static_cast<int64_t>(dtype_size(opt_.wire_dtype));
  at(MemCategory::Gather) =
      e.gatherer ? e.gatherer->persistent_bytes() + e.gatherer->stats().peak_live_elems * cs : 0;
  const MemoryTracker& t = e.dev.tracker();
  std::vector<MemoryLine> lines;
  for (int i = 0; i < kNumMemCategories; ++i) {
    MemCategory c = static_cast<MemCategory>(i);
    MemoryLine l;
    l.category = c;
    l.predicted = pred[static_cast<size_t>(i)];
    l.measured = static_cast<int64_t>(t.current(c));
    l.peak = static_cast<int64_t>(t.peak(c));
    lines.push_back(l);
  }
  return lines;
}

double ZeroEngine::zero_paper_model_state_bytes() const {
  const double psi = static_cast<double>(plan_.numel), n = impl_->world;
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
                impl_->rank, opt_.stage, impl_->world, static_cast<long long>(plan_.numel),
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
  std::snprintf(line, sizeof(line),
                "  model states: predicted %lld B, measured %lld B; ZeRO paper (16-bit params, fp32 Adam): %.0f B\n",
                static_cast<long long>(pred_states), static_cast<long long>(meas_states), zero_paper_model_state_bytes());
  return out + line;
}

}  // namespace zt
