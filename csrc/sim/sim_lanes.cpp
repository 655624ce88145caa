// sim_lanes.cpp — in-order lanes with dependencies (sim_lanes.h).
#include "sim_lanes.h"

#include <algorithm>

namespace zt {

Done SimLanes::place(SimSlice s, double seconds, const Done& dep, double alone_s) {
  const int l = static_cast<int>(s.lane);
  const double ready = end(dep);
  const bool dep_later = dep.slice >= 0 && ready > free_[l];
  s.begin_s = dep_later ? ready : free_[l];
  s.end_s = s.begin_s + seconds;
  s.cause = dep_later ? dep.slice : last_[l];
  s.op = op_;
  slices_.push_back(std::move(s));
  step_of_.push_back(step_);
  placement_.push_back({dep.slice, alone_s >= 0 ? alone_s : seconds});
  const int idx = static_cast<int>(slices_.size()) - 1;
  lane_slices_[l].push_back(idx);
  free_[l] = slices_.back().end_s;
  last_[l] = idx;
  return {free_[l], idx, slices_.back().lane};
}

void SimLanes::compute(const std::string& name, double seconds) {
  SimSlice s;
  s.lane = Lane::Compute;
  s.name = name;
  place(std::move(s), seconds, {});
}

// A wait on a copy (an offloaded reduction's) is a wait on its reduction until that reduction
// ends (no later than the copy's start): the stall is split there, so exposed copy time never
// counts the comm lane's, and a copy queued behind other copies counts as copy time.
void SimLanes::wait(const Done& d) {
  if (d.slice < 0) return;
  settle(d.slice, free_[0]);
  if (end(d) <= free_[0]) return;
  const SimSlice& waited = slices_[static_cast<size_t>(d.slice)];
  if (d.lane == Lane::Copy && waited.begin_s > free_[0] && waited.cause >= 0 && waited.cause != d.slice) {
    const SimSlice& before = slices_[static_cast<size_t>(waited.cause)];
    if (before.lane == Lane::Comm) stall(Lane::Comm, std::min(waited.begin_s, before.end_s), waited.cause);
  }
  stall(d.lane, end(d), d.slice);
}

void SimLanes::settle(int until, double blocked_at) {
  if (!cost_.comm_shares_cores()) return;
  const SimSlice& s = slices_[static_cast<size_t>(until)];
  if (s.lane == Lane::Comm) {
    run_comm_alone(blocked_at, until);
    reflow_copies(blocked_at);
  } else if (s.lane == Lane::Copy) {
    const int dep = placement_[static_cast<size_t>(until)].dep;
    if (dep >= 0 && slices_[static_cast<size_t>(dep)].lane == Lane::Comm) run_comm_alone(blocked_at, dep);
    reflow_copies(blocked_at);
  }
}

// When slice idx may begin behind prev, its lane's slice before it (-1: none): the later of its
// dependency's end and prev's (0 for neither); that one becomes its cause.
double SimLanes::rebegin(int idx, int prev) {
  SimSlice& k = slices_[static_cast<size_t>(idx)];
  const Placement& p = placement_[static_cast<size_t>(idx)];
  const double ready = p.dep >= 0 ? slices_[static_cast<size_t>(p.dep)].end_s : 0;
  const double after = prev >= 0 ? slices_[static_cast<size_t>(prev)].end_s : 0;
  k.cause = p.dep >= 0 && ready > after ? p.dep : prev;
  return std::max(ready, after);
}

// From the first comm slice still running at `blocked_at` through `until`, each runs at its own
// time from when it may begin (and compute has left the core), never ending later than placed;
// the slices after `until` keep their beside-compute lengths, pulled up behind it.
void SimLanes::run_comm_alone(double blocked_at, int until) {
  const std::vector<int>& comm = lane_slices_[static_cast<int>(Lane::Comm)];
  if (slices_[static_cast<size_t>(until)].end_s <= blocked_at) return;
  size_t pos = comm.size();
  while (pos > 0 && comm[pos - 1] != until) --pos;
  size_t first = pos - 1;
  while (first > 0 && slices_[static_cast<size_t>(comm[first - 1])].end_s > blocked_at) --first;
  int prev = first > 0 ? comm[first - 1] : -1;
  for (size_t i = first; i < comm.size(); ++i) {
    SimSlice& k = slices_[static_cast<size_t>(comm[i])];
    const double begin = rebegin(comm[i], prev), length = k.end_s - k.begin_s;
    const double alone = placement_[static_cast<size_t>(comm[i])].alone_s;
    k.end_s = i < pos ? std::min(k.end_s, std::max(begin, blocked_at) + alone) : begin + length;
    k.begin_s = begin;
    prev = comm[i];
  }
  free_[static_cast<int>(Lane::Comm)] = slices_[static_cast<size_t>(prev)].end_s;
}

// Copies keep their lengths and begin when their dependency and the copy before them are done.
// A copy ended by `blocked_at` stays: its dependency ended before it, and run_comm_alone moves
// no collective that ended by then; so the walk starts at the first copy still running.
void SimLanes::reflow_copies(double blocked_at) {
  const std::vector<int>& copies = lane_slices_[static_cast<int>(Lane::Copy)];
  size_t first = copies.size();
  while (first > 0 && slices_[static_cast<size_t>(copies[first - 1])].end_s > blocked_at) --first;
  if (first == copies.size()) return;
  int prev = first > 0 ? copies[first - 1] : -1;
  for (size_t i = first; i < copies.size(); ++i) {
    const int idx = copies[i];
    SimSlice& k = slices_[static_cast<size_t>(idx)];
    const double begin = rebegin(idx, prev), length = k.end_s - k.begin_s;
    k.begin_s = begin;
    k.end_s = begin + length;
    prev = idx;
  }
  if (prev >= 0) free_[static_cast<int>(Lane::Copy)] = slices_[static_cast<size_t>(prev)].end_s;
}

void SimLanes::stall(Lane on, double until, int cause) {
  if (until <= free_[0]) return;
  SimSlice s;
  s.lane = Lane::Compute;
  s.name = std::string("wait ") + lane_name(on);
  s.op_name = lane_name(on);
  s.stall = true;
  const Done r = place(std::move(s), until - free_[0], {});
  slices_[static_cast<size_t>(r.slice)].cause = cause;  // what compute waited for
}

Done SimLanes::collective(const PlannedCollective& c, int world, const Done& dep, double extra_s, double handoff_s) {
  SimSlice s;
  s.lane = Lane::Comm;
  s.op_name = comm_op_name(c.op);
  s.name = s.op_name + " " + c.label;
  s.label = c.label;
  s.dtype = dtype_name(c.dtype);
  s.coll = c.op;
  s.collective = true;
  s.bucket = c.what.bucket;
  s.bytes = static_cast<double>(c.bytes);
  s.ring_bytes = ring_bytes_per_rank(c.op, c.bytes, c.group.size(world));
  s.handoff_s = handoff_s;
  const double alone = cost_.collective_seconds(c.op, static_cast<double>(c.bytes), c.group) + extra_s;
  return place(std::move(s), cost_.beside_compute_seconds(alone), dep, alone);
}

Done SimLanes::copy(const std::string& name, const char* op, double bytes, double seconds, const Done& dep) {
  SimSlice s;
  s.lane = Lane::Copy;
  s.name = name;
  s.op_name = op;
  s.bytes = bytes;
  return place(std::move(s), seconds, dep);
}

namespace {
// A slice of the reported step into its lane's busy time, a stall into the exposed time of the
// lane it waited for, a collective into the step's bytes.
void account(SimResult& r, const SimSlice& k) {
  const double d = k.end_s - k.begin_s;
  if (k.stall) (k.op_name == lane_name(Lane::Copy) ? r.copy_exposed_s : r.comm_exposed_s) += d;
  else if (k.lane == Lane::Compute) r.compute_busy_s += d;
  else if (k.lane == Lane::Comm) r.comm_busy_s += d;
  else r.copy_busy_s += d;
  if (k.collective) {
    r.comm_ring_bytes_per_rank += k.ring_bytes;
    ++r.collectives;
  }
}
}  // namespace

void SimLanes::finish(SimResult& r, double t0) const {
  std::vector<int> kept(slices_.size(), -1);
  for (size_t i = 0; i < slices_.size(); ++i) {
    if (step_of_[i] == 0 && slices_[i].end_s <= t0) continue;
    kept[i] = static_cast<int>(r.slices.size());
    SimSlice s = slices_[i];
    s.begin_s -= t0;
    s.end_s -= t0;
    if (s.handoff_s >= 0) s.handoff_s -= t0;
    if (step_of_[i] == 0) s.op = -1;
    r.slices.push_back(std::move(s));
    if (step_of_[i] == 1) account(r, r.slices.back());
  }
  for (SimSlice& s : r.slices) s.cause = s.cause >= 0 ? kept[static_cast<size_t>(s.cause)] : -1;
  r.step_s = free_[0] - t0;
  r.compute_ops_s = r.compute_busy_s;
  for (int i = last_[0] >= 0 ? kept[static_cast<size_t>(last_[0])] : -1; i >= 0; i = r.slices[static_cast<size_t>(i)].cause)
    r.critical_path.push_back(i);
  std::reverse(r.critical_path.begin(), r.critical_path.end());
}

}  // namespace zt
