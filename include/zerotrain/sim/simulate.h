// simulate.h — one optimizer step predicted from the engine's own step program
// (zero/step_program.h) on a CostModel: every op of every micro-step, then the boundary, each
// placed on the lane the engine runs it on (compute, comm, copy) after the events the engine
// makes it wait for (docs/design.md, "The step simulator").
//
// Lanes are in-order queues, as the streams are: an op starts when its lane is free and its
// dependencies are done. The dependencies are the engine's:
//  * reduce b: the collective starts once compute has handed the bucket over (the backward that
//    completed it) and the comm lane is free; without overlap_comm compute waits for it (or for
//    the offload copy that follows it).
//  * offload b: the copy lane takes the reduced slice after its reduction.
//  * open b (stages 2-3): compute waits until every bucket sharing b's ring region was consumed.
//  * gather / prefetch b (stage 3): on comm; without overlap_comm in compute's order and waited
//    for at once. wait / release b: compute waits for b's gather.
//  * wait group g (stages 1-2): compute waits for the previous step's all-gather of group g.
//  * finish reductions: compute waits for the last reduction (the last copy with offload).
//  * step stats, LAMB norms: compute hands off, the collective runs, compute waits for it.
//  * hand-off, all-gather group, re-gather: after the update (and, with offload, the last
//    parameter copy up), on comm; they overlap the next step up to its wait ops.
// Two consecutive steps are simulated; the second is the one reported (the steady state: the
// first step's parameter all-gathers run inside it). Step time: the compute lane's span from the
// end of the first step's boundary to the end of the second's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/sim/cost_model.h"
#include "zerotrain/zero/step_program.h"
#include "zerotrain/zero/step_timing.h"

namespace zt {

// One piece of predicted work on one lane, seconds from the start of the reported step.
struct SimSlice {
  Lane lane = Lane::Compute;
  std::string name;            // "fwd u3", "bwd u1", "step: update", "wait comm", "reduce_scatter b4", ...
  double begin_s = 0, end_s = 0;
  int op = -1;                 // index into SimResult::ops of the op that issued it (-1: previous step's)
  int cause = -1;              // the slice whose end set this slice's begin (-1: none in the window)
  bool stall = false;          // compute waiting on another lane
  // Collectives (comm lane) and copies (copy lane):
  std::string op_name, label, dtype;  // "reduce_scatter" / "d2h" / "h2d", "b4", "bf16"
  CommOp coll = CommOp::AllGather;
  bool collective = false;
  int bucket = -1;
  double bytes = 0;            // the whole buffer (as the comm log's bytes)
  double ring_bytes = 0;       // what one rank sends (ring_bytes_per_rank)
  double handoff_s = -1;       // reductions: when compute handed the bucket over
};

struct SimResult {
  std::vector<StepOp> ops;     // the reported step's ops in the order simulated
  std::vector<int> op_micro;   // their micro-step (-1: boundary)
  // Each lane in time order: the reported step's work, and the previous step's that ends inside it
  // (its post-step all-gathers; an offload parameter copy may begin before 0).
  std::vector<SimSlice> slices;
  double step_s = 0;
  double compute_busy_s = 0, comm_busy_s = 0, copy_busy_s = 0;  // the reported step's ops
  double compute_ops_s = 0;    // Σ compute op durations (stalls excluded) = compute_busy_s
  double comm_exposed_s = 0;   // compute stalled on comm (step_timing.h's comm_exposed)
  double copy_exposed_s = 0;   // compute stalled on the copy lane
  double comm_ring_bytes_per_rank = 0;  // Σ ring_bytes_per_rank of the step's collectives
  int64_t collectives = 0;
  int64_t samples = 0;         // global batch
  double tokens_per_s = 0, samples_per_s = 0, model_flops_per_s = 0, mfu = 0;
  bool has_copy_lane = false;
  std::vector<int> critical_path;  // slice indices, first to last (the last ends the step)
  double overlap_pct() const;       // 100·(1 - exposed/busy), clamped; -1 without communication
  double copy_overlap_pct() const;
};

SimResult simulate_step(const ZeroPlan& plan, const EngineOptions& opt, const SimWorkload& work, const CostModel& cost);

}  // namespace zt
