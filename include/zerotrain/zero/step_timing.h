// step_timing.h — where a training step's time goes, measured on the streams themselves
// (wall_clock_breakdown, --trace). Nothing here is a host timer around an asynchronous call.
//
// How each number is measured (both backends, one code path: csrc/zero/step_timer.cpp):
//  * Markers are timing events recorded on the compute stream: before the first forward of each
//    micro-step, after its last forward, after its last backward, and at the end of step().
//    Their differences are compute-stream time (CUDA: GPU timestamps; CPU: the stream worker
//    stamps the event's completion on the process's steady clock).
//  * A stall is the compute stream blocked in Stream::wait on another stream's event: the engine
//    brackets every such wait with two timing events on the compute stream; the second completes
//    only when the wait is satisfied, so (after - before) is exactly the blocked time (CPU: the
//    worker thread's time inside the wait task; CUDA: cudaStreamWaitEvent between two events).
//    Every comm -> compute dependency of a step goes through such a wait (the step has no other
//    host-side wait on the comm stream), so the stalls on comm events cover the exposed
//    communication, "communication outside any compute" included.
//  * comm_busy: the comm stream's own timing events around every group of work the engine
//    enqueues on it (the collectives and their post-processing on that stream: the add into the
//    shard accumulator, casts, offload_param's staging copy), recorded after the comm stream's
//    wait for compute — so the time the comm stream sat waiting is not busy.
//  * A comm stall is split by those brackets: the part while the comm stream was executing is
//    comm_exposed, the rest (the comm thread not yet scheduled after the compute hand-off, the
//    compute thread waking up after the event, an event already complete) is comm_wait_idle.
//    So comm_exposed <= comm_busy and comm_exposed + comm_wait_idle = the comm stalls.
// Invariant: fwd + bwd + optim + comm_exposed + comm_wait_idle + copy_exposed == window (the
// compute stream's span of the step, first forward to the end of step()), by construction: each
// stall is attributed to the phase it was issued in and subtracted from that phase's span.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zt {

// What the engine records: Off (nothing; no event, no wait, no cost), Breakdown (per-step
// totals; step() waits once for the step's compute work to finish), Trace (Breakdown + one slice
// per unit, stall and collective for a timeline).
enum class TimingLevel : uint8_t { Off = 0, Breakdown, Trace };

// The stream a stall waited for.
enum class Lane : uint8_t { Compute = 0, Comm, Copy };
const char* lane_name(Lane l);  // "compute", "comm", "copy"

struct StepBreakdown {
  double window_ms = 0;        // compute-stream span: first forward marker -> end of step()
  double fwd_ms = 0;           // forward units (+ the host's hand-off between micro-steps), stalls excluded
  double bwd_ms = 0;           // backward units + bucket hand-offs, stalls excluded
  double optim_ms = 0;         // norm, step statistics, optimizer, param-sync issue, stalls excluded
  double comm_busy_ms = 0;     // comm stream executing collectives + their post-processing (brackets done by the step's end)
  double comm_exposed_ms = 0;  // compute stream stalled on communication events while the comm stream was busy
  double comm_wait_idle_ms = 0;  // the rest of those stalls: the comm stream not executing (scheduling, wake-ups)
  double copy_busy_ms = 0;     // copy lane (offload) busy, when the engine has one
  double copy_exposed_ms = 0;  // compute stream stalled on copy-lane events
  bool has_copy_lane = false;
  int64_t collectives = 0;     // collectives completed during the step
  // comm_exposed_ms wait by wait: each stall of the compute stream on communication, in the compute
  // stream's order (every rank runs the same program, so the same waits in the same order).
  std::vector<double> comm_stall_exposed_ms;
  // 100 * (1 - exposed / busy), clamped to [0, 100]; -1 when nothing was communicated.
  double overlap_pct() const;
  double copy_overlap_pct() const;
};

// One slice of a step's timeline, in seconds on the communicator log's clock (CommLog::now_s).
struct TimelineSlice {
  Lane lane = Lane::Compute;
  std::string name;             // "fwd u3", "bwd u1", "step", "wait comm", "reduce_scatter b4", ...
  double begin_s = 0, end_s = 0;
  // Collectives (comm lane) and copies (copy lane: op "d2h" / "h2d", bytes) only:
  uint64_t seq = 0;
  std::string op, label, dtype;
  int bucket = -1;              // the bucket of the op that issued it (step program); -1: none
  uint64_t bytes = 0;
  int unit = -1;                // compute unit slices: the unit; -1 otherwise
  bool backward = false;        // compute unit slices: a backward
  // Compute lane, zero length: the moment the compute stream handed bucket `bucket`'s complete
  // gradients to the comm stream (the trace's "grads ready" flow starts here; not a slice).
  bool grads_ready = false;
};

struct StepTimeline {
  int64_t step = 0;
  std::vector<TimelineSlice> slices;  // compute, stall, hand-off and comm slices, each lane in time order
};

}  // namespace zt
