// step_timer.cpp — markers, stall brackets and the per-step breakdown (step_timer.h).
#include "step_timer.h"

#include <algorithm>

namespace zt {

const char* lane_name(Lane l) {
  switch (l) {
    case Lane::Compute: return "compute";
    case Lane::Comm: return "comm";
    case Lane::Copy: return "copy";
  }
  return "?";
}

namespace {
double overlap_of(double exposed, double busy) {
  if (busy <= 0) return -1;
  return std::clamp(100.0 * (1.0 - exposed / busy), 0.0, 100.0);
}

// Completed collectives, the host-side control exchanges (the trainer's per-step agreement runs
// between steps and belongs to none) left out.
uint64_t completed_data_collectives(const CommLog& log) {
  uint64_t n = 0;
  for (int i = 0; i < kNumCommOps; ++i) {
    const CommOp op = static_cast<CommOp>(i);
    if (op != CommOp::GatherStrings && op != CommOp::MaxOverRanks) n += log.stats(op).completed;
  }
  return n;
}

}  // namespace

double StepBreakdown::overlap_pct() const { return overlap_of(comm_exposed_ms, comm_busy_ms); }
double StepBreakdown::copy_overlap_pct() const { return overlap_of(copy_exposed_ms, copy_busy_ms); }

int StepTimer::take_event() {
  if (used_ == static_cast<int>(pool_.size())) pool_.push_back(dev_.create_event(true));
  return used_++;
}

int StepTimer::take_comm_event() {
  if (comm_free_.empty()) {
    comm_free_.push_back(static_cast<int>(comm_pool_.size()));
    comm_pool_.push_back(dev_.create_event(true));
  }
  const int ev = comm_free_.back();
  comm_free_.pop_back();
  comm_pool_[ev]->record(comm_.stream());
  return ev;
}

void StepTimer::comm_begin() {
  if (active_) open_begin_ = take_comm_event();
}

void StepTimer::comm_end() {
  if (!active_ || open_begin_ < 0) return;
  brackets_.push_back({open_begin_, take_comm_event()});
  open_begin_ = -1;
}

// Re-recording a pooled event later is safe even if it is still pending: it then completes
// with the later record.
void StepTimer::drop_brackets() {
  for (const Bracket& br : brackets_) comm_free_.insert(comm_free_.end(), {br.begin, br.end});
  brackets_.clear();
}

int StepTimer::mark(Kind k, int unit, bool backward) {
  const int ev = take_event();
  pool_[ev]->record(compute_);
  marks_.push_back({ev, k, unit, backward});
  return ev;
}

void StepTimer::micro_begin(bool first_of_step) {
  if (first_of_step) {
    level_ = next_level_;
    active_ = level_ != TimingLevel::Off;
    used_ = 0;
    marks_.clear();
    stalls_.clear();
    handoffs_.clear();
    copies_.clear();
    if (!active_) {
      chained_ = false;
      return;
    }
    if (!chained_) {  // brackets left by an earlier timed step belong to no step now
      drop_brackets();
      completed_snapshot_ = completed_data_collectives(comm_.log());
    }
    first_seq_ = comm_.log().last_issued() + 1;
  }
  if (!active_) return;
  phase_ = Phase::Fwd;
  open_unit_ = -1;
  mark(Kind::MicroBegin);
}

// Position changes close and open unit slices (Trace); the first op after the forwards (the
// loss, or a backward) ends the forward phase.
void StepTimer::before(const StepOp& op) {
  if (!active_) return;
  op_handoff_ = -1;
  const bool trace = level_ == TimingLevel::Trace;
  if (trace) op_first_seq_ = comm_.log().last_issued() + 1;
  if (open_unit_ >= 0 && (op.unit != open_unit_ || op.backward != open_backward_)) close_unit();
  if (phase_ == Phase::Fwd && (op.backward || op.kind == OpKind::Loss)) {
    mark(Kind::FwdDone);
    phase_ = Phase::Bwd;
  }
  if (trace && op.unit >= 0 && open_unit_ < 0) {
    mark(Kind::UnitBegin, op.unit, op.backward);
    open_unit_ = op.unit;
    open_backward_ = op.backward;
  }
}

void StepTimer::after(const StepOp& op) {
  if (!active_ || level_ != TimingLevel::Trace) return;
  if (op.kind == OpKind::Reduce && op_handoff_ >= 0) handoffs_.push_back({op_handoff_, op.bucket});
  const uint64_t last = comm_.log().last_issued();
  if (last < op_first_seq_) return;
  const std::vector<PlannedCollective> planned = op_collectives(plan_, op);
  for (uint64_t seq = op_first_seq_; seq <= last; ++seq) {
    const size_t i = static_cast<size_t>(seq - op_first_seq_);
    seq_bucket_[seq] = i < planned.size() ? planned[i].what.bucket : -1;
  }
}

void StepTimer::close_unit() {
  mark(Kind::UnitEnd, open_unit_, open_backward_);
  open_unit_ = -1;
}

void StepTimer::micro_end() {
  if (!active_) return;
  if (open_unit_ >= 0) close_unit();
  mark(Kind::BwdDone);
  phase_ = Phase::Optim;
}

int StepTimer::hand_off() {
  op_handoff_ = anchor();
  return op_handoff_;
}

int StepTimer::bucket_of_seq(uint64_t seq) {
  const auto it = seq_bucket_.find(seq);
  if (it == seq_bucket_.end()) return -1;
  const int b = it->second;
  seq_bucket_.erase(it);
  return b;
}

void StepTimer::add_copy_slice(std::string name, const char* op, uint64_t bytes, Event& begin, Event& end) {
  if (!active_ || level_ != TimingLevel::Trace || marks_.empty()) return;
  Event& origin = *pool_[marks_.front().ev];
  origin.synchronize();  // recorded before any work of the step: complete long before its copies
  copies_.push_back({std::move(name), op, bytes, begin.elapsed_ms_since(origin), end.elapsed_ms_since(origin)});
}

int StepTimer::anchor() {
  if (!active_) return -1;
  const int ev = take_event();
  pool_[ev]->record(compute_);
  return ev;
}

void StepTimer::wait(Stream& waiter, Event& e, Lane lane, int since) {
  if (!active_ || &waiter != &compute_) return waiter.wait(e);
  const int before = since >= 0 ? since : anchor();
  waiter.wait(e);
  const int after = take_event();
  pool_[after]->record(compute_);
  stalls_.push_back({before, after, lane, phase_});
}

std::optional<StepBreakdown> StepTimer::end_step(int64_t step) {
  if (!active_) return std::nullopt;
  active_ = false;
  const int end = mark(Kind::End);
  pool_[end]->synchronize();  // every marker of the step was recorded before it, on the same stream
  Event& origin = *pool_[marks_.front().ev];
  std::vector<double> t(used_);
  for (int i = 0; i < used_; ++i) t[i] = pool_[i]->elapsed_ms_since(origin);

  StepBreakdown b;
  b.has_copy_lane = has_copy_lane_;
  b.copy_busy_ms = copy_busy_ms_;
  copy_busy_ms_ = 0;
  double prev = 0, last_bwd = 0;  // the phase boundary before the current segment
  for (const Mark& m : marks_) {
    if (m.kind == Kind::FwdDone) b.fwd_ms += t[m.ev] - prev, prev = t[m.ev];
    if (m.kind == Kind::BwdDone) b.bwd_ms += t[m.ev] - prev, prev = last_bwd = t[m.ev];
  }
  b.optim_ms = t[end] - last_bwd;
  b.window_ms = t[end];
  for (const Stall& s : stalls_) {
    const double d = t[s.after] - t[s.before];
    if (s.lane == Lane::Copy) b.copy_exposed_ms += d;
    (s.phase == Phase::Fwd ? b.fwd_ms : s.phase == Phase::Bwd ? b.bwd_ms : b.optim_ms) -= d;
  }
  add_comm_busy(b, origin, t);
  const CommLog& log = comm_.log();
  const uint64_t completed = completed_data_collectives(log);
  b.collectives = static_cast<int64_t>(completed - completed_snapshot_);
  completed_snapshot_ = completed;
  chained_ = true;

  if (level_ == TimingLevel::Trace) {
    std::chrono::steady_clock::time_point tp;
    // Origin on the log's clock: exact where the backend stamps events on the host; otherwise the
    // end marker has just completed, so now - (end - origin) (late by the host's wake-up).
    const double origin_s = origin.completion_time(&tp) ? log.at_s(tp) : log.now_s() - t[end] / 1e3;
    timelines_.push_back({step, {}});
    add_compute_slices(timelines_.back(), t, origin_s);
    for (const CopySlice& c : copies_) {  // one copy stream: already in time order
      TimelineSlice s;
      s.lane = Lane::Copy;
      s.name = c.name;
      s.op = c.op;
      s.bytes = c.bytes;
      s.begin_s = origin_s + c.begin_ms / 1e3;
      s.end_s = origin_s + c.end_ms / 1e3;
      timelines_.back().slices.push_back(std::move(s));
    }
    pending_.push_back({timelines_.size() - 1, first_seq_, log.last_issued()});
  }
  add_completed_collectives();
  return b;
}

// Busy: the brackets that completed by the end of this step (the comm stream completes in
// order, so they are a prefix of brackets_; the rest, e.g. the post-step parameter all-gathers
// still running, count in the next timed step). Brackets are disjoint (one stream) and so are
// stalls (one stream): each comm stall's overlap with the brackets is exposed, its remainder
// idle, so exposed <= busy and exposed + idle = the stalls.
void StepTimer::add_comm_busy(StepBreakdown& b, Event& origin, const std::vector<double>& t) {
  std::vector<std::pair<double, double>> busy;  // [begin, end] in ms since origin
  size_t done = 0;
  for (; done < brackets_.size() && comm_pool_[brackets_[done].end]->query(); ++done) {
    const Bracket& br = brackets_[done];
    Event &begin = *comm_pool_[br.begin], &end = *comm_pool_[br.end];
    // Before the origin (a bracket carried over from the previous step) is a negative time.
    busy.emplace_back(begin.elapsed_ms_since(origin), end.elapsed_ms_since(origin));
    b.comm_busy_ms += end.elapsed_ms_since(begin);
    comm_free_.insert(comm_free_.end(), {br.begin, br.end});
  }
  brackets_.erase(brackets_.begin(), brackets_.begin() + static_cast<std::ptrdiff_t>(done));
  for (const Stall& s : stalls_) {
    if (s.lane != Lane::Comm) continue;
    const double s0 = t[s.before], s1 = t[s.after];
    double covered = 0;
    for (const auto& [c0, c1] : busy) covered += std::max(0.0, std::min(s1, c1) - std::max(s0, c0));
    b.comm_exposed_ms += covered;
    b.comm_stall_exposed_ms.push_back(covered);
    b.comm_wait_idle_ms += (s1 - s0) - covered;
  }
}

void StepTimer::add_compute_slices(StepTimeline& tl, const std::vector<double>& t, double origin_s) {
  auto at = [&](int ev) { return origin_s + t[ev] / 1e3; };
  std::vector<TimelineSlice> out;
  int open = -1, last_bwd = -1;
  for (const Mark& m : marks_) {
    if (m.kind == Kind::UnitBegin) open = m.ev;
    if (m.kind == Kind::BwdDone) last_bwd = m.ev;
    if (m.kind == Kind::UnitEnd && open >= 0) {
      TimelineSlice s;
      s.name = std::string(m.backward ? "bwd u" : "fwd u") + std::to_string(m.unit);
      s.begin_s = at(open);
      s.end_s = at(m.ev);
      s.unit = m.unit;
      s.backward = m.backward;
      out.push_back(std::move(s));
      open = -1;
    }
  }
  if (last_bwd >= 0) {
    TimelineSlice s;
    s.name = "step (norm, optimizer, param sync)";
    s.begin_s = at(last_bwd);
    s.end_s = at(marks_.back().ev);
    out.push_back(std::move(s));
  }
  for (const Stall& st : stalls_) {
    TimelineSlice s;
    s.name = std::string("wait ") + lane_name(st.lane);
    s.begin_s = at(st.before);
    s.end_s = at(st.after);
    out.push_back(std::move(s));
  }
  for (const auto& [ev, bucket] : handoffs_) {
    TimelineSlice s;
    s.name = "grads ready b" + std::to_string(bucket);
    s.begin_s = s.end_s = at(ev);
    s.bucket = bucket;
    s.grads_ready = true;
    out.push_back(std::move(s));
  }
  // Time order; an enclosing slice before the slices it contains (same begin: longer first).
  std::stable_sort(out.begin(), out.end(), [](const TimelineSlice& a, const TimelineSlice& b) {
    return a.begin_s != b.begin_s ? a.begin_s < b.begin_s : a.end_s > b.end_s;
  });
  tl.slices = std::move(out);
}

void StepTimer::add_completed_collectives() {
  const CommLog& log = comm_.log();
  const uint64_t done = log.last_completed();
  for (Pending& p : pending_) {
    for (; p.next <= p.last && p.next <= done; ++p.next) {
      const int bucket = bucket_of_seq(p.next);
      const std::optional<CommRecord> r = log.find(p.next);
      if (!r) continue;  // dropped from the ring (more collectives in flight than its capacity)
      TimelineSlice s;
      s.lane = Lane::Comm;
      s.op = comm_op_name(r->op);
      s.label = r->label;
      s.name = s.op + " " + r->label;
      s.begin_s = r->started_s;
      s.end_s = r->completed_s;
      s.seq = r->seq;
      s.bucket = bucket;
      s.bytes = r->bytes;
      s.dtype = dtype_name(r->dtype);
      timelines_[p.timeline].slices.push_back(std::move(s));
    }
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.next > p.last; }),
                 pending_.end());
}

std::vector<StepTimeline> StepTimer::take_timelines() {
  comm_.synchronize();
  add_completed_collectives();
  pending_.clear();
  seq_bucket_.clear();
  std::vector<StepTimeline> out = std::move(timelines_);
  timelines_.clear();
  return out;
}

}  // namespace zt
