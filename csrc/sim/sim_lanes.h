// sim_lanes.h — the three in-order lanes of the step simulator (compute, comm, copy): each piece
// of work starts when its lane is free and its dependency is done, and remembers which of the
// two set its start (the critical path's links). Used by csrc/sim/simulate.cpp only.
//
// Where the comm thread shares the rank's cores (CostModel::comm_shares_cores), a collective is
// placed at its time beside compute; when compute then blocks on one (or on a copy behind one),
// the comm lane is re-timed from that moment: every collective up to the waited one runs at its
// own speed (compute has left the core), those queued after it beside compute again, and the
// copy lane's slices follow their dependencies earlier. Compute slices never move; comm and copy
// slices only move earlier, and no slice ends earlier than its dependency.
#pragma once
#include <string>
#include <vector>

#include "zerotrain/sim/simulate.h"

namespace zt {

// A point some later work can depend on: the end of slice `slice` (-1: nothing, time t). Comm and
// copy slices can move earlier (re-timed): SimLanes::end reads the slice's end, not t.
struct Done {
  double t = 0;
  int slice = -1;
  Lane lane = Lane::Comm;
};

class SimLanes {
 public:
  explicit SimLanes(const CostModel& cost) : cost_(cost) {}
  void begin_step(int step) { step_ = step; }
  void set_op(int op) { op_ = op; }
  double free(Lane l) const { return free_[static_cast<int>(l)]; }
  // Where compute is now: what a compute -> comm hand-off makes the comm lane wait for.
  Done handoff() const { return {free_[0], last_[0], Lane::Compute}; }
  void compute(const std::string& name, double seconds);
  // Compute waits for d (a stall slice when d is later than compute).
  void wait(const Done& d);
  // One collective on the comm lane after dep, plus extra_s of post-processing on that lane.
  Done collective(const PlannedCollective& c, int world, const Done& dep, double extra_s, double handoff_s);
  Done copy(const std::string& name, const char* op, double bytes, double seconds, const Done& dep);
  double end(const Done& d) const { return d.slice >= 0 ? slices_[static_cast<size_t>(d.slice)].end_s : d.t; }
  // After the last step: its closing collectives (the next step's gathers) are waited for at once,
  // as the next step's first ops would.
  void drain_comm() {
    const std::vector<int>& comm = lane_slices_[static_cast<int>(Lane::Comm)];
    if (!comm.empty()) settle(comm.back(), free_[0]);
  }
  // The second step's window [window_begin, end of its compute] into r: slices, busy and
  // exposed times, bytes, the critical path.
  void finish(SimResult& r, double window_begin) const;

 private:
  // seconds: its time as placed; alone_s: with the cores to itself (collectives beside compute differ).
  Done place(SimSlice s, double seconds, const Done& dep, double alone_s = -1);
  void stall(Lane on, double until, int cause);  // compute blocked until `until` on lane `on`
  // Compute blocked at `blocked_at` on slice `until` (comm or copy): re-times the comm lane through
  // it, or through the collective a copy waits for, then the copy lane (see the top).
  void settle(int until, double blocked_at);
  void run_comm_alone(double blocked_at, int until);
  void reflow_copies(double blocked_at);
  double rebegin(int idx, int prev);

  const CostModel& cost_;
  double free_[3] = {0, 0, 0};
  int last_[3] = {-1, -1, -1};
  std::vector<SimSlice> slices_;
  // Per slice: the dependency that bounds its begin (-1: none) and its time with the cores to itself.
  struct Placement {
    int dep = -1;
    double alone_s = 0;
  };
  std::vector<Placement> placement_;
  std::vector<int> lane_slices_[3];  // each lane's slices in lane order
  std::vector<int> step_of_;
  int step_ = 0, op_ = -1;
};

}  // namespace zt
