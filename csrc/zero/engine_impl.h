// engine_impl.h — ZeroEngine's private state, shared by engine*.cpp and stage3_gather.cpp.
#pragma once
#include <memory>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/zero/engine.h"

namespace zt {

// Stage-3 parameter gathering: one gathered buffer per bucket while it is live.
// Positions 0..U-1 are the units' forwards, U..2U-1 their backwards (unit U-1 first).
class Stage3Gatherer {
 public:
  Stage3Gatherer(ZeroEngine::Impl& e);
  ~Stage3Gatherer();
  // Gather (or wait for) every bucket position `pos` needs, make the compute stream wait for
  // them, prefetch what comes next within the budgets, and bind the unit's parameters.
  void begin_position(int pos);
  // Release (deferred until the compute stream passes this point) what is not needed again
  // within max_reuse_distance.
  void end_position(int pos);
  // The shard changed (after a step / at init): drop stale gathers, re-gather persistent buckets.
  void refresh_after_update();
  const GatherStats& stats() const { return stats_; }
  int64_t persistent_bytes() const;

 private:
  enum class State { Released, Gathered };
  struct Slot {
    State state = State::Released;
    DeviceBuffer buf;
    std::unique_ptr<Event> done;  // recorded on the comm stream after the all-gather
    bool waited = false;          // the compute stream already waits on `done`
  };
  void issue(int b, bool prefetch);
  void release(int b);
  void collect_pending(bool wait_all);
  void update_live(int pos);
  int unit_of(int pos) const;

  ZeroEngine::Impl& e_;
  std::vector<std::vector<int>> need_;  // buckets needed per position
  std::vector<Slot> slots_;             // per bucket
  struct Pending { DeviceBuffer buf; std::unique_ptr<Event> after; };
  std::vector<Pending> pending_;        // buffers freed once `after` (compute stream) completes
  GatherStats stats_;
  int64_t live_elems_ = 0;              // Σ padded of gathered non-persistent buckets
};

struct ZeroEngine::Impl {
  Impl(ZeroEngine& owner, Model& m, Device& d, Stream& c, Communicator& k, std::unique_ptr<LrSchedule> s);

  ZeroEngine& owner;
  Model& model;
  Device& dev;
  Stream& compute;
  Communicator& comm;
  const EngineOptions& opt;
  const ZeroPlan& plan;
  std::unique_ptr<LrSchedule> sched;
  int rank = 0, world = 1, stage = 0, U = 0;
  size_t cs = 4;  // compute dtype size
  std::vector<std::vector<int>> unit_params;
  std::vector<BucketSpan> spans;
  std::vector<std::vector<int>> open_at, close_at;  // buckets opened / closed at each unit's backward

  // ---- model states (see engine.h for which exist at which stage) ----
  DeviceBuffer params;        // compute dtype: [P] (stages 0-2) or [S] (stage 3)
  DeviceBuffer grads_full;    // compute dtype [P], stages 0-1
  DeviceBuffer grad_acc;      // grad_accum dtype [S], stages 2-3
  std::vector<DeviceBuffer> param_grads;  // contiguous_gradients off: per parameter, compute dtype
  DeviceBuffer master, exp_avg, exp_avg_sq;  // [opt_numel]; exp_avg is the momentum buffer for SGD
  int64_t opt_numel = 0;

  // ---- bucket ring (stages 2-3): slots reused only after their slot event ----
  struct RingSlot {
    DeviceBuffer buf;
    std::unique_ptr<Event> free;  // recorded on the comm stream after reduce-scatter + accumulate
    int bucket = -1;              // open bucket using the slot, -1 when free
  };
  std::vector<RingSlot> ring;
  std::vector<int> bucket_slot;   // bucket -> ring slot while open
  int ring_next = 0;
  int64_t ring_slot_elems = 0;
  // Wire slots (communication_data_type != the reduced buffer's dtype): double buffered, each
  // reused only after its `free` event (comm stream, after the cast back / accumulate).
  std::vector<RingSlot> wire;
  int wire_next = 0;
  DType grad_dtype = DType::F32;  // grads_full (stages 0-1): the accumulation dtype
  bool staged_grads = false;      // backward writes param_grads (compute dtype), added in at close

  // ---- events ----
  std::vector<std::unique_ptr<Event>> reduce_done;  // per bucket (stages 0-1)
  std::unique_ptr<Event> last_reduce;               // latest event covering every issued reduction
  Event* last_reduce_ptr = nullptr;
  std::unique_ptr<Event> compute_mark;              // scratch: compute stream -> comm stream hand-off
  std::vector<std::unique_ptr<Event>> ag_done;      // stages 1-2: per all-gather group
  std::vector<int> ag_group_of;                     // bucket -> group
  std::vector<bool> ag_waited;                      // group already waited on by compute
  std::unique_ptr<Event> stats_ready;
  std::unique_ptr<Event> host_ready;

  // ---- step statistics: [nb] squared norms (double) + loss (float in a double slot) ----
  DeviceBuffer stats_local, stats_all;   // Workspace
  DeviceBuffer stats_host;               // pinned host
  int micro = 0;
  int64_t global_steps = 0, successful_steps = 0;
  LossScaler scaler;
  std::unique_ptr<Stage3Gatherer> gatherer;

  // What this rank updates of bucket b: `count` elements starting at `flat` in the padded flat
  // space (stage 0: the whole bucket; else its owned slice), stored at `master` in the optimizer
  // buffers and at `param` in `params` (full buffer at stages 0-2, shard at stage 3).
  struct OwnedRange { int64_t count, flat, master, param; };
  OwnedRange owned(const PlanBucket& b) const {
    if (stage == 0) return {b.padded, b.flat_begin, b.flat_begin, b.flat_begin};
    const int64_t flat = plan.owned_flat_begin(b.id, rank);
    return {b.slice, flat, b.shard_begin, stage == 3 ? b.shard_begin : flat};
  }

  // helpers
  TensorView view(const DeviceBuffer& b, DType t, int64_t offset, int64_t count) const;
  void* param_ptr(int p) const;            // stages 0-2: full buffer location of parameter p
  void bind_all_params();
  void mark_compute_for_comm();            // comm stream waits for compute work issued so far
  void open_bucket(int b);
  void close_bucket(int b, bool boundary);
  void forward_wait_allgather(int unit);
  void post_update_param_sync();           // after params were written on their owned ranges
  void write_owned_params_from_master();
  void fill_master(const std::function<void(int param, int64_t begin, int64_t count, float* out)>& src);
  double pre_factor() const;
  double post_factor() const;
};

}  // namespace zt
