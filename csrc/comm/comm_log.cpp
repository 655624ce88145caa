// comm_log.cpp — ring of recent collectives and per-op counters (see comm_log.h).
#include "zerotrain/comm/comm_log.h"

#include <cstdio>

#include "zerotrain/core/check.h"

namespace zt {

const char* comm_op_name(CommOp op) {
  static const char* kNames[kNumCommOps] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                            "barrier", "verify_same", "gather_strings", "max_over_ranks",
                                            "all_to_all"};
  int i = static_cast<int>(op);
  return i >= 0 && i < kNumCommOps ? kNames[i] : "?";
}

std::string CommRecord::describe() const {
  char buf[160];
  if (ranks > 0)
    std::snprintf(buf, sizeof(buf), " (%zu bytes, %s, %s of %d ranks)", bytes, dtype_name(dtype),
                  across ? "one rank of each block: group" : "block", ranks);
  else std::snprintf(buf, sizeof(buf), " (%zu bytes, %s)", bytes, dtype_name(dtype));
  return "#" + std::to_string(seq) + " " + comm_op_name(op) + " label=\"" + label + "\"" + buf;
}

CommLog::CommLog(size_t capacity) : t0_(std::chrono::steady_clock::now()), ring_(capacity ? capacity : 1) {}

double CommLog::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double CommLog::at_s(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double>(t - t0_).count();
}

CommRecord* CommLog::slot(uint64_t seq) {
  CommRecord& r = ring_[seq % ring_.size()];
  return r.seq == seq ? &r : nullptr;
}
const CommRecord* CommLog::slot(uint64_t seq) const {
  const CommRecord& r = ring_[seq % ring_.size()];
  return r.seq == seq ? &r : nullptr;
}

uint64_t CommLog::issue(CommOp op, const std::string& label, size_t count, size_t bytes, DType dt,
                       double node_send_bytes, int ranks, bool across) {
  double t = now_s();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t seq = ++last_issued_;
  CommRecord& r = ring_[seq % ring_.size()];
  r = CommRecord{};
  r.seq = seq;
  r.op = op;
  r.label = label;
  r.count = count;
  r.bytes = bytes;
  r.dtype = dt;
  r.node_send_bytes = node_send_bytes;
  r.ranks = ranks;
  r.across = across;
  r.issued_s = t;
  inflight_ops_.push_back(op);
  CommOpStats& s = stats_[static_cast<int>(op)];
  s.calls += 1;
  s.bytes += bytes;
  s.node_send_bytes += node_send_bytes;
  return seq;
}

void CommLog::mark_started(uint64_t seq) {
  double t = now_s();
  std::lock_guard<std::mutex> lock(mu_);
  if (CommRecord* r = slot(seq)) r->started_s = t;
}

void CommLog::mark_completed(uint64_t seq) {
  double t = now_s();
  std::lock_guard<std::mutex> lock(mu_);
  ZT_CHECK(seq == last_completed_ + 1, "collective #" + std::to_string(seq) + " completed out of order (last completed #" +
                                           std::to_string(last_completed_) + ")");
  last_completed_ = seq;
  CommOpStats& s = stats_[static_cast<int>(inflight_ops_.front())];
  inflight_ops_.pop_front();
  s.completed += 1;
  if (CommRecord* r = slot(seq)) {
    if (r->started_s < 0) r->started_s = t;
    r->completed_s = t;
    s.busy_s += t - r->started_s;
  }
}

uint64_t CommLog::last_issued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_issued_;
}

uint64_t CommLog::last_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_completed_;
}

std::optional<CommRecord> CommLog::find(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq == 0) return std::nullopt;
  const CommRecord* r = slot(seq);
  if (!r) return std::nullopt;
  return *r;
}

std::optional<CommRecord> CommLog::oldest_incomplete() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (last_completed_ >= last_issued_) return std::nullopt;
  uint64_t seq = last_completed_ + 1;
  if (const CommRecord* r = slot(seq)) return *r;
  CommRecord r;
  r.seq = seq;
  r.label = "(dropped from the log)";
  return r;
}

std::vector<CommRecord> CommLog::recent(size_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CommRecord> out;
  uint64_t first = last_issued_ > n ? last_issued_ - n + 1 : 1;
  for (uint64_t s = first; s <= last_issued_; ++s) {
    if (const CommRecord* r = slot(s)) out.push_back(*r);
  }
  return out;
}

CommOpStats CommLog::stats(CommOp op) const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_[static_cast<int>(op)];
}

void CommLog::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = {};
}

}  // namespace zt
