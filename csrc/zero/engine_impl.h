// engine_impl.h — ZeroEngine's private parts. Each part owns its buffers and events:
//   ModelStates  the buffers a stage keeps (params, grads, master, moments)
//   GradSync     gradient reduction: ring / wire slots and the events that guard them
//   ParamSync    making parameters whole again: nothing (stage 0), post-step all-gather groups
//                (stages 1-2) or the stage-3 gatherer
//   StepExchange per-bucket squared norms and the loss, agreed by every rank at the boundary
// The plan (plan.h) holds the schedule and step_program.h orders it into ops; ZeroEngine::Impl
// runs those ops one by one, each a one-line call into these parts.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flat_buffer.h"
#include "step_timer.h"
#include "zerotrain/kernels/host_optim.h"
#include "zerotrain/zero/engine.h"
#include "zerotrain/zero/engine_testing.h"
#include "zerotrain/zero/quantized_reduce.h"
#include "zerotrain/zero/step_graph.h"
#include "zerotrain/zero/step_program.h"

namespace zt {

// What every part reads: the plan, the options and the streams. Non-owning, except the
// compute -> comm hand-off event.
struct EngineContext {
  const ZeroPlan& plan;
  const EngineOptions& opt;
  Model& model;
  Device& dev;
  Stream& compute;
  Communicator& comm;
  int rank = 0, world = 1;
  std::unique_ptr<Event> compute_mark;  // scratch: recorded on compute, waited by comm
  StepTimer* timer = nullptr;           // the Impl's (always set); brackets stalls and comm work when timing is on

  // Later collectives read what the compute stream has written so far. Returns the hand-off's
  // stall anchor (StepTimer::anchor) for a compute wait issued right after, with no compute work
  // in between.
  int comm_waits_for_compute() {
    const int anchor = timer->hand_off();
    compute_mark->record(compute);
    comm.wait(*compute_mark);
    return anchor;
  }
  // Every piece of work the step enqueues on the comm stream (collectives and their
  // post-processing there) is enqueued inside comm_work, which brackets it with the timer's
  // busy events when timing is on. Invariant: the events compute waits on for that work are
  // recorded after comm_work returns (StepTimer::comm_begin).
  template <typename Enqueue>
  void comm_work(Enqueue&& enqueue) {
    timer->comm_begin();
    enqueue();
    timer->comm_end();
  }
  // The compute stream waits for an event recorded on `lane` (every such wait goes through here,
  // so wall_clock_breakdown sees every stall).
  // `since`: the anchor of a hand-off this wait follows directly (-1: none).
  void compute_waits(Event& e, Lane lane = Lane::Comm, int since = -1) { timer->wait(compute, e, lane, since); }
  // Before a collective returns its result to compute: without overlap_comm, compute waits at once.
  void compute_waits_unless_overlap(Event& done, int since) {
    if (!opt.overlap_comm) compute_waits(done, Lane::Comm, since);
  }
};

// Model states (engine.h table). Layouts from plan.flow: params / grads / optimizer.
struct ModelStates {
  explicit ModelStates(const EngineContext& cx);
  FlatBuffer params;                // compute dtype, plan.flow.params layout
  FlatBuffer grads;                 // plan.grad_dtype, plan.flow.grads layout (stages 2-3: the shard
                                    // accumulator; empty when plan.host_grads)
  FlatBuffer host_grads;            // plan.host_grads: host, plan.grad_dtype, Layout::Shard (HostGrads)
  std::vector<FlatBuffer> staged;   // plan.staged_grads: per parameter, compute dtype, written by backward
  FlatBuffer master;                // opt.master_dtype, plan.flow.optimizer layout
  FlatBuffer exp_avg, exp_avg_sq;   // opt.moments_dtype, OptimizerHparams::moment_names() order:
                                    // exp_avg is SGD's momentum and Adagrad's sum of squares
  // The accumulated gradients the optimizer, the norms and the overflow check read, in
  // plan.optimizer_grads() layout.
  const FlatBuffer& optimizer_grads() const { return host_grads ? host_grads : grads; }
};
void fill_state(const EngineContext& cx, FlatBuffer& buf, float value);

class HostOptimizer;

class GradSync {
 public:
  // offload: plan.host_grads only (the reduced slices go down through it), else nullptr.
  GradSync(EngineContext& cx, ModelStates& st, HostOptimizer* offload);
  void bind_grads();                                    // where backward writes (stages 0-1 / staged)
  void open(int b);                                     // stages 2-3: bucket b's ring region is zeroed
  void close(int b);                                    // bucket b's grads are complete (staged ones added)
  void reduce(int b, bool first_micro);                 // close(b), then its reduction is issued
  void offload(int b, bool first_micro);                // plan.host_grads: b's reduced slice goes down
  void finish();                                        // compute waits for every reduction issued
  void reset_after_step();                              // zero the full grads (stages 0-1)
  // For a graph signature (step_graph.h): the buffers start() launches on, the next wire slot.
  void graph_buffers(std::vector<const void*>& out) const;
  int wire_next() const { return wire_next_; }

 private:
  struct Slot {
    FlatBuffer buf;
    // Recorded on the comm stream once the slot's reduction is consumed, or (lands_on_compute) once
    // its collective is done: the cast back out of it then follows on the compute stream, the
    // stream of the slot's next writer (cast_to_wire).
    std::unique_ptr<Event> free;
  };
  TensorView ring_region(int b) const;  // bucket b's region of the ring arena
  TensorView gather_into_reduced(int b);
  TensorView cast_to_wire(const TensorView& src, Slot*& ws);
  TensorView collective(int b, const TensorView& on_wire);
  TensorView land(Stream& s, int b, const TensorView& src, const TensorView& reduced, bool first_micro);
  bool lands_on_compute(const Slot* ws) const;
  Event& consumed(int b);  // recorded once bucket b's reduced bytes may be reused
  void consumed_on(Stream& s, int b, Slot* ws, int handoff);

  QuantizedReduceShape qgz_shape(int b) const;  // qgZ: bucket b's reduce-scatter

  EngineContext& cx_;
  ModelStates& st_;
  FlatBuffer ring_;          // stages 2-3: the ring arena (plan.ring_elems)
  FlatBuffer qgz_;           // qgZ scratch (fp32, quantized_reduce_sizes of the widest slice), comm stream only
  QuantizedReduceScratch qgz_scratch_;  // views into qgz_
  std::vector<std::unique_ptr<Event>> ring_free_;  // per bucket: its reduction consumed its region
  std::vector<Slot> wire_;   // wire dtype slots, double buffered, reused only after `free`
  int wire_next_ = 0;
  std::vector<std::unique_ptr<Event>> reduce_done_;  // stages 0-1: per bucket
  Event* last_ = nullptr;    // covers every reduction issued (its stream completes in order)
  HostOptimizer* offload_;
  // plan.host_grads: the reduction the next Offload op takes down (Reduce -> Offload, adjacent ops).
  struct Pending {
    int bucket = -1;
    TensorView reduced;        // the rank's reduced slice, where the reduction left it
    Slot* wire = nullptr;      // the wire slot it lives in (when the wire dtype differs)
    int handoff = -1;          // the Reduce op's hand-off anchor
  } pending_;
};

// Make every rank's parameters usable again after the owned ranges were updated. The step
// program's parameter ops (step_program.h) call these; a stage's part implements the ones its
// program holds (any other is a mismatch between planner and executor, reported as such).
class ParamSync {
 public:
  virtual ~ParamSync() = default;
  // start_param_sync outside a step (initialisation, a loaded checkpoint): what the boundary's
  // parameter ops do after an update, hand_off() and then every gather.
  virtual void start() = 0;
  virtual void hand_off() {}                 // HandOff: the comm stream waits for the written params
  virtual void gather(const StepOp& op);     // Gather, Prefetch, Regather (stage 3)
  virtual void wait(int id);                 // Wait: a gathered bucket (stage 3) or an all-gather group (1-2)
  virtual void bind(int pos) {}              // position pos's compute reads its params from here on
  // An evaluation's forward of `unit` reads its params from here on (its buckets gathered, no
  // schedule position: the step's gather statistics are left alone).
  virtual void bind_unit(int unit) {}
  virtual void release(int b);               // Release (stage 3)
  virtual void gather_group(int g);          // GatherGroup (stages 1-2)
  virtual const GatherStats& stats() const;
  virtual int64_t staged_slices() const { return 0; }  // offload_param host -> device stagings
};
std::unique_ptr<ParamSync> make_param_sync(EngineContext& cx, ModelStates& st);
std::unique_ptr<ParamSync> make_stage3_gatherer(EngineContext& cx, ModelStates& st);  // stage3_gather.cpp

// The step's statistics (ZeroPlan::step_stats): per-bucket squared norms + the loss.
class StepExchange {
 public:
  explicit StepExchange(EngineContext& cx);
  TensorView loss_slot() const;                     // the mean loss accumulates here
  void squared_norm(int b, const TensorView& grads);  // empty view: 0
  // host_grads: every bucket's squared norm computed here, on host views (the same kernel as the
  // CPU backend's), then copied into the device slots on the compute stream.
  void squared_norms_on_host(const std::vector<TensorView>& grads);
  struct Totals { double squared_norm = 0, loss = 0; };
  Totals exchange();                                // blocks; same sums, same order, on every rank

 private:
  EngineContext& cx_;
  DeviceBuffer local_, all_;  // Workspace
  DeviceBuffer host_;         // pinned host
  std::unique_ptr<Event> ready_, host_ready_;
};

// One optimizer call: sub_group_size elements of a bucket's updated range, in each buffer's layout.
struct OptimizerChunk {
  ElemRange master, grads, params;
};
std::vector<OptimizerChunk> optimizer_chunks(const ZeroPlan& plan, int rank, int64_t sub_group_size);

// One step's optimizer arguments, the same for every chunk.
struct OptimizerStep {
  OptimizerKind kind = OptimizerKind::Adam;
  math::AdamParams adam_params{};
  optim::SgdParams sgd_params{};
  optim::LionParams lion_params{};
  optim::AdagradParams adagrad_params{};
  optim::LambParams lamb_params{};
  bool first_step = false;   // SGD: momentum buffer starts from the gradient
  float grad_scale = 1;      // post-reduction average × clip coefficient × 1/loss scale
};

// LAMB's trust ratios (engine_lamb.cpp). The pieces of each parameter this rank updates (a
// parameter ∩ the rank's updated range of its bucket: at most one per parameter, since a bucket
// never splits a parameter and a rank's slice is contiguous) give partial squared norms of the
// weights and of the update direction, in double; at stages 1-3 they are summed over the ranks
// by one all-reduce of a [2 x num_params] fp32 vector ("lamb norms"), then every rank computes
// the same ratio per parameter (optim::lamb_ratio).
class LambNorms {
 public:
  struct Piece {
    int param = 0;
    ElemRange master, params;  // in the optimizer's and the params' layouts
  };
  LambNorms(EngineContext& cx, const ModelStates& st);
  const std::vector<Piece>& pieces() const { return pieces_; }
  // After phase 1 (moments updated): one ratio per parameter (1 for parameters with no piece
  // anywhere). host: the master and moments are host memory (offload), normed on this thread.
  std::vector<float> ratios(const optim::LambParams& a, bool host);

 private:
  EngineContext& cx_;
  const ModelStates& st_;
  std::vector<Piece> pieces_;
  DeviceBuffer sq_;       // [2 x P] doubles: ||p||², ||u||² of this rank's piece of each parameter
  DeviceBuffer wire_;     // [2 x P] fp32: the same, summed across ranks
  DeviceBuffer host_;     // pinned: [2 x P] doubles, then [2 x P] fp32
  std::unique_ptr<Event> ready_, host_ready_;
};

// ZeRO-Offload (engine_offload.cpp, engine_grad_offload.cpp): master + moments (and the gradient
// shard) in host memory. During backward each bucket's reduced slice goes down on the copy
// stream and a host lane adds it into ModelStates::host_grads; at the boundary the CPU optimizer
// reads that shard and the params go up per chunk on the copy stream.
class HostOptimizer {
 public:
  HostOptimizer(EngineContext& cx, ModelStates& st);
  ~HostOptimizer() { drain(); }
  void drain();  // the copy stream and the host lane finish what was issued (they read GradSync's buffers)
  // Bucket b's reduced slice `reduced` (device; plan.reduced_dtype(), plan.bucket(b).slice
  // elements), complete once the comm stream reaches this point, is copied into a staging slot
  // and added (overwrite: copied) into host_grads' slice of b. Returns the copy stream: an event
  // recorded on it after this call marks `reduced`'s bytes as free again.
  Stream& grads_down(int b, const TensorView& reduced, bool overwrite);
  void grads_landed();  // the host waits for every accumulation issued: host_grads is final
  void update(const OptimizerStep& step, LambNorms* lamb);  // lamb: LAMB only
  void upload_params_from_master();
  const OffloadStats& stats() const { return stats_; }

 private:
  struct Slot {
    FlatBuffer params;                 // host staging (HostStaging), one chunk
    std::unique_ptr<Event> h2d;        // copy stream: params uploaded
  };
  struct GradSlot {
    FlatBuffer staged;                 // host staging (HostStaging): one bucket slice, plan.reduced_dtype()
    std::unique_ptr<Event> copied;     // copy stream: the slice arrived
    std::unique_ptr<Event> free;       // host lane: its accumulation has read it
  };
  void upload_params(int i);
  // copy_view on the copy stream, bracketed by timing events when the step is timed; `name`
  // labels the copy in a trace ("grads b3 down", "params c2 up").
  void timed_copy(const TensorView& dst, const TensorView& src, CopyKind kind, std::string name);
  void report_copy_busy();  // sums this step's brackets into the step timer
  void update_on_host(const OptimizerStep& step, const OptimizerChunk& c, const TensorView& grads,
                      const TensorView& params_out);
  void update_lamb(const OptimizerStep& step, LambNorms& lamb);  // engine_lamb.cpp
  bool params_in_place() const { return cx_.opt.offload.params; }  // offload_param: shard on the host

  EngineContext& cx_;
  ModelStates& st_;
  std::vector<OptimizerChunk> chunks_;
  std::unique_ptr<cpu::HostThreadPool> pool_;  // the CPU optimizer's threads
  cpu::Isa isa_;
  std::vector<Slot> slots_;
  std::vector<GradSlot> grad_slots_;  // reused round-robin, each after its `free`
  int grad_next_ = 0;
  std::unique_ptr<Stream> copy_;
  std::unique_ptr<Stream> host_lane_;  // host functions only: the accumulations, in issue order
  std::unique_ptr<Event> reduced_, accumulated_, uploads_done_;
  std::vector<std::unique_ptr<Event>> brackets_;  // timing events (before, after) per copy; reused
  int brackets_used_ = 0;
  struct CopyName {
    std::string name;
    CopyKind kind;
    uint64_t bytes;
  };
  std::vector<CopyName> bracket_names_;  // per bracketed copy, this step
  OffloadStats stats_;
};

// train --cuda-graph (zero/step_graph.h; engine_graph.cpp): captured micro-step graphs, one per
// micro-step kind, each with the signature it was captured under.
class StepGraphs {
 public:
  StepGraphs(EngineContext& cx, int warmup_steps, std::function<void(const std::string&)> note);
  // One micro-step's device work, `body`, through a graph when the warm-up is over: captured
  // (then launched) when no graph of this kind holds `sig`, else replayed. false: not yet due,
  // the caller runs body eagerly.
  bool run(const GraphSignature& sig, const std::function<void()>& body);
  void step_done() { ++steps_seen_; }
  const GraphStats& stats() const { return stats_; }

 private:
  struct Entry {
    GraphSignature sig;
    std::unique_ptr<StreamGraph> graph;
  };
  std::unique_ptr<StreamGraph> capture(const std::function<void()>& body);
  void launch(StreamGraph& g);

  EngineContext& cx_;
  int warmup_steps_;
  int64_t steps_seen_ = 0;  // step() calls since enable_cuda_graphs
  std::function<void(const std::string&)> note_;
  std::vector<Entry> entries_;
  std::unique_ptr<Event> comm_mark_, compute_mark_, join_;  // the joins (step_graph.h); join_: comm -> compute inside a capture
  GraphStats stats_;
};

// The boundary's verdict, identical on every rank.
struct StepVerdict {
  StepStats stats;
  float grad_scale = 1;  // post-reduction average × clip coefficient × 1/loss scale, folded into the update
};

struct ZeroEngine::Impl {
  Impl(ZeroEngine& owner, Model& m, Device& d, Stream& c, Communicator& k, std::unique_ptr<LrSchedule> s);

  StepTimer timer;                     // before cx, which points at it
  EngineContext cx;
  ModelStates states;
  std::unique_ptr<HostOptimizer> host_optimizer;  // offload_optimizer only; before grad_sync, which uses it
  GradSync grad_sync;
  std::unique_ptr<ParamSync> param_sync;
  std::unique_ptr<LambNorms> lamb;                // LAMB only
  StepExchange exchange;
  std::unique_ptr<LrSchedule> sched;
  LossScaler scaler;
  EngineTestHooks hooks;
  std::unique_ptr<StepGraphs> graphs;  // enable_cuda_graphs only
  int micro = 0;                       // micro-step within the accumulation window; -1: step() due
  int64_t global_steps = 0, successful_steps = 0;

  const StepProgram program;           // the ops of every micro-step kind and of the boundary
  const std::vector<StepOp> eval;      // an evaluation's forward-only ops (eval_program)

  // ---- the step program's executor (engine_micro_step.cpp, engine_step.cpp) ----
  void micro_body(const MicroStep& m);  // one micro-step's device work after set_batch (a graph's region)
  void run_micro_op(const StepOp& op, bool first, float dloss);
  void run_boundary_op(const StepOp& op, StepVerdict& v);
  float run_eval(const std::vector<StepOp>& ops);  // an evaluation's ops; the micro-batch's mean loss
  GraphSignature graph_signature(const Batch& batch, bool boundary) const;
  StepVerdict agree_on_step();        // norm, loss, clip and overflow: the same on every rank
  void update_owned_shard(float grad_scale);
  void lamb_update(const OptimizerStep& step);  // device-resident states (engine_lamb.cpp)
  OptimizerStep optimizer_step(float grad_scale);
  void write_params_from_master();    // params' owned ranges = cast(master), then param sync
  void fill_master(const ZeroEngine::ParamSliceSource& src);
  std::vector<TensorView> owned_real_grads() const;
};

}  // namespace zt
