// step_timer.h — the engine's stream-side clock (wall_clock_breakdown and --trace): markers and
// stall brackets recorded as timing events on the compute stream, busy brackets recorded on the
// comm stream, the comm log's stamps for the trace's collective slices.
// include/zerotrain/zero/step_timing.h says what each number means.
//
// Invariants: at TimingLevel::Off no event is created or recorded and wait() is Stream::wait.
// A level set with set_level() applies from the next step's first micro-step, so a step is timed
// entirely or not at all. Events come from a pool reused every step (never freed mid-step: the
// step's events are read in end_step(), after the step's last marker completed). Comm-stream
// brackets have their own pool: a bracket can outlive its step (the post-step parameter
// all-gathers), so its events return to the pool only once it has been read or dropped.
//
// The engine runs every op of the step program (step_program.h) between before(op) and
// after(op): the ops' schedule positions give the unit slices (Trace) and the forward ->
// backward phase change, a Reduce op's hand-off is its bucket's "grads ready", and each
// collective an op issued gets its bucket from the op's typed labels (op_collectives), matched
// to the comm log by sequence number.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/zero/step_program.h"
#include "zerotrain/zero/step_timing.h"

namespace zt {

class StepTimer {
 public:
  StepTimer(Device& dev, Stream& compute, Communicator& comm, const ZeroPlan& plan)
      : dev_(dev), compute_(compute), comm_(comm), plan_(plan) {}

  void set_level(TimingLevel l) { next_level_ = l; }
  // Markers on the compute stream (no-ops unless this step is timed): a micro-step's start and
  // end, and around each op of the step program.
  void micro_begin(bool first_of_step);
  void before(const StepOp& op);
  void after(const StepOp& op);
  void micro_end();
  // `waiter`.wait(e) where e was recorded on `lane`; on the compute stream of a timed step the
  // blocked time is bracketed and counted as a stall on that lane. `since`: an anchor() recorded
  // earlier in this step, with no compute work between it and this wait, where the stall begins
  // (so a compute thread descheduled right after a hand-off still counts as waiting); -1: now.
  void wait(Stream& waiter, Event& e, Lane lane, int since = -1);
  // A compute-stream marker recorded now for a later wait(..., since); -1 when not timed.
  int anchor();
  // anchor() for a compute -> comm hand-off (EngineContext::comm_waits_for_compute); the last
  // one inside a Reduce op marks its bucket's gradients ready (Trace).
  int hand_off();
  // Work the engine enqueues on the comm stream between comm_begin() and comm_end() (collectives
  // and their post-processing) is one busy bracket: two timing events on the comm stream. Call
  // comm_begin() after the comm stream's wait for compute, and record the events compute will
  // wait on for this work after comm_end(), so a stall that ended implies its bracket ended.
  void comm_begin();
  void comm_end();
  // The engine has a copy lane (offload): report copy_* figures.
  void add_copy_lane() { has_copy_lane_ = true; }
  // Inside a timed step (the copy lane brackets its copies only then).
  bool timing() const { return active_; }
  // Whether the micro-step about to begin is timed (the level applies from a step's first one).
  bool times_micro_step(bool first_of_step) const { return first_of_step ? next_level_ != TimingLevel::Off : active_; }
  // Milliseconds the copy stream spent copying during this step (measured by the copy lane
  // from timing events around each copy); reported as copy_busy_ms by end_step().
  void add_copy_busy_ms(double ms) { copy_busy_ms_ += ms; }
  // Trace: one copy of this step on the copy lane, bracketed by two timing events recorded on
  // the copy stream around it (both complete when called); op "d2h" or "h2d".
  void add_copy_slice(std::string name, const char* op, uint64_t bytes, Event& begin, Event& end);
  // At the end of step(): blocks until the step's compute work completed, then returns its
  // breakdown (nullopt when the step was not timed). With Trace, the step's compute slices are
  // added to the timelines; its collectives (seq range issued during the step) join them as
  // they complete, at a later end_step() or at take_timelines().
  std::optional<StepBreakdown> end_step(int64_t step);
  // Waits for the comm stream, completes every traced step's collectives and hands them over.
  std::vector<StepTimeline> take_timelines();

 private:
  enum class Phase : uint8_t { Fwd, Bwd, Optim };
  enum class Kind : uint8_t { MicroBegin, FwdDone, BwdDone, UnitBegin, UnitEnd, End };
  struct Mark {
    int ev;
    Kind kind;
    int unit = -1;
    bool backward = false;
  };
  struct Stall {
    int before, after;
    Lane lane;
    Phase phase;
  };
  struct Bracket {
    int begin, end;  // indices into comm_pool_
  };
  struct CopySlice {
    std::string name;
    const char* op;
    uint64_t bytes;
    double begin_ms, end_ms;  // since the step's first marker
  };
  int mark(Kind k, int unit = -1, bool backward = false);  // records a pooled event on compute
  void close_unit();      // Trace: the open unit slice ends
  int bucket_of_seq(uint64_t seq);  // the bucket of a traced collective (-1: none), consumed
  int take_event();
  int take_comm_event();  // records a comm_pool_ event on the comm stream
  void drop_brackets();   // every pending bracket's events back to the pool, unread
  // Completed brackets (in stream order) -> busy; comm stalls split into exposed (overlapping a
  // bracket) and idle (the rest). `origin` is the step's first marker, t_ms its markers' times.
  void add_comm_busy(StepBreakdown& b, Event& origin, const std::vector<double>& t_ms);
  void add_compute_slices(StepTimeline& tl, const std::vector<double>& t_ms, double origin_log_s);
  void add_completed_collectives();  // pending seq ranges -> comm slices, as far as complete

  Device& dev_;
  Stream& compute_;
  Communicator& comm_;
  const ZeroPlan& plan_;
  TimingLevel next_level_ = TimingLevel::Off, level_ = TimingLevel::Off;
  bool active_ = false;   // inside a timed step
  Phase phase_ = Phase::Optim;
  bool has_copy_lane_ = false;
  double copy_busy_ms_ = 0;       // this step's copy-lane busy time so far
  std::vector<std::unique_ptr<Event>> pool_;  // timing events; [0, used_) belong to this step
  int used_ = 0;
  std::vector<Mark> marks_;
  std::vector<Stall> stalls_;
  std::vector<std::pair<int, int>> handoffs_;      // Trace: (anchor event, bucket) per gradient hand-off
  std::vector<CopySlice> copies_;                  // Trace: this step's copy-lane copies
  int open_unit_ = -1;            // Trace: the unit slice open now (-1: none) ...
  bool open_backward_ = false;    // ... and whether it is a backward
  int op_handoff_ = -1;           // the last hand_off() inside the current op (-1: none)
  uint64_t op_first_seq_ = 0;     // Trace: the first collective the current op may issue
  std::map<uint64_t, int> seq_bucket_;  // Trace: traced collectives' buckets, until added to a timeline
  std::vector<std::unique_ptr<Event>> comm_pool_;  // comm-stream timing events
  std::vector<int> comm_free_;                     // indices of comm_pool_ not in a bracket
  std::vector<Bracket> brackets_;                  // recorded, not yet counted; in stream order
  int open_begin_ = -1;                            // comm_begin() without its comm_end() yet
  bool chained_ = false;          // the previous step was timed: the snapshots below are its end
  uint64_t completed_snapshot_ = 0;  // the log's completed data collectives at the previous timed step's end
  uint64_t first_seq_ = 0;        // first collective issued in this step
  struct Pending {
    size_t timeline;              // index into timelines_
    uint64_t next, last;          // collectives [next, last] not yet added
  };
  std::vector<Pending> pending_;
  std::vector<StepTimeline> timelines_;
};

}  // namespace zt
