// metrics_writer.cpp — the metrics JSONL and the memory report JSON.
#include "metrics_writer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "observe.h"
#include "zerotrain/core/check.h"

namespace zt {

namespace {

nlohmann::json memory_json(const ZeroEngine& engine, const Communicator& comm) {
  const int rank = comm.rank();
  nlohmann::json cats = nlohmann::json::object();
  for (const MemoryLine& l : engine.memory_lines()) {
    nlohmann::json c;
    c["predicted_bytes"] = l.predicted < 0 ? nlohmann::json() : nlohmann::json(l.predicted);
    c["measured_bytes"] = l.measured;
    c["peak_bytes"] = l.peak;
    c["reserved_bytes"] = l.reserved;
    cats[mem_category_name(l.category)] = c;
  }
  // Pool, memory outside the tracker, and the device's own figure (null on the CPU backend).
  const DeviceMemory d = engine.device_memory();
  nlohmann::json outside = nlohmann::json::object();
  for (const OutsideTrackerMemory& o : d.outside) outside[o.category] = {{"bytes", o.bytes}, {"measured_by", o.measured_by}};
  nlohmann::json device = {
      {"pool", {{"reserved_bytes", d.pool_reserved}, {"in_use_bytes", d.pool_in_use}, {"cached_bytes", d.pool_cached},
                {"device_allocations", d.pool_device_allocations}, {"reuses", d.pool_reuses},
                {"cross_stream_waits", d.pool_cross_stream_waits}}},
      {"reserved_bytes", d.tracked_reserved},  // device categories, direct allocations + pool blocks
      {"outside_tracker", outside},            // {} on the CPU backend
      {"outside_tracker_bytes", d.outside_total},
      {"used_bytes", d.device_used < 0 ? nlohmann::json() : nlohmann::json(d.device_used)}};
  nlohmann::json process_rows = nlohmann::json::object();
  for (const ProcessMemoryRow& r : d.process.rows) process_rows[r.name] = r.bytes;
  // The rank's resident host memory by kind (/proc/self/smaps), null where it cannot be read.
  const nlohmann::json process = d.process.available
      ? nlohmann::json{{"rows", process_rows}, {"resident_bytes", d.process.resident}, {"vm_rss_bytes", d.process.vm_rss},
                       {"vm_hwm_bytes", d.process.vm_hwm}}
      : nlohmann::json();
  const OffloadOptions& off = engine.options().offload;
  nlohmann::json host = off.optimizer ? nlohmann::json{{"optimizer_pinned", off.pin_memory}} : nlohmann::json();
  if (off.params) host["params_pinned"] = off.param_pin_memory;
  return {{"rank", rank},
          {"host", process_info().host},  // where the rank ran: its node by host name, index and local rank
          {"node", comm.node().node},
          {"local_rank", comm.local_rank()},
          {"categories", cats},
          {"host_memory", host},  // null without offload
          {"device", device},
          {"process", process},
          {"zero_paper_model_state_bytes", engine.zero_paper_model_state_bytes()}};
}

nlohmann::json tracker_json(const MemoryTracker& mem) {
  nlohmann::json out = nlohmann::json::object();
  for (int c = 0; c < kNumMemCategories; ++c) {
    const MemCategory cat = static_cast<MemCategory>(c);
    out[mem_category_name(cat)] = {{"current_bytes", mem.current(cat)}, {"peak_bytes", mem.peak(cat)},
                                   {"reserved_bytes", mem.reserved(cat)}};
  }
  return out;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path) : out_(path, "train: --metrics", true) {}

void MetricsWriter::write_step(const StepStats& st, const StepThroughput& tp, int64_t samples_done,
                               double tokens_per_sample, const MemoryTracker& mem, std::optional<double> val_loss) {
  nlohmann::json m = {{"step", st.step}, {"loss", st.loss}, {"lr", st.lr}, {"grad_norm", st.grad_norm},
                      {"clip_coef", st.clip_coefficient}, {"loss_scale", st.loss_scale},
                      {"skipped", st.skipped}, {"skipped_steps", st.skipped_steps}, {"samples", samples_done},
                      {"tokens", static_cast<int64_t>(samples_done * tokens_per_sample)},
                      {"step_ms", tp.step_s * 1e3}, {"tokens_per_s", tp.tokens_per_s},
                      {"samples_per_s", tp.samples_per_s}, {"tflops", tp.tflops},
                      {"mfu", tp.has_mfu() ? nlohmann::json(tp.mfu()) : nlohmann::json()},
                      {"mem_peak_bytes", mem.peak_total()}, {"memory", tracker_json(mem)},
                      {"val_loss", val_loss ? nlohmann::json(*val_loss) : nlohmann::json()}};
  if (st.breakdown) add_breakdown_json(m, *st.breakdown);  // wall_clock_breakdown
  out_.write(m.dump() + "\n");
}

void write_memory_report(const std::string& path, const ZeroEngine& engine, Communicator& comm, int stage) {
  std::vector<std::string> per_rank = comm.gather_strings(memory_json(engine, comm).dump(), 0, "memory report");
  if (comm.rank() != 0) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (const std::string& r : per_rank) ranks.push_back(nlohmann::json::parse(r));
  AtomicFile f(path, "train: --memory-report", true);
  f.write(nlohmann::json({{"stage", stage}, {"world_size", comm.world_size()}, {"ranks", ranks}}).dump(2) + "\n");
  f.commit();
}

}  // namespace zt
