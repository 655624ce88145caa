// watchdog.cpp — per-communicator hang watchdog and out-of-band hang alerts (see watchdog.h).
#include "zerotrain/comm/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/check.h"

namespace zt {

namespace {
constexpr int kAlertTag = 7;
}

std::string hang_report_line(const CommLog& log, const std::string& why) {
  char buf[96];
  std::string line = "comm watchdog: ";
  const double now = log.now_s();
  if (auto cur = log.oldest_incomplete()) {
    if (cur->started()) {
      std::snprintf(buf, sizeof(buf), "stuck %.1f s in ", now - cur->started_s);
    } else {
      std::snprintf(buf, sizeof(buf), "waiting %.1f s for the comm stream to reach ",
                    cur->issued_s >= 0 ? now - cur->issued_s : 0.0);
    }
    line += buf + cur->describe();
  } else {
    line += "not in a collective";
  }
  const uint64_t done = log.last_completed();
  line += "; last completed ";
  if (done == 0) {
    line += "none";
  } else if (auto last = log.find(done)) {
    line += last->describe();
  } else {
    line += "#" + std::to_string(done);
  }
  line += "; issued up to #" + std::to_string(log.last_issued()) + "; " + why;
  return line;
}

std::optional<CommRecord> stalled_collective(const CommLog& log, double now_s, double timeout_s) {
  if (timeout_s <= 0) return std::nullopt;
  auto cur = log.oldest_incomplete();
  if (!cur || !cur->started()) return std::nullopt;  // queued behind compute is not a comm hang
  if (now_s - cur->started_s <= timeout_s) return std::nullopt;
  return cur;
}

CommWatchdog::CommWatchdog(const CommLog& log, double timeout_s, MPI_Comm parent, Hooks hooks)
    : log_(log), timeout_s_(timeout_s), hooks_(std::move(hooks)) {
  poll_s_ = timeout_s > 0 ? std::clamp(timeout_s / 10.0, 0.02, 1.0) : 0.1;
  if (MpiEnvironment::thread_multiple()) {
    ZT_MPI_CHECK(MPI_Comm_dup(parent, &alert_comm_));
    ZT_MPI_CHECK(MPI_Irecv(&alert_from_, 1, MPI_INT, MPI_ANY_SOURCE, kAlertTag, alert_comm_, &alert_req_));
  }
  thread_ = std::thread([this] { run(); });
}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (alert_comm_ != MPI_COMM_NULL) {
    if (alert_req_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&alert_req_);
      MPI_Wait(&alert_req_, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&alert_comm_);
  }
}

void CommWatchdog::run() {
  const auto tick = std::chrono::duration<double>(poll_s_);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, tick, [&] { return stop_; })) return;
    }
    if (hooks_.poll) {
      std::string err = hooks_.poll();
      if (!err.empty()) fail(err);
    }
    check_alert();
    if (auto stuck = stalled_collective(log_, log_.now_s(), timeout_s_)) {
      char why[96];
      std::snprintf(why, sizeof(why), "timeout %.1f s (ZT_COMM_TIMEOUT_S); aborting the job", timeout_s_);
      fail(hang_report_line(log_, why));
    }
  }
}

void CommWatchdog::check_alert() {
  if (alert_req_ == MPI_REQUEST_NULL) return;
  int flag = 0;
  MPI_Test(&alert_req_, &flag, MPI_STATUS_IGNORE);
  if (!flag) return;
  alert_req_ = MPI_REQUEST_NULL;
  if (!reported_.exchange(true)) {
    std::string line = hang_report_line(log_, "alerted by rank " + std::to_string(alert_from_) +
                                                  ", whose watchdog fired");
    std::fprintf(stderr, "[zerotrain %s] %s\n", process_tag().c_str(), line.c_str());
    std::fflush(stderr);
  }
}

void CommWatchdog::fail(const std::string& line) {
  if (failing_.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the first failure aborts the job
  }
  if (!reported_.exchange(true)) {  // one line per rank: not again if an alert already printed it
    std::fprintf(stderr, "[zerotrain %s] %s\n", process_tag().c_str(), line.c_str());
    std::fflush(stderr);
  }
  std::vector<MPI_Request> sends;
  int me = 0, n = 1;
  if (alert_comm_ != MPI_COMM_NULL) {
    MPI_Comm_rank(alert_comm_, &me);
    MPI_Comm_size(alert_comm_, &n);
    sends.resize(static_cast<size_t>(n), MPI_REQUEST_NULL);
    for (int r = 0; r < n; ++r) {
      if (r != me) MPI_Isend(&me, 1, MPI_INT, r, kAlertTag, alert_comm_, &sends[r]);
    }
  }
  // Grace period: keep the alerts moving so the other ranks print their lines, then abort.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(2 * poll_s_ + 0.5);
  while (std::chrono::steady_clock::now() < until) {
    if (!sends.empty()) {
      int all = 0;
      MPI_Testall(static_cast<int>(sends.size()), sends.data(), &all, MPI_STATUSES_IGNORE);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (hooks_.on_abort) hooks_.on_abort();
  MPI_Abort(MPI_COMM_WORLD, kExitCommFailure);
  std::_Exit(kExitCommFailure);
}

}  // namespace zt
