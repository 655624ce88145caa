// observe.cpp — breakdown lines and fields, traces, the comm log JSONL and the comms_logger
// summary (csrc/app/observe.h).
#include "observe.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "rank_agreement.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {

namespace {
std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, a);
  return buf;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
std::string overlap_text(double pct) { return pct < 0 ? "n/a (no communication)" : fmt("%.0f%%", pct); }
}  // namespace

std::string breakdown_text(const StepBreakdown& b) {
  std::string s = " | fwd " + fmt("%.1f", b.fwd_ms) + " ms bwd " + fmt("%.1f", b.bwd_ms) + " ms optim " +
                  fmt("%.1f", b.optim_ms) + " ms | comm busy " + fmt("%.1f", b.comm_busy_ms) + " ms exposed " +
                  fmt("%.1f", b.comm_exposed_ms) + " ms idle wait " + fmt("%.1f", b.comm_wait_idle_ms) + " ms overlap " +
                  overlap_text(b.overlap_pct());
  if (b.has_copy_lane)
    s += " | copy busy " + fmt("%.1f", b.copy_busy_ms) + " ms exposed " + fmt("%.1f", b.copy_exposed_ms) +
         " ms overlap " + overlap_text(b.copy_overlap_pct());
  return s;
}

void add_breakdown_json(nlohmann::json& row, const StepBreakdown& b) {
  row["fwd_ms"] = b.fwd_ms;
  row["bwd_ms"] = b.bwd_ms;
  row["optim_ms"] = b.optim_ms;
  row["comm_busy_ms"] = b.comm_busy_ms;
  row["comm_exposed_ms"] = b.comm_exposed_ms;
  row["comm_wait_idle_ms"] = b.comm_wait_idle_ms;
  row["overlap_pct"] = b.overlap_pct() < 0 ? nlohmann::json() : nlohmann::json(b.overlap_pct());
  row["breakdown_window_ms"] = b.window_ms;
  row["collectives"] = b.collectives;
  if (b.has_copy_lane) {
    row["copy_busy_ms"] = b.copy_busy_ms;
    row["copy_exposed_ms"] = b.copy_exposed_ms;
    row["copy_overlap_pct"] = b.copy_overlap_pct() < 0 ? nlohmann::json() : nlohmann::json(b.copy_overlap_pct());
  }
}

double own_exposed_ms(const std::vector<std::vector<double>>& per_rank) {
  if (per_rank.empty()) return 0;
  const size_t n = per_rank[0].size();
  const bool aligned = std::all_of(per_rank.begin(), per_rank.end(), [&](const auto& w) { return w.size() == n; });
  double own = 0;
  if (aligned) {
    for (size_t i = 0; i < n; ++i) {
      double least = per_rank[0][i];
      for (const auto& w : per_rank) least = std::min(least, w[i]);
      own += least;
    }
    return own;
  }
  own = INFINITY;
  for (const auto& w : per_rank) {
    double total = 0;
    for (double x : w) total += x;
    own = std::min(own, total);
  }
  return own;
}

namespace {

// Each of the steps' comm waits (exposed ms) as bytes for gather_strings: per step, its wait count
// (uint64) then that many doubles, in the rank's own byte order (every rank runs the same binary).
std::string stall_bytes(const std::vector<StepBreakdown>& steps, size_t from) {
  std::string out;
  const auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  for (size_t k = from; k < steps.size(); ++k) {
    const std::vector<double>& waits = steps[k].comm_stall_exposed_ms;
    const uint64_t n = waits.size();
    put(&n, sizeof(n));
    put(waits.data(), n * sizeof(double));
  }
  return out;
}

// stall_bytes back into [step][wait]; a truncated record (which no rank writes) ends the list.
std::vector<std::vector<double>> parse_stall_bytes(const std::string& bytes) {
  std::vector<std::vector<double>> steps;
  size_t at = 0;
  uint64_t n = 0;
  while (at + sizeof(n) <= bytes.size()) {
    std::memcpy(&n, bytes.data() + at, sizeof(n));
    at += sizeof(n);
    if (n > (bytes.size() - at) / sizeof(double)) break;
    std::vector<double>& step = steps.emplace_back(n);
    std::memcpy(step.data(), bytes.data() + at, n * sizeof(double));
    at += n * sizeof(double);
  }
  return steps;
}

// The median over the steps of own_exposed_ms, from every rank's stall_bytes (rank 0 only).
double median_own_exposed(const std::vector<std::string>& per_rank_bytes) {
  std::vector<std::vector<std::vector<double>>> ranks;  // [rank][step][wait]
  for (const std::string& t : per_rank_bytes) ranks.push_back(parse_stall_bytes(t));
  std::vector<double> own;
  for (size_t k = 0; k < ranks[0].size(); ++k) {
    std::vector<std::vector<double>> step;
    for (const auto& r : ranks) step.push_back(k < r.size() ? r[k] : std::vector<double>{});
    own.push_back(own_exposed_ms(step));
  }
  return median(own);
}

}  // namespace

std::string breakdown_summary(Communicator& comm, const std::vector<StepBreakdown>& steps) {
  const size_t skip = steps.size() > 1 ? 1 : 0;  // the first step warms caches up
  std::vector<double> f, bw, o, busy, ex, idle;
  for (size_t k = skip; k < steps.size(); ++k) {
    f.push_back(steps[k].fwd_ms);
    bw.push_back(steps[k].bwd_ms);
    o.push_back(steps[k].optim_ms);
    busy.push_back(steps[k].comm_busy_ms);
    ex.push_back(steps[k].comm_exposed_ms);
    idle.push_back(steps[k].comm_wait_idle_ms);
  }
  char line[256];
  const double mb = median(busy), me = median(ex);
  std::snprintf(line, sizeof(line),
                "  rank %d: fwd %.1f ms  bwd %.1f ms  optim %.1f ms  comm busy %.1f ms  exposed %.1f ms  idle wait %.1f ms  "
                "overlap %s",
                comm.rank(), median(f), median(bw), median(o), mb, me, median(idle),
                overlap_text(mb > 0 ? std::clamp(100 * (1 - me / mb), 0.0, 100.0) : -1).c_str());
  const std::vector<std::string> all = comm.gather_strings(line, 0, "breakdown summary");
  std::vector<std::string> stalls;
  const size_t from = std::max(skip, steps.size() > kOwnExposedSteps ? steps.size() - kOwnExposedSteps : 0);
  if (comm.world_size() > 1) stalls = comm.gather_strings(stall_bytes(steps, from), 0, "breakdown waits");
  if (comm.rank() != 0) return {};
  std::string out = "wall_clock_breakdown per rank (medians over " + std::to_string(steps.size() - skip) +
                    " steps" + (skip ? ", the first left out" : "") + "):\n";
  for (const std::string& l : all) out += l + "\n";
  if (comm.world_size() > 1 && steps.size() > from)
    out += "  all ranks: exposed " + fmt("%.1f", median_own_exposed(stalls)) +
           " ms the communication's own (each wait's least over the ranks, median over " +
           std::to_string(steps.size() - from) + " steps; the rest of a rank's exposed time waited for slower ranks)\n";
  return out;
}

StepRange parse_step_range(const std::string& flag, const std::string& text) {
  const size_t colon = text.find(':');
  auto num = [&](const std::string& s, int64_t dflt) -> int64_t {
    if (s.empty()) return dflt;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end || v < 1) throw InputError(flag + " '" + text + "': expected FIRST:LAST, 1-based steps (e.g. 3:5 or 3:)");
    return v;
  };
  if (colon == std::string::npos) throw InputError(flag + " '" + text + "': expected FIRST:LAST, 1-based steps (e.g. 3:5 or 3:)");
  StepRange r{num(text.substr(0, colon), 1), num(text.substr(colon + 1), INT64_MAX)};
  if (r.last < r.first) throw InputError(flag + " '" + text + "': LAST is before FIRST");
  return r;
}

double align_clocks(Communicator& comm) {
  const uint64_t seq = comm.barrier("clock sync");
  comm.synchronize();
  const std::optional<CommRecord> r = comm.log().find(seq);
  return r ? r->completed_s : comm.log().now_s();
}

// One rank's trace events: lanes as threads (0 compute, 1 comm, 2 copy), times in µs since the
// start-up barrier; flows from the moment the compute stream handed a bucket's gradients over
// (inside the backward that completed them) to the bucket's reduction, which starts after it.
nlohmann::json trace_events(int rank, const std::vector<StepTimeline>& steps, double origin_s) {
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
  for (Lane l : {Lane::Compute, Lane::Comm, Lane::Copy})
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", static_cast<int>(l)},
                  {"args", {{"name", lane_name(l)}}}});
  auto us = [&](double s) { return (s - origin_s) * 1e6; };
  int64_t flow = static_cast<int64_t>(rank) << 32;
  for (const StepTimeline& st : steps) {
    for (const TimelineSlice& s : st.slices) {
      if (s.grads_ready) continue;  // a flow's source, not a slice
      nlohmann::json e = {{"name", s.name}, {"ph", "X"}, {"pid", rank}, {"tid", static_cast<int>(s.lane)},
                          {"ts", us(s.begin_s)}, {"dur", std::max(0.0, (s.end_s - s.begin_s) * 1e6)},
                          {"cat", lane_name(s.lane)}};
      nlohmann::json args = {{"step", st.step}};
      if (s.lane == Lane::Comm) {
        args.update({{"seq", s.seq}, {"op", s.op}, {"label", s.label}, {"bytes", s.bytes}, {"dtype", s.dtype},
                     {"bucket", s.bucket < 0 ? nlohmann::json() : nlohmann::json(s.bucket)}});
      } else if (s.lane == Lane::Copy) {
        args.update({{"op", s.op}, {"bytes", s.bytes}});
      }
      e["args"] = args;
      ev.push_back(e);
      // Flow: the bucket's latest hand-off before this reduction (gradient accumulation at
      // stages 2-3 hands a bucket over once per micro-step).
      const bool reduction =
          s.lane == Lane::Comm && (s.op == "reduce_scatter" || s.op == "all_reduce" || s.op == "all_to_all");
      if (!reduction || s.bucket < 0) continue;
      const TimelineSlice* src = nullptr;
      for (const TimelineSlice& c : st.slices)
        if (c.grads_ready && c.bucket == s.bucket && c.begin_s <= s.begin_s) src = &c;
      if (!src) continue;
      ++flow;
      ev.push_back({{"name", "grads ready"}, {"cat", "flow"}, {"ph", "s"}, {"id", flow}, {"pid", rank},
                    {"tid", 0}, {"ts", us(src->begin_s)}});
      ev.push_back({{"name", "grads ready"}, {"cat", "flow"}, {"ph", "f"}, {"bp", "e"}, {"id", flow},
                    {"pid", rank}, {"tid", 1}, {"ts", us(s.begin_s)}});
    }
  }
  return ev;
}

void write_trace_file(const std::string& path, const nlohmann::json& events, const std::string& flag) {
  AtomicFile f(path, flag);
  f.write(nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump() + "\n");
  f.commit();
}

namespace {
void write_json(const std::filesystem::path& p, const nlohmann::json& events) { write_trace_file(p.string(), events, "train: --trace"); }
}  // namespace

namespace {
std::filesystem::path rank_trace(const std::string& dir, int rank) {
  return std::filesystem::path(dir) / ("trace.rank" + std::to_string(rank) + ".json");
}
void create_trace_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("train: --trace " + dir + ": cannot create the directory (" + ec.message() + ")");
}
}  // namespace

void check_trace_outputs(const std::string& dir, int rank) {
  create_trace_dir(dir);
  check_output_path(rank_trace(dir, rank).string(), "--trace");
  if (rank == 0) check_output_path((std::filesystem::path(dir) / "trace.json").string(), "--trace");
}

void write_traces(const std::string& dir, Communicator& comm, const std::vector<StepTimeline>& steps,
                  double clock_origin_s) {
  // Each write is agreed before the next exchange: one rank's failure ends every rank (exit 2).
  const MaxOverRanks max = [&comm](const std::vector<int64_t>& v) { return comm.max_over_ranks(v, "trace verdict"); };
  nlohmann::json mine;
  run_agreed(max, comm.rank(), comm.world_size(), "zerotrain train", [&] {
    create_trace_dir(dir);
    mine = trace_events(comm.rank(), steps, clock_origin_s);
    write_json(rank_trace(dir, comm.rank()), mine);
  });
  const std::vector<std::string> all = comm.gather_strings(mine.dump(), 0, "trace events");
  run_agreed(max, comm.rank(), comm.world_size(), "zerotrain train", [&] {
    if (comm.rank() != 0) return;
    nlohmann::json merged = nlohmann::json::array();
    for (const std::string& r : all)
      for (auto& e : nlohmann::json::parse(r)) merged.push_back(std::move(e));
    write_json(std::filesystem::path(dir) / "trace.json", merged);
  });
}

CommLogWriter::CommLogWriter(const std::string& path, const Communicator& comm)
    : out_(per_rank_output(path, comm.rank()), "train: --comm-log", true), comm_(comm) {}

namespace {
// Whether node_send_bytes applies: several nodes, ranks placed blocked.
bool across_nodes(const Communicator& comm) { return comm.node().nodes > 1 && comm.node().blocked; }
}  // namespace

void CommLogWriter::write_completed() {
  const CommLog& log = comm_.log();
  const uint64_t done = log.last_completed();
  const int rank = comm_.rank();
  std::string lines;
  for (; written_ < done; ++written_) {
    const uint64_t seq = written_ + 1;
    const std::optional<CommRecord> r = log.find(seq);
    if (!r) {
      lines += nlohmann::json({{"rank", rank}, {"seq", seq}, {"dropped", true}}).dump() + "\n";
      continue;
    }
    nlohmann::json j = {{"rank", rank},          {"seq", seq},
                        {"op", comm_op_name(r->op)}, {"label", r->label},
                        {"count", r->count},     {"bytes", r->bytes},
                        {"dtype", dtype_name(r->dtype)}, {"issued_s", r->issued_s},
                        {"started_s", r->started_s}, {"completed_s", r->completed_s},
                        {"busy_ms", (r->completed_s - r->started_s) * 1e3}};
    if (across_nodes(comm_)) j["node_send_bytes"] = r->node_send_bytes;
    if (r->ranks > 0) j["ranks"] = r->ranks;  // over a group of ranks (hpZ, qgZ), not the world
    if (r->across) j["across"] = true;         // the group is one rank of each block (qgZ's second hop)
    lines += j.dump() + "\n";
  }
  out_.write(lines);
}

std::string comm_summary(const Communicator& comm, bool all_ops, const std::vector<std::string>& ops) {
  const CommLog& log = comm.log();
  const bool nodes = across_nodes(comm);
  std::string out = "comms_logger (this rank; algbw = bytes / busy time, busbw as nccl-tests";
  out += nodes ? "; to other nodes = bytes each node sends to the others, " + std::to_string(comm.node().nodes) +
                     " nodes of " + std::to_string(comm.local_size()) + " ranks):\n"
               : "):\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-15s %8s %14s %12s %12s %12s%s\n", "op", "count", "bytes", "busy ms", "algbw GB/s",
                "busbw GB/s", nodes ? "  to other nodes" : "");
  out += line;
  for (int i = 0; i < kNumCommOps; ++i) {
    const CommOp op = static_cast<CommOp>(i);
    const CommOpStats s = log.stats(op);
    if (s.calls == 0) continue;
    if (!all_ops && std::find(ops.begin(), ops.end(), comm_op_name(op)) == ops.end()) continue;
    const double n = comm.world_size();
    const double factor = op == CommOp::AllReduce ? 2 * (n - 1) / n
                          : (op == CommOp::ReduceScatter || op == CommOp::AllGather) ? (n - 1) / n
                          : op == CommOp::Broadcast ? 1.0 : 0.0;
    const double alg = s.busy_s > 0 ? static_cast<double>(s.bytes) / s.busy_s / 1e9 : 0;
    std::snprintf(line, sizeof(line), "  %-15s %8llu %14llu %12.2f %12.3f %12.3f", comm_op_name(op),
                  static_cast<unsigned long long>(s.calls), static_cast<unsigned long long>(s.bytes), s.busy_s * 1e3,
                  alg, alg * factor);
    out += line;
    if (nodes) out += "  " + std::to_string(std::llround(s.node_send_bytes)) + " B";
    out += "\n";
  }
  if (!all_ops && ops.empty()) out += "  (no op selected: prof_all is false and prof_ops is empty)\n";
  return out;
}

}  // namespace zt
