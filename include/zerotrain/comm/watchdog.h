// watchdog.h — the hang watchdog shared by both backends.
//
// One thread per communicator polls the oldest collective that has started but not completed.
// When it has been running longer than the timeout, the watchdog prints ONE line:
//   [zerotrain rank R host H] comm watchdog: stuck 5.0 s in #7 all_reduce label="b3"
//   (4096 bytes, fp32); last completed #6 all_gather label="u2"; issued up to #9
// alerts the other ranks over a separate MPI communicator (each of them prints the same kind of
// line about itself, whether or not its own timer expired), waits a short grace period so
// their lines get out, and aborts the job with exit status kExitCommFailure. This works while
// the comm thread is blocked inside MPI or NCCL.
#pragma once
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "zerotrain/comm/comm_log.h"

namespace zt {

// The hang report line for this rank (no trailing newline). `why` ends the line.
std::string hang_report_line(const CommLog& log, const std::string& why);

// The collective that has overrun `timeout_s` at log time `now_s`, if any.
std::optional<CommRecord> stalled_collective(const CommLog& log, double now_s, double timeout_s);

class CommWatchdog {
 public:
  struct Hooks {
    // Called every tick (NCCL: mark completions, check async errors). A non-empty return is a
    // failure line: the watchdog reports it and aborts the job.
    std::function<std::string()> poll;
    std::function<void()> on_abort;   // called just before MPI_Abort (NCCL: ncclCommAbort)
  };
  // `parent`: the communicator whose ranks are alerted (duplicated here; collective call).
  // timeout_s <= 0: only the poll hook runs, nothing ever times out.
  CommWatchdog(const CommLog& log, double timeout_s, MPI_Comm parent, Hooks hooks);
  ~CommWatchdog();  // stops and joins the thread; collective (frees the alert communicator)
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  // Print `line` (prefixed with the process tag) unless this rank already printed its line,
  // alert the other ranks, and abort the job. Usable from any thread.
  [[noreturn]] void fail(const std::string& line);
  double poll_interval_s() const { return poll_s_; }

 private:
  void run();
  void check_alert();
  const CommLog& log_;
  double timeout_s_, poll_s_;
  Hooks hooks_;
  MPI_Comm alert_comm_ = MPI_COMM_NULL;  // MPI_COMM_NULL when MPI is not THREAD_MULTIPLE
  MPI_Request alert_req_ = MPI_REQUEST_NULL;
  int alert_from_ = -1;                  // receive buffer of alert_req_: the alerting rank
  std::atomic<bool> reported_{false};    // this rank printed its line
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> failing_{false};
  std::thread thread_;
};

}  // namespace zt
