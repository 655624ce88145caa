// sim_lanes.h — the three in-order lanes of the step simulator (compute, comm, copy): each piece
// of work starts when its lane is free and its dependency is done, and remembers which of the
// two set its start (the critical path's links). Used by csrc/sim/simulate.cpp only.
#pragma once
#include <string>
#include <vector>

#include "zerotrain/sim/simulate.h"

namespace zt {

// A point some later work can depend on: the end of slice `slice` (-1: nothing, time 0).
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
  // The second step's window [window_begin, end of its compute] into r: slices, busy and
  // exposed times, bytes, the critical path.
  void finish(SimResult& r, double window_begin) const;

 private:
  Done place(SimSlice s, double seconds, const Done& dep);
  void stall(Lane on, double until, int cause);  // compute blocked until `until` on lane `on`

  const CostModel& cost_;
  double free_[3] = {0, 0, 0};
  int last_[3] = {-1, -1, -1};
  std::vector<SimSlice> slices_;
  std::vector<int> step_of_;
  int step_ = 0, op_ = -1;
};

}  // namespace zt
