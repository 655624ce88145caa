// engine_param_sync.cpp — start_param_sync / finish_param_sync for stages 0-2. Stage 0 updates
// every parameter on every rank (nothing to sync). Stages 1-2 update only the owned slices, then
// all-gather them in groups of allgather_bucket_size elements (the boundary's HandOff and
// GatherGroup ops); a unit's forward waits only for the groups holding its parameters (the first
// micro-step's Wait ops), so later groups overlap earlier units' compute.
// (Stage 3 gathers before every use: stage3_gather.cpp.)
#include <stdexcept>
#include <string>

#include "engine_impl.h"

namespace zt {

const GatherStats& ParamSync::stats() const {
  static const GatherStats kNone;
  return kNone;
}

// The ops a stage's program never holds (a planner / executor mismatch, not an input error).
namespace {
[[noreturn]] void no_such_op(const StepOp& op) {
  throw std::logic_error("step program: '" + op_text(op) + "' is not an op of this ZeRO stage's parameter sync");
}
}  // namespace
void ParamSync::gather(const StepOp& op) { no_such_op(op); }
void ParamSync::wait(int id) { no_such_op({OpKind::Wait, -1, false, id}); }
void ParamSync::release(int b) { no_such_op({OpKind::Release, -1, false, b}); }
void ParamSync::gather_group(int g) { no_such_op({OpKind::GatherGroup, -1, false, -1, g}); }

namespace {

// Full parameters on every rank (stages 0-2): bound once, for good.
void bind_full_params(EngineContext& cx, const ModelStates& st) {
  for (int p = 0; p < static_cast<int>(cx.plan.params.size()); ++p)
    cx.model.bind_param(p, st.params.view(cx.plan.param_range(p)).data);
}

class NoParamSync final : public ParamSync {
 public:
  NoParamSync(EngineContext& cx, ModelStates& st) { bind_full_params(cx, st); }
  void start() override {}
};

class GroupedAllGather final : public ParamSync {
 public:
  GroupedAllGather(EngineContext& cx, ModelStates& st) : cx_(cx), st_(st) {
    bind_full_params(cx, st);
    for (size_t g = 0; g < cx.plan.ag_groups.size(); ++g) done_.push_back(cx.comm.create_event());
    waited_.assign(done_.size(), true);
  }

  // The owned slices were written on the compute stream: gather every group in place.
  void start() override {
    hand_off();
    for (int g = 0; g < static_cast<int>(cx_.plan.ag_groups.size()); ++g) gather_group(g);
  }

  void hand_off() override { handoff_ = cx_.comm_waits_for_compute(); }

  // Group g in place; without overlap_comm, compute waits for every group once the last is issued.
  void gather_group(int g) override {
    const ZeroPlan& plan = cx_.plan;
    cx_.comm_work([&] {
      CommGroup group(cx_.comm);
      for (int b = plan.ag_groups[g].begin; b < plan.ag_groups[g].end(); ++b)
        all_gather_view(cx_.comm, st_.params.view(plan.slice(b, cx_.rank, Layout::Full)),
                        st_.params.view(plan.bucket_range(b)),
                        CollectiveLabel{CollectiveLabel::Kind::GroupGather, b, g}.to_string(), nullptr);
    });
    done_[g]->record(cx_.comm.stream());
    waited_[g] = false;
    if (cx_.opt.overlap_comm || g + 1 < static_cast<int>(done_.size())) return;
    for (size_t k = 0; k < done_.size(); ++k) wait_since(static_cast<int>(k), k == 0 ? handoff_ : -1);
  }

  // A unit's parameters are read only after the groups holding them arrived (the first
  // micro-step's Wait ops).
  void wait(int g) override { wait_since(g, -1); }

 private:
  void wait_since(int g, int since) {
    if (waited_[g]) return;
    cx_.compute_waits(*done_[g], Lane::Comm, since);
    waited_[g] = true;
  }

  EngineContext& cx_;
  ModelStates& st_;
  std::vector<std::unique_ptr<Event>> done_;  // per group, recorded on the comm stream
  std::vector<bool> waited_;                  // the compute stream already waits on done_[g]
  int handoff_ = -1;                          // the stall anchor of the last hand_off()
};

}  // namespace

std::unique_ptr<ParamSync> make_param_sync(EngineContext& cx, ModelStates& st) {
  if (cx.plan.flow.gather_before_use) return make_stage3_gatherer(cx, st);
  if (cx.plan.flow.gather_after_step) return std::make_unique<GroupedAllGather>(cx, st);
  return std::make_unique<NoParamSync>(cx, st);
}

}  // namespace zt
