// engine_param_sync.cpp — start_param_sync / finish_param_sync for stages 0-2. Stage 0 updates
// every parameter on every rank (nothing to sync). Stages 1-2 update only the owned slices, then
// all-gather them in groups of allgather_bucket_size elements; a unit's forward waits only for
// the groups holding its parameters, so later groups overlap earlier units' compute.
// (Stage 3 gathers before every use: stage3_gather.cpp.)
#include "engine_impl.h"

namespace zt {

const GatherStats& ParamSync::stats() const {
  static const GatherStats kNone;
  return kNone;
}

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
  void before(int) override {}
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
    const ZeroPlan& plan = cx_.plan;
    const int handoff = cx_.comm_waits_for_compute();
    for (size_t g = 0; g < plan.ag_groups.size(); ++g) {
      cx_.comm_work([&] {
        CommGroup group(cx_.comm);
        for (int b = plan.ag_groups[g].begin; b < plan.ag_groups[g].end(); ++b)
          all_gather_view(cx_.comm, st_.params.view(plan.slice(b, cx_.rank, Layout::Full)),
                          st_.params.view(plan.bucket_range(b)), "ag" + std::to_string(g) + ".b" + std::to_string(b),
                          nullptr);
      });
      done_[g]->record(cx_.comm.stream());
      waited_[g] = false;
    }
    if (cx_.opt.overlap_comm) return;
    for (size_t g = 0; g < done_.size(); ++g) wait(static_cast<int>(g), g == 0 ? handoff : -1);
  }

  // The unit's parameters are read only after the groups holding them arrived.
  void before(int pos) override {
    const ZeroPlan& plan = cx_.plan;
    for (int p : plan.unit_params[unit_of_position(pos, plan.num_units())]) wait(plan.bucket(plan.param(p).bucket).ag_group);
  }

 private:
  void wait(int g, int since = -1) {
    if (waited_[g]) return;
    cx_.compute_waits(*done_[g], Lane::Comm, since);
    waited_[g] = true;
  }

  EngineContext& cx_;
  ModelStates& st_;
  std::vector<std::unique_ptr<Event>> done_;  // per group, recorded on the comm stream
  std::vector<bool> waited_;                  // the compute stream already waits on done_[g]
};

}  // namespace

std::unique_ptr<ParamSync> make_param_sync(EngineContext& cx, ModelStates& st) {
  if (cx.plan.flow.gather_before_use) return make_stage3_gatherer(cx, st);
  if (cx.plan.flow.gather_after_step) return std::make_unique<GroupedAllGather>(cx, st);
  return std::make_unique<NoParamSync>(cx, st);
}

}  // namespace zt
