// observe.h — `zerotrain train`'s views of where the time goes (docs/observability.md):
// the wall_clock_breakdown text and JSON fields, the per-rank summary, Chrome/Perfetto traces
// (--trace), the per-collective JSONL (--comm-log) and the comms_logger per-op summary.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/zero/step_timing.h"

namespace zt {

// " | fwd 4.6 ms bwd 7.2 ms optim 0.8 ms | comm busy 0.5 ms exposed 0.4 ms idle wait 0.1 ms overlap 20%".
std::string breakdown_text(const StepBreakdown& b);
// fwd_ms, bwd_ms, optim_ms, comm_busy_ms, comm_exposed_ms, comm_wait_idle_ms, overlap_pct (null: no communication),
// breakdown_window_ms, collectives; copy_* when the engine has a copy lane.
void add_breakdown_json(nlohmann::json& row, const StepBreakdown& b);
// Rank 0 prints one line per rank: medians over the steps after the first; with several ranks one
// more, the communication's own exposed time (own_exposed_ms, over the last kOwnExposedSteps
// steps). Every rank calls it.
std::string breakdown_summary(Communicator& comm, const std::vector<StepBreakdown>& steps);
// Steps whose comm_stall_exposed_ms the summary reads (train drops the lists of older ones).
constexpr size_t kOwnExposedSteps = 256;
// One step's exposed communication without rank skew: a rank that reaches a collective first also
// waits there for the last one. At each wait (per_rank[r][i]: rank r's i-th, ms) the least over the
// ranks is the communication's own (the last rank to arrive waited for nothing else); their sum.
// Ranks that logged different numbers of waits: the least rank total.
double own_exposed_ms(const std::vector<std::vector<double>>& per_rank);

// --trace-steps a:b (1-based, inclusive; "a:" = from a on). InputError naming the flag.
struct StepRange {
  int64_t first = 1, last = INT64_MAX;
  bool contains(int64_t step) const { return step >= first && step <= last; }
};
StepRange parse_step_range(const std::string& flag, const std::string& text);

// Before training, on every rank: DIR can be created and DIR/trace.rank<r>.json (rank 0: also
// DIR/trace.json) can be written. InputError naming --trace otherwise; the caller agrees on it.
void check_trace_outputs(const std::string& dir, int rank);
// Writes DIR/trace.rank<r>.json on every rank and DIR/trace.json (every rank, pid = rank) on
// rank 0, times aligned to each rank's start-up barrier (clock_origin_s, on its comm log clock).
// Flow arrows run from each bucket's gradient hand-off to its reduction. Every rank must call it;
// each write is agreed across ranks (rank_agreement.h), so a failed write is exit 2 everywhere.
void write_traces(const std::string& dir, Communicator& comm, const std::vector<StepTimeline>& steps,
                  double clock_origin_s);
// One rank's trace events (pid = rank; lanes compute / comm / copy as tids 0 / 1 / 2; times in µs
// since origin_s; args.step on every slice; "grads ready" flows from each bucket's hand-off to its
// reduction): the format train --trace writes and scripts/render_step_svg.py draws.
nlohmann::json trace_events(int rank, const std::vector<StepTimeline>& steps, double origin_s);
// {"traceEvents": events, "displayTimeUnit": "ms"} written atomically to path; InputError names flag.
void write_trace_file(const std::string& path, const nlohmann::json& events, const std::string& flag);
// A barrier on the comm stream; returns the barrier's completion time on this rank's log clock
// (the trace's zero: every rank leaves the same barrier at nearly the same moment).
double align_clocks(Communicator& comm);

// --comm-log FILE: one JSON object per completed collective, appended as the run goes (rank r
// writes FILE on rank 0 and FILE.rank<r> elsewhere). On several nodes placed blocked, each
// record also says how many bytes each node sends to the others for it ("node_send_bytes",
// Communicator::node_send_bytes). A collective over a block of ranks rather than the world (hpZ's
// secondary gathers) says its block size ("ranks").
class CommLogWriter {
 public:
  CommLogWriter(const std::string& path, const Communicator& comm);  // comm outlives the writer
  void write_completed();         // every collective of comm's log completed since the last call
  void close() { out_.close(); }  // fsync + close, checked (InputError)
 private:
  StreamFile out_;                // a regular file or a device (core/file_io.h)
  const Communicator& comm_;
  uint64_t written_ = 0;
};

// comms_logger: per op (every op when all_ops, DeepSpeed's prof_all; else only those in ops,
// its prof_ops) count, bytes, busy time and achieved algorithm / bus bandwidth (nccl-tests'
// definitions), for this rank; on several nodes placed blocked, also the bytes each node sends
// to the others (Communicator::node_send_bytes).
std::string comm_summary(const Communicator& comm, bool all_ops, const std::vector<std::string>& ops);

}  // namespace zt
