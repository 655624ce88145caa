// stop_signals.h — graceful stop on SIGTERM / SIGUSR1 (what Slurm and cloud schedulers send
// before preemption).
//
// Invariants: the handler only records the first signal in a lock-free atomic (async-signal-safe).
// The trainer agrees on "stop requested" once per optimizer step (the maximum over ranks of
// pending(), in the step's control reduction), so one rank receiving the signal stops every rank
// after the same step: each finishes the step, a checkpoint is written when --save-checkpoint is
// set, and the job exits kExitStopped. A second signal to a rank that already has one pending
// ends that process at once (the signal's default action; the job then ends as for a dead rank).
#pragma once

namespace zt {

// A run stopped by a signal after a complete step (and, with --save-checkpoint, a checkpoint
// of that step): EX_TEMPFAIL of sysexits.h, "try again later" — resume with --resume DIR.
constexpr int kExitStopped = 75;

// Installs the handlers for SIGTERM and SIGUSR1 (SA_RESTART) while it lives; restores the
// previous dispositions on destruction. One at a time per process.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first stop signal received (SIGTERM or SIGUSR1), 0 when none.
  static int pending();
};

// "SIGTERM", "SIGUSR1", else "signal N".
const char* stop_signal_name(int sig);

}  // namespace zt
